/*
 * Programs the agent runs for itself (podman for images, the operator's
 * health check), their output captured, each with an optional deadline
 * after which it is killed. Every one is on the agent's list, so that a
 * stop ends them all.
 */
#include "internal.h"

#include <signal.h>

#define CMD_OUTPUT_MAX (256 * 1024) /* what one command may print */

static void cmd_closed(uv_handle_t *h)
{
	struct cmd *c = h->data;
	if (--c->open == 0) {
		struct agent *a = c->a;
		if (c->prev)
			c->prev->next = c->next;
		else
			a->cmds = c->next;
		if (c->next)
			c->next->prev = c->prev;
		c->done(c, c->status, c->out.buf, c->err.buf);
		strbuf_release(&c->out);
		strbuf_release(&c->err);
		free(c);
		agent_handle_gone(a);
	}
}

void agent__cmds_stop(struct agent *a)
{
	for (struct cmd *c = a->cmds; c; c = c->next)
		if (!uv_is_closing((uv_handle_t *)&c->proc))
			uv_process_kill(&c->proc, SIGTERM);
}

static void cmd_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[65536];
	*buf = uv_buf_init(scratch, sizeof(scratch));
}

static void cmd_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct cmd *c = s->data;
	struct strbuf *sb = s == (uv_stream_t *)&c->pipe ? &c->out : &c->err;
	if (n > 0 && sb->len < CMD_OUTPUT_MAX)
		strbuf_add(sb, buf->base, (size_t)n);
	if (n < 0 && !uv_is_closing((uv_handle_t *)s))
		uv_close((uv_handle_t *)s, cmd_closed);
}

static void cmd_exit(uv_process_t *p, int64_t status, int sig)
{
	struct cmd *c = p->data;
	c->status = sig ? 128 + sig : status;
	uv_close((uv_handle_t *)&c->timer, cmd_closed);
	uv_close((uv_handle_t *)p, cmd_closed);
}

static void cmd_deadline(uv_timer_t *t)
{
	struct cmd *c = t->data;
	c->timed_out = true;
	if (!uv_is_closing((uv_handle_t *)&c->proc))
		uv_process_kill(&c->proc, SIGKILL);
}

int agent__cmd_run(struct agent *a, char *const *argv, char *const *env, int64_t timeout_ms,
		   cmd_cb done, void *data)
{
	struct cmd *c = xcalloc(1, sizeof(*c));
	c->a = a;
	c->next = a->cmds;
	if (c->next)
		c->next->prev = c;
	a->cmds = c;
	a->open_handles++;
	c->done = done;
	c->data = data;
	strbuf_init(&c->out);
	strbuf_init(&c->err);
	uv_pipe_init(a->loop, &c->pipe, 0);
	uv_pipe_init(a->loop, &c->epipe, 0);
	uv_timer_init(a->loop, &c->timer);
	c->pipe.data = c->epipe.data = c->proc.data = c->timer.data = c;
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
		 .data.stream = (uv_stream_t *)&c->pipe},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
		 .data.stream = (uv_stream_t *)&c->epipe},
	};
	uv_process_options_t o = {
		.exit_cb = cmd_exit,
		.file = argv[0],
		.args = (char **)argv,
		.env = (char **)env,
		.stdio_count = 3,
		.stdio = stdio,
	};
	int r = uv_spawn(a->loop, &c->proc, &o);
	c->open = 4; /* the pipes, the timer, the process */
	if (r < 0) {
		c->status = 127;
		strbuf_addf(&c->err, "cannot run %s: %s", argv[0], uv_strerror(r));
		uv_close((uv_handle_t *)&c->proc, cmd_closed);
		uv_close((uv_handle_t *)&c->pipe, cmd_closed);
		uv_close((uv_handle_t *)&c->epipe, cmd_closed);
		uv_close((uv_handle_t *)&c->timer, cmd_closed);
		return r;
	}
	if (timeout_ms > 0)
		uv_timer_start(&c->timer, cmd_deadline, (uint64_t)timeout_ms, 0);
	uv_read_start((uv_stream_t *)&c->pipe, cmd_alloc, cmd_read);
	uv_read_start((uv_stream_t *)&c->epipe, cmd_alloc, cmd_read);
	return 0;
}
