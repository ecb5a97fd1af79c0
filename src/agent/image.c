/*
 * An image job's image on this node, before any of its tasks starts. The
 * node's Podman store is the cache: the agent looks the reference up
 * there (`podman image inspect`), and pulls it only when it is missing,
 * saying so to the server (the job waits "pulling REF on NODE"), with the
 * node's registries and credentials, which are Podman's. Either way it
 * tells the server the image's digest (its ID: the hash of what the
 * container runs) and waits: the server starts the gang only once every
 * node has the same one, and says which digest; the tasks then run that
 * image by ID, so that a tag moved meanwhile changes nothing. A failed
 * pull fails the tasks with what the registry said.
 *
 * Also `podman images` and `podman pull` for `tenk images` (the agent's
 * answer to the server's image work).
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define IMAGE_OUTPUT_MAX (256 * 1024) /* what one podman command may print */

/* ---- running podman, its output captured ---------------------------------------------- */

static void pod_closed(uv_handle_t *h)
{
	struct podcmd *c = h->data;
	if (--c->open == 0) {
		c->done(c, c->status, c->out.buf, c->err.buf);
		strbuf_release(&c->out);
		strbuf_release(&c->err);
		free(c);
	}
}

static void pod_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char scratch[65536];
	*buf = uv_buf_init(scratch, sizeof(scratch));
}

static void pod_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct podcmd *c = s->data;
	struct strbuf *sb = s == (uv_stream_t *)&c->pipe ? &c->out : &c->err;
	if (n > 0 && sb->len < IMAGE_OUTPUT_MAX)
		strbuf_add(sb, buf->base, (size_t)n);
	if (n < 0 && !uv_is_closing((uv_handle_t *)s))
		uv_close((uv_handle_t *)s, pod_closed);
}

static void pod_exit(uv_process_t *p, int64_t status, int sig)
{
	struct podcmd *c = p->data;
	c->status = sig ? 128 + sig : status;
	uv_close((uv_handle_t *)p, pod_closed);
}

int podcmd_start(struct agent *a, char **args, podcmd_cb done, void *data)
{
	struct podcmd *c = xcalloc(1, sizeof(*c));
	c->done = done;
	c->data = data;
	strbuf_init(&c->out);
	strbuf_init(&c->err);
	char **argv = NULL;
	int n = 0;
	size_t alloc = 0;
	strv_push(&argv, &n, &alloc, xstrdup(a->podman));
	if (a->cfg.podman_root) {
		strv_push(&argv, &n, &alloc, xstrdup("--root"));
		strv_push(&argv, &n, &alloc, xasprintf("%s/storage", a->cfg.podman_root));
		strv_push(&argv, &n, &alloc, xstrdup("--runroot"));
		strv_push(&argv, &n, &alloc, xasprintf("%s/run", a->cfg.podman_root));
	}
	for (int i = 0; args[i]; i++)
		strv_push(&argv, &n, &alloc, xstrdup(args[i]));
	strv_push(&argv, &n, &alloc, NULL);
	struct shim_container ctr = {0};
	if (a->cfg.containers_conf)
		snprintf(ctr.conf, sizeof(ctr.conf), "%s", a->cfg.containers_conf);
	char **env = ctr_env(&ctr);
	uv_pipe_init(a->loop, &c->pipe, 0);
	uv_pipe_init(a->loop, &c->epipe, 0);
	c->pipe.data = c->epipe.data = c->proc.data = c;
	uv_stdio_container_t stdio[3] = {
		{.flags = UV_IGNORE},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
		 .data.stream = (uv_stream_t *)&c->pipe},
		{.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
		 .data.stream = (uv_stream_t *)&c->epipe},
	};
	uv_process_options_t o = {
		.exit_cb = pod_exit,
		.file = argv[0],
		.args = argv,
		.env = env,
		.stdio_count = 3,
		.stdio = stdio,
	};
	int r = uv_spawn(a->loop, &c->proc, &o);
	strv_release(argv);
	strv_release(env);
	c->open = 2; /* the pipes */
	if (r < 0) {
		c->status = 127;
		strbuf_addf(&c->err, "cannot run %s: %s", a->podman, uv_strerror(r));
		c->open++;
		uv_close((uv_handle_t *)&c->proc, pod_closed);
		uv_close((uv_handle_t *)&c->pipe, pod_closed);
		uv_close((uv_handle_t *)&c->epipe, pod_closed);
		return r;
	}
	c->open++;
	uv_read_start((uv_stream_t *)&c->pipe, pod_alloc, pod_read);
	uv_read_start((uv_stream_t *)&c->epipe, pod_alloc, pod_read);
	return 0;
}

/* The last line podman printed that says something, "Error: " off. */
void podcmd_last_line(const char *out, char *buf, size_t n)
{
	_cleanup_free_ char *t = xstrdup(out ? out : "");
	tk_strip(t);
	char *last = strrchr(t, '\n');
	const char *msg = last ? last + 1 : t;
	if (strncmp(msg, "Error: ", 7) == 0)
		msg += 7;
	snprintf(buf, n, "%s", *msg ? msg : "podman said nothing");
}

/* "sha256:HEX" from podman's 64 hex digits (an image ID), or false. */
static bool digest_of(const char *out, char d[MODEL_DIGEST_MAX])
{
	_cleanup_free_ char *t = xstrdup(out);
	tk_strip(t);
	char *last = strrchr(t, '\n');
	const char *id = last ? last + 1 : t;
	if (strncmp(id, "sha256:", 7) == 0)
		id += 7;
	if (strlen(id) != 64)
		return false;
	for (int i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
			return false;
	snprintf(d, MODEL_DIGEST_MAX, "sha256:%s", id);
	return true;
}

/* ---- a group's image -------------------------------------------------------------------- */

static void image_done(struct taskgroup *g)
{
	g->open--;
	group_maybe_free(g);
}

static void pulled(struct podcmd *c, int64_t status, const char *out, const char *errout)
{
	struct taskgroup *g = c->data;
	if (g->img_state == IMG_PULLING) {
		if (status == 0 && digest_of(out, g->digest)) {
			log_info("job %lld.%d: pulled %s (%.19s)", (long long)g->job, g->attempt,
				 g->img_ref, g->digest);
			group_image_ready(g);
		} else {
			char msg[MODEL_REASON_MAX];
			podcmd_last_line(errout, msg, sizeof(msg));
			struct strbuf why;
			strbuf_init(&why);
			strbuf_addf(&why, "cannot pull %s on %s: %s", g->img_ref, g->a->inv.name,
				    msg);
			log_warn("job %lld.%d: %s", (long long)g->job, g->attempt, why.buf);
			group_image_failed(g, why.buf);
			strbuf_release(&why);
		}
	}
	image_done(g);
}

static void inspected(struct podcmd *c, int64_t status, const char *out, const char *errout)
{
	struct taskgroup *g = c->data;
	if (g->img_state == IMG_RESOLVING) {
		if (status == 0 && digest_of(out, g->digest)) {
			group_image_ready(g);
		} else {
			/* not in the node's store: pulled, once, for every job after */
			g->img_state = IMG_PULLING;
			group_image_pulling(g);
			char *args[] = {"pull", "--quiet", g->img_ref, NULL};
			g->open++;
			podcmd_start(g->a, args, pulled, g);
		}
	}
	image_done(g);
}

void group_image_resolve(struct taskgroup *g)
{
	g->img_state = IMG_RESOLVING;
	char *args[] = {"image", "inspect", "--format", "{{.Id}}", g->img_ref, NULL};
	g->open++;
	podcmd_start(g->a, args, inspected, g);
}
