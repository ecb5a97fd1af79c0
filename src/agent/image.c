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
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int agent__podcmd_start(struct agent *a, char **args, cmd_cb done, void *data)
{
	char **argv = NULL;
	int n = 0;
	size_t alloc = 0;
	ctr_podman_head(a->podman, a->cfg.podman_root, &argv, &n, &alloc);
	for (int i = 0; args[i]; i++)
		shim_strv_push(&argv, &n, &alloc, xstrdup(args[i]));
	shim_strv_push(&argv, &n, &alloc, NULL);
	char **env = ctr_env(a->cfg.containers_conf);
	int r = agent__cmd_run(a, argv, env, 0, done, data);
	shim_strv_release(argv);
	shim_strv_release(env);
	return r;
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

/* Runs podman with args for g's image; done gets what it said. The group
 * stays until done has run. */
static void image_cmd(struct taskgroup *g, char **args, cmd_cb done)
{
	group_hold(g);
	int r = agent__podcmd_start(g->a, args, done, g);
	if (r < 0) {
		char why[MODEL_REASON_MAX];
		snprintf(why, sizeof(why), "image %.120s: cannot run podman on %s: %s", g->img.ref,
			 g->a->inv.name, strerror(-r));
		g->img.state = IMG_NONE;
		group_image_failed(g, why);
		group_unhold(g);
	}
}

static void pulled(struct cmd *c, int64_t status, const char *out, const char *errout)
{
	struct taskgroup *g = c->data;
	if (g->img.state == IMG_PULLING && !g->a->stopping) {
		agent__images_refresh(g->a);
		if (status == 0 && digest_of(out, g->img.digest)) {
			log_info("job %lld.%d: pulled %s (%.19s)", (long long)g->job, g->attempt,
				 g->img.ref, g->img.digest);
			g->img.state = IMG_READY;
			group_image_ready(g);
		} else {
			char msg[MODEL_REASON_MAX];
			ctr_podman_said(errout, msg, sizeof(msg), "podman said nothing");
			struct strbuf why;
			strbuf_init(&why);
			strbuf_addf(&why, "cannot pull %s on %s: %s", g->img.ref, g->a->inv.name,
				    msg);
			log_warn("job %lld.%d: %s", (long long)g->job, g->attempt, why.buf);
			g->img.state = IMG_NONE;
			group_image_failed(g, why.buf);
			strbuf_release(&why);
		}
	}
	group_unhold(g); /* last: it may forget g */
}

static void inspected(struct cmd *c, int64_t status, const char *out, const char *errout)
{
	struct taskgroup *g = c->data;
	if (g->img.state == IMG_RESOLVING && !g->a->stopping) {
		if (status == 0 && digest_of(out, g->img.digest)) {
			g->img.state = IMG_READY;
			group_image_ready(g);
		} else {
			/* not in the node's store: pulled, once, for every job after */
			g->img.state = IMG_PULLING;
			group_image_pulling(g);
			char *args[] = {"pull", "--quiet", g->img.ref, NULL};
			image_cmd(g, args, pulled);
		}
	}
	group_unhold(g); /* last: it may forget g */
}

void agent__image_resolve(struct taskgroup *g)
{
	g->img.state = IMG_RESOLVING;
	char *args[] = {"image", "inspect", "--format", "{{.Id}}", g->img.ref, NULL};
	image_cmd(g, args, inspected);
}

/* ---- the node's store, for tenk images ---------------------------------------------------- */

/* `podman images --format json`: each name of each image. */
static void listed(struct cmd *c, int64_t status, const char *out, const char *errout)
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
		agent__images_refresh(a);
	}
}

void agent__images_refresh(struct agent *a)
{
	if (a->stopping || access(a->podman, X_OK) < 0)
		return;
	if (a->listing) {
		a->list_again = true;
		return;
	}
	a->listing = true;
	char *args[] = {"images", "--format", "json", NULL};
	agent__podcmd_start(a, args, listed, NULL);
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
static void asked_pulled(struct cmd *c, int64_t status, const char *out, const char *errout)
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
	agent__images_refresh(a);
}

void agent__images_apply_pulls(struct agent *a, const struct wire_work *w)
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
		agent__podcmd_start(a, args, asked_pulled, xstrdup(p->ref));
	}
}

void agent__images_for_heartbeat(struct agent *a, struct wire_heartbeat *m, uint64_t *gen)
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

void agent__images_release(struct agent *a)
{
	free(a->images);
	free(a->pulls);
	a->images = NULL;
	a->pulls = NULL;
	a->nimages = a->npulls = 0;
}
