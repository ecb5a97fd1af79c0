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
		struct agent *a = c->a;
		if (c->prev)
			c->prev->next = c->next;
		else
			a->podcmds = c->next;
		if (c->next)
			c->next->prev = c->prev;
		c->done(c, c->status, c->out.buf, c->err.buf);
		strbuf_release(&c->out);
		strbuf_release(&c->err);
		free(c);
		agent_handle_gone(a);
	}
}

void podcmds_stop(struct agent *a)
{
	for (struct podcmd *c = a->podcmds; c; c = c->next)
		if (!uv_is_closing((uv_handle_t *)&c->proc))
			uv_process_kill(&c->proc, SIGTERM);
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
	c->a = a;
	c->next = a->podcmds;
	if (c->next)
		c->next->prev = c;
	a->podcmds = c;
	a->open_handles++;
	c->done = done;
	c->data = data;
	strbuf_init(&c->out);
	strbuf_init(&c->err);
	char **argv = NULL;
	int n = 0;
	size_t alloc = 0;
	ctr_podman_head(a->podman, a->cfg.podman_root, &argv, &n, &alloc);
	for (int i = 0; args[i]; i++)
		strv_push(&argv, &n, &alloc, xstrdup(args[i]));
	strv_push(&argv, &n, &alloc, NULL);
	char **env = ctr_env(a->cfg.containers_conf);
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
	if (g->img_state == IMG_PULLING && !g->a->stopping) {
		images_refresh(g->a);
		if (status == 0 && digest_of(out, g->digest)) {
			log_info("job %lld.%d: pulled %s (%.19s)", (long long)g->job, g->attempt,
				 g->img_ref, g->digest);
			group_image_ready(g);
		} else {
			char msg[MODEL_REASON_MAX];
			ctr_podman_said(errout, msg, sizeof(msg), "podman said nothing");
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
	if (g->img_state == IMG_RESOLVING && !g->a->stopping) {
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

/* ---- the node's store, for tenk images ---------------------------------------------------- */

/* `podman images --format json`: each name of each image. */
static void listed(struct podcmd *c, int64_t status, const char *out, const char *errout)
{
	struct agent *a = c->a;
	a->listing = false;
	json_t *j = status == 0 ? json_loads(out, 0, NULL) : NULL;
	if (!json_is_array(j)) {
		char msg[MODEL_REASON_MAX];
		ctr_podman_said(errout, msg, sizeof(msg), "podman said nothing");
		if (!a->stopping)
			log_warn("cannot list the node's images: %s", msg);
	} else {
		free(a->images);
		a->images = NULL;
		a->nimages = 0;
		size_t alloc = 0, i, k;
		json_t *im, *name;
		json_array_foreach (j, i, im) {
			const char *id = json_string_value(json_object_get(im, "Id"));
			json_t *size = json_object_get(im, "Size");
			char d[MODEL_DIGEST_MAX];
			if (!id || !digest_of(id, d))
				continue;
			json_array_foreach (json_object_get(im, "Names"), k, name) {
				const char *ref = json_string_value(name);
				if (!ref || !model_image_valid(ref) ||
				    a->nimages >= WIRE_MAX_IMAGES)
					continue;
				xgrow(&a->images, &alloc, (size_t)a->nimages + 1,
				      sizeof(*a->images));
				struct wire_image *w = &a->images[a->nimages++];
				memset(w, 0, sizeof(*w));
				snprintf(w->ref, sizeof(w->ref), "%s", ref);
				snprintf(w->digest, sizeof(w->digest), "%s", d);
				w->size_mib =
					json_is_integer(size)
						? (json_integer_value(size) + (1 << 20) - 1) >> 20
						: 0;
			}
		}
		a->images_gen++;
	}
	json_decref(j);
	if (a->list_again && !a->stopping) {
		a->list_again = false;
		images_refresh(a);
	}
}

void images_refresh(struct agent *a)
{
	if (a->stopping || access(a->podman, X_OK) < 0)
		return;
	if (a->listing) {
		a->list_again = true;
		return;
	}
	a->listing = true;
	char *args[] = {"images", "--format", "json", NULL};
	podcmd_start(a, args, listed, NULL);
}

static struct wire_pull *find_pull(struct agent *a, const char *ref)
{
	for (int i = 0; i < a->npulls; i++)
		if (strcmp(a->pulls[i].ref, ref) == 0)
			return &a->pulls[i];
	return NULL;
}

/* An asked pull ended. The entry is looked up again: the list may have
 * moved meanwhile. */
static void asked_pulled(struct podcmd *c, int64_t status, const char *out, const char *errout)
{
	struct agent *a = c->a;
	char *ref = c->data;
	struct wire_pull *p = find_pull(a, ref);
	if (p && p->state == PULL_RUNNING) {
		p->state = status == 0 ? PULL_DONE : PULL_FAILED;
		if (status != 0)
			ctr_podman_said(errout, p->detail, sizeof(p->detail),
					"podman said nothing");
		log_info("pull of %s: %s%s%s", ref, pull_state_name(p->state), status ? ": " : "",
			 status ? p->detail : "");
		a->images_gen++;
	}
	free(ref);
	images_refresh(a);
}

void images_apply_pulls(struct agent *a, const struct wire_work *w)
{
	if (w->unchanged)
		return;
	/* what the server no longer asks for is forgotten */
	int k = 0;
	for (int i = 0; i < a->npulls; i++) {
		bool asked = false;
		for (int j = 0; j < w->npulls && !asked; j++)
			asked = strcmp(w->pulls[j], a->pulls[i].ref) == 0;
		if (asked)
			a->pulls[k++] = a->pulls[i];
	}
	a->npulls = k;
	for (int j = 0; j < w->npulls && !a->stopping; j++) {
		if (find_pull(a, w->pulls[j]))
			continue;
		a->pulls = xrealloc(a->pulls, sizeof(*a->pulls) * (size_t)(a->npulls + 1));
		struct wire_pull *p = &a->pulls[a->npulls++];
		memset(p, 0, sizeof(*p));
		snprintf(p->ref, sizeof(p->ref), "%s", w->pulls[j]);
		p->state = PULL_RUNNING;
		a->images_gen++;
		if (access(a->podman, X_OK) < 0) {
			p->state = PULL_FAILED;
			snprintf(p->detail, sizeof(p->detail), "no podman on this node");
			continue;
		}
		log_info("pulling %s (asked by the server)", p->ref);
		char *args[] = {"pull", "--quiet", p->ref, NULL};
		podcmd_start(a, args, asked_pulled, xstrdup(p->ref));
	}
}

void images_for_heartbeat(struct agent *a, struct wire_heartbeat *m, uint64_t *gen)
{
	*gen = a->images_gen;
	if (a->images_gen == a->images_sent_gen)
		return;
	m->has_images = true;
	m->images = a->images;
	m->nimages = a->nimages;
	m->pulls = a->pulls;
	m->npulls = a->npulls;
}

void images_release(struct agent *a)
{
	free(a->images);
	free(a->pulls);
	a->images = NULL;
	a->pulls = NULL;
	a->nimages = a->npulls = 0;
}
