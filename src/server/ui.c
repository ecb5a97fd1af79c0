/*
 * The web page: index.html, ui.js and ui.css, built into the binary
 * (scripts/embed.py), which read the API like any client. The login takes
 * a token into an HttpOnly, SameSite=Strict cookie that authenticates reads
 * only (http.c), so another site cannot act with it; the page shows what
 * the API gives that user (a job's environment values are its owner's
 * alone). The allocation over time is sampled here for its plot.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

struct ui_file {
	const char *name;
	const char *type;
	const unsigned char *data;
	size_t len;
};
extern const struct ui_file ui_files[];

void h_ui(struct request *r, const char *param, json_t *body)
{
	const char *name = strcmp(r->url, "/") == 0 ? "index.html" : r->url + 1;
	for (const struct ui_file *f = ui_files; f->name; f++) {
		if (strcmp(f->name, name) != 0)
			continue;
		char *text = xmalloc(f->len + 1);
		memcpy(text, f->data, f->len);
		text[f->len] = 0;
		reply_text(r, 200, text, f->type);
		reply_header(r, "Content-Security-Policy",
			     "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
			     "form-action 'self'; base-uri 'none'");
		reply_header(r, "X-Content-Type-Options", "nosniff");
		reply_header(r, "Referrer-Policy", "no-referrer");
		reply_header(r, "Cache-Control", "no-cache");
		return;
	}
	reply_error(r, 404, "no such page: %.100s", r->url);
}

static void set_cookie(struct request *r, const char *value, bool clear)
{
	char *c = xasprintf("%s=%s; Path=/; HttpOnly; SameSite=Strict%s%s", UI_COOKIE, value,
			    r->s->cfg.insecure_http ? "" : "; Secure",
			    clear ? "; Max-Age=0" : "; Max-Age=43200");
	reply_header(r, "Set-Cookie", c);
	free(c);
}

void h_login(struct request *r, const char *param, json_t *body)
{
	static const char *const keys[] = {"token", NULL};
	char token[256] = "";
	struct tk_error err;
	if (mj_check_keys(body, NULL, keys, &err) < 0 ||
	    mj_strbuf(body, "token", true, true, token, sizeof(token), &err) < 0) {
		reply_error(r, 400, "%s", err.text);
		return;
	}
	/* a token of the alphabet tokens are made of fits in a cookie as it is */
	if (strspn(token, "0123456789abcdefABCDEF-_") != strlen(token)) {
		reply_error(r, 401, "invalid token");
		return;
	}
	request_auth_token(r, token);
	if (r->role == ROLE_NONE || r->role == ROLE_AGENT) {
		r->role = ROLE_NONE;
		reply_error(r, 401, "invalid token");
		return;
	}
	static const char *const roles[] = {[ROLE_VIEWER] = "viewer",
					    [ROLE_USER] = "user",
					    [ROLE_OPERATOR] = "operator",
					    [ROLE_ADMIN] = "admin"};
	reply_json(r, 200, json_pack("{s:s, s:s}", "user", r->user, "role", roles[r->role]));
	set_cookie(r, token, false);
}

void h_logout(struct request *r, const char *param, json_t *body)
{
	reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	set_cookie(r, "", true);
}

void ui_sample(struct server *s)
{
	if (!s->metrics.samples)
		s->metrics.samples = xcalloc(UI_SAMPLES, sizeof(*s->metrics.samples));
	struct ui_sample x = {.at_ms = server_now_ms(s)};
	for (int i = 0; i < s->st.nnodes; i++) {
		const struct snode *n = s->st.nodes[i];
		bool up = state_node_state(&s->st, n) == NODE_UP;
		for (int d = 0; d < n->rec.inv.naccel; d++) {
			x.allocated += (float)n->dev_used[d] / MODEL_MILLI;
			x.total += 1;
			x.usable += up ? 1 : 0;
		}
	}
	size_t at = (s->metrics.sample_head + s->metrics.nsamples) % UI_SAMPLES;
	s->metrics.samples[at] = x;
	if (s->metrics.nsamples < UI_SAMPLES)
		s->metrics.nsamples++;
	else
		s->metrics.sample_head = (s->metrics.sample_head + 1) % UI_SAMPLES;
}

void h_utilization(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	json_t *arr = json_array();
	for (size_t i = 0; i < s->metrics.nsamples; i++) {
		const struct ui_sample *x =
			&s->metrics.samples[(s->metrics.sample_head + i) % UI_SAMPLES];
		json_array_append_new(arr, json_pack("[I, f, f, f]", (json_int_t)x->at_ms,
						     (double)x->allocated, (double)x->usable,
						     (double)x->total));
	}
	reply_json(r, 200,
		   json_pack("{s:i, s:[s, s, s, s], s:o}", "interval_s", UI_SAMPLE_MS / 1000,
			     "columns", "at_ms", "allocated", "usable", "total", "samples", arr));
}
