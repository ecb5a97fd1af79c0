/*
 * Power fencing (config.json's "power_fence"; fence.h, nodes.c): the state
 * machine decides that a silent node is to be powered off; here its
 * command runs, without a shell, {node} and {addr} in its words replaced
 * by the node's name and its agent's address, killed at its timeout. Its
 * exit says whether the node is off (0), as a STONITH agent's does; the
 * first lines it printed go to the log either way.
 */
#include "internal.h"

#include <signal.h>
#include <string.h>

#define POWER_OUTPUT_MAX 2048 /* of its output, kept for the log */

struct power_run {
	struct server *s;
	struct power_run *prev, *next;
	char node[MODEL_NAME_MAX];
	uv_process_t proc;
	uv_pipe_t out;
	uv_timer_t timer;
	int open;
	int64_t status;
	bool timed_out;
	char said[POWER_OUTPUT_MAX];
	size_t nsaid;
};

static void run_closed(uv_handle_t *h)
{
	struct power_run *p = h->data;
	struct server *s = p->s;
	if (--p->open) {
		s->open_handles--;
		return;
	}
	if (p->prev)
		p->prev->next = p->next;
	else
		s->power_runs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	while (p->nsaid && (p->said[p->nsaid - 1] == '\n' || p->said[p->nsaid - 1] == ' '))
		p->nsaid--;
	p->said[p->nsaid] = '\0';
	bool ok = p->status == 0 && !p->timed_out;
	char detail[POWER_OUTPUT_MAX + 64];
	if (p->timed_out)
		snprintf(detail, sizeof(detail), "it ran past its timeout of %llds%s%s",
			 (long long)s->st.sched.power_fence_timeout_s, p->nsaid ? ": " : "",
			 p->said);
	else
		snprintf(detail, sizeof(detail), "it exited with %lld%s%s", (long long)p->status,
			 p->nsaid ? ": " : "", p->said);
	if (ok)
		log_warn("node %s: power_fence says it is off%s%s", p->node, p->nsaid ? ": " : "",
			 p->said);
	if (!s->stopping)
		state_node_powered_off(&s->st, p->node, ok, detail, server_now_ms(s), tk_mono_ms());
	free(p);
	if (--s->open_handles == 0 && s->stop_cb)
		s->stop_cb(s->stop_arg);
}

static void out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[4096];
	*buf = uv_buf_init(scratch, sizeof(scratch));
}

static void out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct power_run *p = st->data;
	if (n > 0) {
		size_t take = MIN((size_t)n, sizeof(p->said) - 1 - p->nsaid);
		memcpy(p->said + p->nsaid, buf->base, take);
		p->nsaid += take;
	}
	if (n < 0 && !uv_is_closing((uv_handle_t *)st))
		uv_close((uv_handle_t *)st, run_closed);
}

static void run_exit(uv_process_t *h, int64_t status, int sig)
{
	struct power_run *p = h->data;
	p->status = sig ? 128 + sig : status;
	uv_close((uv_handle_t *)&p->timer, run_closed);
	uv_close((uv_handle_t *)h, run_closed);
}

static void run_deadline(uv_timer_t *t)
{
	struct power_run *p = t->data;
	p->timed_out = true;
	if (!uv_is_closing((uv_handle_t *)&p->proc))
		uv_process_kill(&p->proc, SIGKILL);
}

/* word with {node} and {addr} replaced, into buf */
static void expand(const char *word, const struct snode *n, char *buf, size_t size)
{
	struct strbuf b;
	strbuf_init(&b);
	for (const char *c = word; *c;) {
		if (strncmp(c, "{node}", 6) == 0) {
			strbuf_addstr(&b, n->rec.inv.name);
			c += 6;
		} else if (strncmp(c, "{addr}", 6) == 0) {
			strbuf_addstr(&b, n->rec.inv.addr);
			c += 6;
		} else {
			strbuf_add(&b, c++, 1);
		}
	}
	snprintf(buf, size, "%s", b.buf);
	strbuf_release(&b);
}

void server_power_fence(struct server *s, struct snode *n)
{
	const struct sched_config *c = &s->st.sched;
	struct power_run *p = xcalloc(1, sizeof(*p));
	p->s = s;
	snprintf(p->node, sizeof(p->node), "%s", n->rec.inv.name);
	char words[MODEL_MAX_FENCE_ARGS][MODEL_FENCE_ARG_MAX + MODEL_NAME_MAX + 64];
	char *argv[MODEL_MAX_FENCE_ARGS + 1] = {0};
	for (int i = 0; i < c->npower_fence; i++) {
		expand(c->power_fence[i], n, words[i], sizeof(words[i]));
		argv[i] = words[i];
	}
	uv_pipe_init(s->loop, &p->out, 0);
	uv_timer_init(s->loop, &p->timer);
	p->out.data = p->proc.data = p->timer.data = p;
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&p->out},
		{.flags = UV_INHERIT_FD, .data.fd = 2},
	};
	uv_process_options_t o = {
		.exit_cb = run_exit,
		.file = argv[0],
		.args = argv,
		.stdio_count = 3,
		.stdio = stdio,
	};
	p->next = s->power_runs;
	if (p->next)
		p->next->prev = p;
	s->power_runs = p;
	p->open = 3; /* the pipe, the timer, the process */
	s->open_handles += 3;
	int r = uv_spawn(s->loop, &p->proc, &o);
	if (r < 0) {
		p->status = 127;
		p->nsaid = (size_t)snprintf(p->said, sizeof(p->said), "cannot run %s: %s", argv[0],
					    uv_strerror(r));
		uv_close((uv_handle_t *)&p->proc, run_closed);
		uv_close((uv_handle_t *)&p->out, run_closed);
		uv_close((uv_handle_t *)&p->timer, run_closed);
		return;
	}
	uv_timer_start(&p->timer, run_deadline, (uint64_t)c->power_fence_timeout_s * 1000, 0);
	uv_read_start((uv_stream_t *)&p->out, out_alloc, out_read);
}

void server_power_stop(struct server *s)
{
	for (struct power_run *p = s->power_runs; p; p = p->next)
		if (!uv_is_closing((uv_handle_t *)&p->proc))
			uv_process_kill(&p->proc, SIGKILL);
}
