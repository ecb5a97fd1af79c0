/*
 * The audit trail: every call that changes state writes who made it, from
 * which address, when, what it was and its result, as a row of the store's
 * audit table, in the same batch (one transaction) as the change itself, so
 * that neither is ever durable without the other. Rows are only added; the
 * table refuses updates and deletes, but of the rows older than keep_audit
 * (retain.c). The newest rows are kept in memory for `tenk audit`.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define AUDIT_RING STORE_AUDIT_RECENT

static void ring_push(struct server *s, json_t *row)
{
	if (!s->audit)
		s->audit = xcalloc(AUDIT_RING, sizeof(*s->audit));
	if (s->audit_n == AUDIT_RING) {
		json_decref(s->audit[s->audit_head]);
		s->audit[s->audit_head] = row;
		s->audit_head = (s->audit_head + 1) % AUDIT_RING;
		return;
	}
	s->audit[(s->audit_head + s->audit_n++) % AUDIT_RING] = row;
}

static void client_addr(struct request *r, char *buf, size_t n)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(buf, n, "?");
	if (ci && ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)ci->client_addr)->sin_addr, buf,
			  (socklen_t)n);
	else if (ci && ci->client_addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ci->client_addr)->sin6_addr, buf,
			  (socklen_t)n);
	else if (ci && ci->client_addr->sa_family == AF_UNIX)
		snprintf(buf, n, "local"); /* DATA/api.sock */
}

void audit_reply(struct request *r, unsigned status, json_t *ans)
{
	struct server *s = r->s;
	if (r->audited || strcmp(r->method, "GET") == 0 || r->role == ROLE_AGENT ||
	    strncmp(r->url, "/v1/agent/", 10) == 0)
		return;
	/* a call with no valid token changes nothing (and must not fill the
	 * table); a validation run's report carries its own */
	if (r->role == ROLE_NONE && strncmp(r->url, "/v1/validations/", 16) != 0)
		return;
	r->audited = true;
	char addr[64];
	client_addr(r, addr, sizeof(addr));
	/* the result: the refusal, or what was made (a job's id, a name) */
	char result[256] = "";
	const char *err = json_string_value(json_object_get(ans, "error"));
	json_t *id = json_object_get(ans, "id");
	if (err)
		snprintf(result, sizeof(result), "%s", err);
	else if (json_is_integer(id))
		snprintf(result, sizeof(result), "job %lld", (long long)json_integer_value(id));
	else if (json_is_string(json_object_get(ans, "name")))
		snprintf(result, sizeof(result), "%s",
			 json_string_value(json_object_get(ans, "name")));
	audit_note(s, r->user[0] ? r->user : "anonymous", addr, r->method, r->url, status, result);
}

void audit_note(struct server *s, const char *who, const char *addr, const char *method,
		const char *path, unsigned status, const char *result)
{
	int64_t now = server_now_ms(s);
	json_t *row = json_pack("{s:I, s:s, s:s, s:s, s:s, s:i, s:s}", "at_ms", (json_int_t)now,
				"who", who, "addr", addr, "method", method, "path", path, "status",
				(int)status, "result", result);
	xgrow(&s->audit_new, &s->audit_new_alloc, s->audit_nnew + 1, sizeof(*s->audit_new));
	struct audit_pending *p = &s->audit_new[s->audit_nnew++];
	p->at_ms = now;
	snprintf(p->who, sizeof(p->who), "%s", who);
	p->doc = json_dumps(row, JSON_COMPACT);
	ring_push(s, row);
}

void audit_forget_before(struct server *s, int64_t ms)
{
	while (s->audit_n) {
		json_t *row = s->audit[s->audit_head];
		if (json_integer_value(json_object_get(row, "at_ms")) >= ms)
			break;
		json_decref(row);
		s->audit[s->audit_head] = NULL;
		s->audit_head = (s->audit_head + 1) % AUDIT_RING;
		s->audit_n--;
	}
}

void audit_take(struct server *s, struct store_batch *b)
{
	for (size_t i = 0; i < s->audit_nnew; i++)
		store_batch_add_audit(b, s->audit_new[i].at_ms, s->audit_new[i].who,
				      s->audit_new[i].doc);
	s->audit_nnew = 0;
}

bool audit_waiting(const struct server *s)
{
	return s->audit_nnew > 0;
}

static int load_row(void *ctx, const char *key, const char *doc, size_t len)
{
	json_t *row = json_loadb(doc, len, 0, NULL);
	if (json_is_object(row))
		ring_push(ctx, row);
	else
		json_decref(row); /* a row is kept as written; a bad one is not shown */
	return 0;
}

int audit_load(struct server *s, struct tk_error *err)
{
	return store_load_audit(s->store, load_row, s, err);
}

void audit_list(struct request *r)
{
	struct server *s = r->s;
	const char *since = request_arg(r, "since_ms"), *user = request_arg(r, "user"),
		   *lim = request_arg(r, "limit");
	int64_t since_ms = 0, limit = 1000;
	if ((since && tk_parse_int64(since, 0, INT64_MAX, &since_ms) < 0) ||
	    (lim && tk_parse_int64(lim, 1, AUDIT_RING, &limit) < 0)) {
		reply_error(r, 400, "since_ms, limit: must be integers (limit 1 to %d)",
			    AUDIT_RING);
		return;
	}
	/* the newest limit rows that match, oldest first */
	size_t *keep = xcalloc((size_t)limit, sizeof(*keep));
	size_t n = 0, total = 0;
	for (size_t k = s->audit_n; k-- > 0;) {
		json_t *row = s->audit[(s->audit_head + k) % AUDIT_RING];
		if (json_integer_value(json_object_get(row, "at_ms")) < since_ms)
			break;
		if (user && strcmp(json_string_value(json_object_get(row, "who")), user) != 0)
			continue;
		total++;
		if ((int64_t)n < limit)
			keep[n++] = k;
	}
	json_t *arr = json_array();
	while (n-- > 0)
		json_array_append(arr, s->audit[(s->audit_head + keep[n]) % AUDIT_RING]);
	free(keep);
	reply_json(r, 200, json_pack("{s:o, s:I}", "rows", arr, "total", (json_int_t)total));
}

void audit_release(struct server *s)
{
	for (size_t k = 0; k < s->audit_n; k++)
		json_decref(s->audit[(s->audit_head + k) % AUDIT_RING]);
	free(s->audit);
	for (size_t i = 0; i < s->audit_nnew; i++)
		free(s->audit_new[i].doc);
	free(s->audit_new);
	s->audit = NULL;
	s->audit_new = NULL;
	s->audit_n = s->audit_nnew = 0;
}
