/*
 * HTTP for the server: libmicrohttpd driven from our libuv loop, the request
 * life cycle, authentication, routing and the durability gate.
 *
 * MHD runs in "external event loop" mode with epoll: we watch its epoll
 * descriptor with a uv_poll and call MHD_run when it is readable or when its
 * timeout falls due. A request is read whole (bounded by SERVER_MAX_BODY),
 * authenticated, routed to a handler in api.c, and answered through the gate:
 * the connection is suspended until every change made before the answer was
 * decided is durable (see internal.h). Long-polls are suspended too, until
 * their event or deadline.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/socket.h>

void req_list_push(struct req_list *l, struct request *r)
{
	r->wait_prev = l->tail;
	r->wait_next = NULL;
	if (l->tail)
		l->tail->wait_next = r;
	else
		l->head = r;
	l->tail = r;
}

void req_list_remove(struct req_list *l, struct request *r)
{
	if (r->wait_prev)
		r->wait_prev->wait_next = r->wait_next;
	else if (l->head == r)
		l->head = r->wait_next;
	if (r->wait_next)
		r->wait_next->wait_prev = r->wait_prev;
	else if (l->tail == r)
		l->tail = r->wait_prev;
	r->wait_prev = r->wait_next = NULL;
}

static void gate_push(struct server *s, struct request *r)
{
	r->gate_next = NULL;
	if (s->gate.tail)
		s->gate.tail->gate_next = r;
	else
		s->gate.head = r;
	s->gate.tail = r;
}

/* Takes a parked long-poll off every list it is on. */
static void unpark(struct request *r)
{
	struct server *s = r->s;
	if (r->wait == WAIT_NONE)
		return;
	if (r->wait == WAIT_LIST) {
		req_list_remove(&s->lists, r);
		acct_scan_free(r);
		r->wait = WAIT_NONE;
		return;
	}
	if (r->wait == WAIT_LOGS)
		logs_forget(s, r);
	if (r->wait == WAIT_ARRAY) {
		api_array_forget(r);
		r->wait = WAIT_NONE;
		return;
	}
	if (r->wait == WAIT_WORK)
		req_list_remove(api_node_polls(s, r->wait_node), r);
	if (r->wait == WAIT_JOB)
		req_list_remove(api_job_waits(s, r->wait_job), r);
	if (r->lp_prev)
		r->lp_prev->lp_next = r->lp_next;
	else
		s->longpolls = r->lp_next;
	if (r->lp_next)
		r->lp_next->lp_prev = r->lp_prev;
	r->lp_prev = r->lp_next = NULL;
	r->wait = WAIT_NONE;
}

void request_park(struct request *r, enum wait_kind kind, int64_t deadline_ms)
{
	struct server *s = r->s;
	r->wait = kind;
	r->deadline_ms = deadline_ms;
	r->lp_prev = NULL;
	r->lp_next = s->longpolls;
	if (s->longpolls)
		s->longpolls->lp_prev = r;
	s->longpolls = r;
}

static void mhd_timer_cb(uv_timer_t *t);

static void resume(struct request *r)
{
	if (r->suspended) {
		r->suspended = false;
		MHD_resume_connection(r->conn);
		/* MHD does the resumed work in its next MHD_run: make that soon
		 * (resumed inside MHD_run, run_mhd arms it after) */
		r->s->mhd_resumed = true;
		if (r->s->mhd)
			uv_timer_start(&r->s->mhd_timer, mhd_timer_cb, 0, 0);
	}
}

static void set_reply(struct request *r, unsigned status, char *text, const char *type)
{
	struct server *s = r->s;
	unpark(r);
	if (r->resp)
		MHD_destroy_response(r->resp);
	r->resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	r->status = status;
	r->need_seq = r->ungated ? 0 : s->st.seq_applied;
	if (!r->suspended)
		return; /* still inside on_access: it decides */
	if (r->need_seq <= s->seq_durable)
		resume(r);
	else
		gate_push(s, r);
}

void reply_json(struct request *r, unsigned status, json_t *body)
{
	audit_reply(r, status, body);
	/* 15 digits: 989.4, not 989.39999999999998 (what the store keeps is exact) */
	char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(body);
	size_t n = strlen(text);
	text = xrealloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = '\0';
	set_reply(r, status, text, "application/json");
}

static void reply_verror(struct request *r, unsigned status, json_t *extra, const char *fmt,
			 va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	json_t *o = json_pack("{s:s, s:i}", "error", msg, "status", (int)status);
	if (extra) {
		json_object_update(o, extra);
		json_decref(extra);
	}
	reply_json(r, status, o);
}

void reply_error(struct request *r, unsigned status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	reply_verror(r, status, NULL, fmt, ap);
	va_end(ap);
}

void reply_error_with(struct request *r, unsigned status, json_t *extra, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	reply_verror(r, status, extra, fmt, ap);
	va_end(ap);
}

void reply_text(struct request *r, unsigned status, char *text, const char *type)
{
	audit_reply(r, status, NULL);
	set_reply(r, status, text, type);
}

void reply_upgrade(struct request *r, MHD_UpgradeHandler handler, void *cls)
{
	audit_reply(r, 101, NULL);
	unpark(r);
	if (r->resp)
		MHD_destroy_response(r->resp);
	r->resp = MHD_create_response_for_upgrade(handler, cls);
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_UPGRADE, WIRE_PTY_PROTOCOL);
	r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
	r->need_seq = 0; /* nothing it says waits on the store */
}

static struct hconn *conn_of(struct MHD_Connection *c);

void http_mark_upgraded(struct server *s, struct MHD_Connection *c)
{
	struct hconn *h = conn_of(c);
	(void)s;
	if (h)
		h->upgraded = true;
}

void server_kick_mhd(struct server *s)
{
	if (s->mhd)
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, 0, 0);
}

void http_release_gate(struct server *s)
{
	while (s->gate.head && s->gate.head->need_seq <= s->seq_durable) {
		struct request *r = s->gate.head;
		s->gate.head = r->gate_next;
		if (!s->gate.head)
			s->gate.tail = NULL;
		r->gate_next = NULL;
		resume(r);
	}
}

const char *request_arg(struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

/* ---- authentication and routing --------------------------------------------- */

bool secret_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = (unsigned char)(la != lb);
	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

static const char *const role_names[ROLE_MAX] = {
	[ROLE_NONE] = "anyone",		 [ROLE_VIEWER] = "a viewer", [ROLE_USER] = "a user",
	[ROLE_OPERATOR] = "an operator", [ROLE_ADMIN] = "an admin",  [ROLE_AGENT] = "an agent",
};

void request_auth_token(struct request *r, const char *tok)
{
	struct server *s = r->s;
	r->role = ROLE_NONE;
	r->user[0] = 0;
	r->node = NULL;
	if (secret_equal(tok, s->admin_token)) {
		r->role = ROLE_ADMIN;
		snprintf(r->user, sizeof(r->user), "admin");
	} else if (secret_equal(tok, s->agent_token)) {
		r->role = ROLE_AGENT;
		snprintf(r->user, sizeof(r->user), "agent");
	} else if (strlen(tok) < 256) {
		char hash[65];
		tk_sha256_hex(tok, strlen(tok), hash);
		struct suser *u = tk_map_get(&s->st.user_by_hash, hash);
		struct snode *n = u ? NULL : tk_map_get(&s->st.node_by_cred, hash);
		if (u) {
			static const enum role of[ACCESS_MAX] = {
				[ACCESS_VIEWER] = ROLE_VIEWER,
				[ACCESS_USER] = ROLE_USER,
				[ACCESS_OPERATOR] = ROLE_OPERATOR,
				[ACCESS_ADMIN] = ROLE_ADMIN,
			};
			r->role = of[u->rec.access];
			snprintf(r->user, sizeof(r->user), "%s", u->rec.name);
		} else if (n) {
			/* a node's own credential: its agent, for that node only */
			r->role = ROLE_AGENT;
			r->node = n;
			snprintf(r->user, sizeof(r->user), "node:%.58s", n->rec.inv.name);
		}
	}
}

/* The bearer token; or, for reading only (GET, so that another site's
 * page cannot make a logged-in browser change anything), the web page's
 * session cookie, a person's token and never an agent's. */
static void authenticate(struct request *r)
{
	const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	r->role = ROLE_NONE;
	if (h && strncmp(h, "Bearer ", 7) == 0) {
		request_auth_token(r, h + 7);
		return;
	}
	const char *cookie = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, UI_COOKIE);
	if (!h && cookie && (strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0)) {
		request_auth_token(r, cookie);
		if (r->role == ROLE_AGENT) {
			r->role = ROLE_NONE;
			r->node = NULL;
		}
	}
}

void reply_header(struct request *r, const char *name, const char *value)
{
	if (r->resp)
		MHD_add_response_header(r->resp, name, value);
}

static bool allowed(enum role have, enum role need)
{
	if (need == ROLE_NONE)
		return true;
	if (need == ROLE_AGENT || have == ROLE_AGENT)
		return have == need;
	return have >= need;
}

/* Matches path against pattern; a "{}" segment captures into param. */
static bool match(const char *pattern, const char *path, char *param, size_t n)
{
	param[0] = '\0';
	while (*pattern && *path) {
		if (pattern[0] == '{' && pattern[1] == '}') {
			const char *end = strchr(path, '/');
			size_t len = end ? (size_t)(end - path) : strlen(path);
			if (len == 0 || len >= n)
				return false;
			memcpy(param, path, len);
			param[len] = '\0';
			path += len;
			pattern += 2;
			continue;
		}
		if (*pattern != *path)
			return false;
		pattern++;
		path++;
	}
	return *pattern == '\0' && *path == '\0';
}

/* Finds the object key that a value at `pos` belongs to ("nodes" in
 * {"nodes": 1e999}), so that a value jansson cannot parse (an integer too
 * large) is still reported against its field. */
static bool key_before(const char *text, size_t pos, char *key, size_t n)
{
	size_t i = pos;
	while (i > 0 && text[i - 1] != ':') {
		if (text[i - 1] == '"' || text[i - 1] == ',' || text[i - 1] == '{' ||
		    text[i - 1] == '[')
			return false;
		i--;
	}
	if (i == 0)
		return false;
	i--; /* the colon */
	while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n'))
		i--;
	if (i == 0 || text[i - 1] != '"')
		return false;
	size_t end = --i;
	while (i > 0 && text[i - 1] != '"')
		i--;
	if (i == 0 || end - i == 0 || end - i >= n)
		return false;
	for (size_t k = i; k < end; k++)
		if ((unsigned char)text[k] < 0x20 || text[k] == '\\')
			return false;
	memcpy(key, text + i, end - i);
	key[end - i] = '\0';
	return true;
}

/* ---- connections: the nodes' reserve, and deadlines ---------------------------- */

static bool peer_ip(const struct sockaddr *sa, char *buf, size_t n)
{
	if (sa && sa->sa_family == AF_INET)
		return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf,
				 (socklen_t)n) != NULL;
	if (sa && sa->sa_family == AF_INET6)
		return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
				 (socklen_t)n) != NULL;
	return false;
}

struct node_ip {
	char ip[INET6_ADDRSTRLEN];
};

#define MAX_NODE_IPS 200000

static void node_ip_add(struct server *s, const char *ip)
{
	if (!*ip || tk_map_get(&s->node_ips, ip) || s->node_ips.len >= MAX_NODE_IPS)
		return;
	struct node_ip *e = xcalloc(1, sizeof(*e));
	snprintf(e->ip, sizeof(e->ip), "%s", ip);
	tk_map_put(&s->node_ips, e->ip, e);
}

/* A node's agent called from this connection's address: connections from
 * there are taken within the nodes' reserve. */
static void node_ip_seen(struct server *s, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char ip[INET6_ADDRSTRLEN];
	if (ci && peer_ip(ci->client_addr, ip, sizeof(ip)))
		node_ip_add(s, ip);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	struct server *s = cls;
	(void)len;
	if (s->nconns < s->node_budget)
		return MHD_YES;
	char ip[INET6_ADDRSTRLEN];
	if (peer_ip(addr, ip, sizeof(ip)) && tk_map_get(&s->node_ips, ip))
		return MHD_YES;
	int64_t now = tk_mono_ms();
	if (now - s->refused_logged_ms >= 10000) {
		s->refused_logged_ms = now;
		log_warn("refusing connections from addresses no node calls from (%s, ...): "
			 "%d are open, and the last %d of %d are kept for nodes",
			 ip, s->nconns, s->max_conns - s->node_budget, s->max_conns);
	}
	return MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct server *s = cls;
	struct hconn *h = *socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		h = xcalloc(1, sizeof(*h));
		h->c = c;
		h->state = HC_IDLE;
		h->since_ms = tk_mono_ms();
		h->next = s->hconns;
		if (s->hconns)
			s->hconns->prev = h;
		s->hconns = h;
		s->nconns++;
		*socket_context = h;
		return;
	}
	if (!h)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		s->hconns = h->next;
	if (h->next)
		h->next->prev = h->prev;
	s->nconns--;
	free(h);
	*socket_context = NULL;
}

/* Ends connections that are past a deadline: no complete request headers
 * within the timeout of opening or of the last answer, or no complete body
 * within the timeout of its headers. A request being answered (a
 * long-poll, one at the durability gate) is never cut. */
static void sweep_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	int64_t now = tk_mono_ms(), limit = s->cfg.request_timeout_ms;
	bool cut = false;
	for (struct hconn *h = s->hconns; h; h = h->next) {
		if (h->state == HC_BUSY || h->upgraded || now - h->since_ms < limit)
			continue;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(h->c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci)
			continue;
		log_debug("http: closing a connection that sent no %s within %lld ms",
			  h->state == HC_IDLE ? "request" : "whole body", (long long)limit);
		shutdown(ci->connect_fd, SHUT_RDWR);
		h->state = HC_BUSY; /* MHD closes it in its next run */
		cut = true;
	}
	if (cut && s->mhd)
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, 0, 0);
}

static struct hconn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static void dispatch(struct request *r)
{
	struct server *s = r->s;
	if (s->stopping) {
		reply_error(r, 503, "server is stopping; retry shortly");
		return;
	}
	if (r->too_big) {
		reply_error(r, 413, "body: larger than the limit of %d bytes", SERVER_MAX_BODY);
		return;
	}
	if (server_standby_answer(r))
		return; /* (a standby knows no user: it asks for no token) */
	char param[256];
	const struct route *rt = NULL;
	bool path_known = false;
	for (size_t i = 0; i < api_nroutes; i++) {
		if (!match(api_routes[i].pattern, r->url, param, sizeof(param)))
			continue;
		path_known = true;
		if (strcmp(api_routes[i].method, r->method) == 0) {
			rt = &api_routes[i];
			r->route = (int)i + 1;
			break;
		}
	}
	/* the token before the route: who may not ask learns nothing of it */
	authenticate(r);
	if (r->role == ROLE_AGENT && r->node)
		node_ip_seen(s, r->conn);
	if ((!rt || rt->role != ROLE_NONE) && r->role == ROLE_NONE) {
		const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
							    MHD_HTTP_HEADER_AUTHORIZATION);
		if (!h)
			reply_error(
				r, 401,
				"missing token: send the header \"Authorization: Bearer TOKEN\" "
				"(the admin token is in the server's data folder, admin.token)");
		else
			reply_error(r, 401, "invalid token");
		return;
	}
	if (!rt) {
		if (path_known)
			reply_error(r, 405, "method %s is not allowed on %s", r->method, r->url);
		else
			reply_error(r, 404, "no such endpoint: %s %s", r->method, r->url);
		return;
	}
	if (!allowed(r->role, rt->role)) {
		/* the call as made, the role it needs, and the caller's */
		char path[256];
		snprintf(path, sizeof(path), "%.*s", (int)strcspn(r->url, "?"), r->url);
		reply_error(r, 403, "%s %s is for %s; %s is %s", r->method, path,
			    role_names[rt->role], r->user[0] ? r->user : "this token's holder",
			    role_names[r->role]);
		return;
	}
	if (s->store_down) {
		/* the store cannot be written: no change is taken (nothing taken
		 * could be kept); a heartbeat is answered at once (it keeps the
		 * node's jobs on their lease), and so are people's reads, from
		 * memory (which may show the changes still to be written); an
		 * agent's work waits for the store, as it must not act on what
		 * is not written */
		bool agent = strncmp(rt->pattern, "/v1/agent/", 10) == 0;
		if (strcmp(rt->pattern, "/v1/agent/heartbeat") == 0 ||
		    (!agent && strcmp(r->method, "GET") == 0)) {
			r->ungated = true;
		} else if (strcmp(r->method, "GET") != 0) {
			r->ungated = true; /* the refusal changed nothing */
			reply_error(
				r, 503,
				"the server cannot write its store (%s) and takes no change "
				"until it can; nothing it acknowledged is lost: try again later",
				s->store_down_why);
			return;
		}
	}
	json_t *body = NULL;
	if (rt->has_body) {
		json_error_t jerr;
		if (r->body.len == 0) {
			reply_error(r, 400, "body: expected a JSON object, got nothing");
			return;
		}
		body = json_loadb(r->body.buf, r->body.len, JSON_REJECT_DUPLICATES, &jerr);
		if (!body) {
			char key[64];
			if (key_before(r->body.buf, (size_t)jerr.position, key, sizeof(key)))
				reply_error(r, 400, "%s: %s (body line %d column %d)", key,
					    jerr.text, jerr.line, jerr.column);
			else
				reply_error(r, 400, "body: invalid JSON at line %d column %d: %s",
					    jerr.line, jerr.column, jerr.text);
			return;
		}
		if (!json_is_object(body)) {
			json_decref(body);
			reply_error(r, 400, "body: expected a JSON object");
			return;
		}
	}
	rt->handler(r, param, body);
	json_decref(body);
}

/* ---- MHD callbacks ------------------------------------------------------------ */

static enum MHD_Result queue(struct request *r)
{
	metrics_answered(r->s, r);
	enum MHD_Result ok = MHD_queue_response(r->conn, r->status, r->resp);
	MHD_destroy_response(r->resp);
	r->resp = NULL;
	return ok;
}

/* A body over SERVER_MAX_BODY, announced or found while it arrives: 413 at
 * once, and the connection closes after it rather than read the rest. */
static enum MHD_Result refuse_too_big(struct request *r)
{
	r->too_big = true;
	strbuf_release(&r->body);
	r->dispatched = true;
	if (r->hc)
		r->hc->state = HC_BUSY;
	dispatch(r);
	MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
	return queue(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **con_cls)
{
	struct server *s = cls;
	struct request *r = *con_cls;
	(void)version;
	if (!r) {
		r = xcalloc(1, sizeof(*r));
		r->s = s;
		r->conn = c;
		r->method = method;
		r->url = url;
		r->started_us = tk_mono_us();
		strbuf_init(&r->body);
		*con_cls = r;
		r->hc = conn_of(c);
		if (r->hc) {
			r->hc->state = HC_BODY;
			r->hc->since_ms = tk_mono_ms();
		}
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		int64_t len;
		if (cl && (tk_parse_int64(cl, 0, SERVER_MAX_BODY, &len) < 0))
			return refuse_too_big(r); /* before reading a byte of it */
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (r->body.len + *upload_data_size > SERVER_MAX_BODY) {
			*upload_data_size = 0; /* (a body without a length: chunked) */
			return refuse_too_big(r);
		}
		strbuf_add(&r->body, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (!r->dispatched) {
		r->dispatched = true;
		if (r->hc)
			r->hc->state = HC_BUSY;
		dispatch(r);
		if (r->resp && r->need_seq > s->seq_durable)
			gate_push(s, r);
	}
	if (r->resp && r->need_seq <= s->seq_durable)
		return queue(r);
	/* waiting for durability or for a long-poll's event */
	r->suspended = true;
	MHD_suspend_connection(c);
	return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *s = cls;
	struct request *r = *con_cls;
	(void)toe;
	if (!r)
		return;
	unpark(r);
	/* normally off the gate already; at shutdown it may not be */
	struct request **pp = &s->gate.head, *prev = NULL;
	while (*pp) {
		if (*pp == r) {
			*pp = r->gate_next;
			if (s->gate.tail == r)
				s->gate.tail = prev;
			break;
		}
		prev = *pp;
		pp = &(*pp)->gate_next;
	}
	if (r->resp)
		MHD_destroy_response(r->resp);
	/* the connection waits for its next request, with a deadline again */
	struct hconn *h = conn_of(c);
	if (h) {
		h->state = HC_IDLE;
		h->since_ms = tk_mono_ms();
	}
	acct_scan_free(r); /* unparked above; only a sure thing here */
	strbuf_release(&r->body);
	free(r);
	*con_cls = NULL;
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	tk_strip(msg);
	log_debug("http: %s", msg);
}

/* Lets MHD do its work, then arms the timer for its next deadline. */
static void run_mhd(struct server *s)
{
	s->mhd_resumed = false;
	MHD_run(s->mhd);
	if (s->mhd_local)
		MHD_run(s->mhd_local);
	/* from a timer, what the handlers did is flushed in this iteration */
	server_kick(s);
	MHD_UNSIGNED_LONG_LONG t, tl;
	bool has = MHD_get_timeout(s->mhd, &t) == MHD_YES;

	if (s->mhd_local && MHD_get_timeout(s->mhd_local, &tl) == MHD_YES) {
		t = has ? MIN(t, tl) : tl;
		has = true;
	}
	if (s->mhd_resumed) /* a handler answered another connection's long-poll */
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, 0, 0);
	else if (has)
		uv_timer_start(&s->mhd_timer, mhd_timer_cb, (uint64_t)t, 0);
	else
		uv_timer_stop(&s->mhd_timer);
}

static void mhd_timer_cb(uv_timer_t *t)
{
	struct server *s = t->data;
	run_mhd(s);
}

static void mhd_poll_cb(uv_poll_t *p, int status, int events)
{
	struct server *s = p->data;
	(void)status;
	(void)events;
	run_mhd(s);
}

/* DATA/api.sock, 0600 in the 0700 folder: the API without TLS for this
 * machine's clients (the CLI's unix:PATH). A failure is only said. */
static void local_start(struct server *s)
{
	char *dir = realpath(s->data_dir, NULL);
	s->local_path = xasprintf("%s/api.sock", dir ? dir : s->data_dir);
	free(dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	/* named through the folder's descriptor: a deep folder does not pass
	 * the 108 bytes a socket's name may take */
	int dfd = open(s->data_dir, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/api.sock", dfd);
	unlink(s->local_path); /* a stopped server's: the data folder's lock is ours */
	fd = dfd < 0 ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	mode_t old = umask(0177);
	int b = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (dfd >= 0)
		close(dfd);
	if (b < 0 || listen(fd, 1024) < 0) {
		log_warn("no local socket %s: %s", s->local_path, strerror(errno));
		goto fail;
	}
	struct MHD_OptionItem ops[] = {
		{MHD_OPTION_LISTEN_SOCKET, fd, NULL},
		{MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
		{MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
		{MHD_OPTION_CONNECTION_LIMIT, 4096, NULL},
		{MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL},
		{MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, s},
		{MHD_OPTION_END, 0, NULL},
	};
	s->mhd_local = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0,
		NULL, NULL, on_access, s, MHD_OPTION_ARRAY, ops, MHD_OPTION_END);
	const union MHD_DaemonInfo *info =
		s->mhd_local ? MHD_get_daemon_info(s->mhd_local, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!info) {
		log_warn("no local socket %s: libmicrohttpd would not serve it", s->local_path);
		if (s->mhd_local)
			MHD_stop_daemon(s->mhd_local);
		s->mhd_local = NULL;
		goto fail;
	}
	uv_poll_init(s->loop, &s->local_poll, info->epoll_fd);
	s->local_poll.data = s;
	uv_poll_start(&s->local_poll, UV_READABLE, mhd_poll_cb);
	s->open_handles++;
	return;
fail:
	if (fd >= 0)
		close(fd);
	unlink(s->local_path);
	free(s->local_path);
	s->local_path = NULL;
}

int http_start(struct server *s, const char *listen, struct tk_error *err)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	char host[128];
	int r = tk_parse_listen(listen, &ss, &sslen, host, sizeof(host), err);
	if (r < 0)
		return r;
	unsigned flags =
		MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* TLS: the certificate and key as MHD takes them, in memory (kept
	 * until the daemon stops) */
	char *cert = NULL, *key = NULL;
	if (s->cfg.tls_cert || s->cfg.tls_key) {
		if (!s->cfg.tls_cert || !s->cfg.tls_key)
			return tk_errorf(err, -EINVAL, "TLS needs both --tls-cert and --tls-key");
		if (s->cfg.insecure_http)
			return tk_errorf(err, -EINVAL,
					 "--insecure-http and --tls-cert: serve one or the other");
		if ((r = tk_read_file(s->cfg.tls_cert, 1 << 20, &cert, NULL)) < 0)
			return tk_errorf(err, r, "cannot read %s: %s", s->cfg.tls_cert,
					 strerror(-r));
		if ((r = tk_read_file(s->cfg.tls_key, 1 << 20, &key, NULL)) < 0) {
			free(cert);
			return tk_errorf(err, r, "cannot read %s: %s", s->cfg.tls_key,
					 strerror(-r));
		}
	} else if (!s->cfg.insecure_http) {
		if ((r = server_tls_self_issue(s->data_dir, host, &ss, &cert, &key, err)) < 0)
			return r;
		s->tls_ca_path = xasprintf("%s/tls/ca.pem", s->data_dir);
	}
	if (cert) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			free(cert);
			free(key);
			return tk_errorf(err, -ENOTSUP,
					 "this libmicrohttpd has no TLS: give --insecure-http "
					 "to serve plain HTTP");
		}
		flags |= MHD_USE_TLS;
		s->tls_cert_pem = cert;
		s->tls_key_pem = key;
		s->tls_not_after = server_tls_not_after(cert);
		if (s->tls_ca_path) {
			char *ca = NULL;
			if (tk_read_file(s->tls_ca_path, 1 << 20, &ca, NULL) == 0)
				s->tls_ca_not_after = server_tls_not_after(ca);
			free(ca);
		}
	}
	/* as many connections as descriptors allow, the last of them for nodes */
	s->max_conns = s->cfg.max_connections > 0 ? s->cfg.max_connections : SERVER_MAX_CONNECTIONS;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)s->max_conns + 256 > rl.rlim_cur)
		s->max_conns = rl.rlim_cur > 512 ? (int)(rl.rlim_cur - 256) : 256;
	s->node_budget = s->max_conns - s->max_conns / SERVER_NODE_RESERVE_DIV;
	tk_map_init(&s->node_ips);
	struct MHD_OptionItem ops[] = {
		{MHD_OPTION_SOCK_ADDR, 0, &ss},
		{MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
		{MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
		{MHD_OPTION_CONNECTION_LIMIT, (intptr_t)s->max_conns, NULL},
		{MHD_OPTION_PER_IP_CONNECTION_LIMIT, SERVER_MAX_CONNS_PER_IP, NULL},
		/* each node holds three connections: 16 KiB of pool each, not
		 * MHD's 32, is room for any request head and a body's buffer */
		{MHD_OPTION_CONNECTION_MEMORY_LIMIT, SERVER_CONN_MEMORY, NULL},
		{MHD_OPTION_CONNECTION_TIMEOUT, 120, NULL},
		{MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
		{MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_logger, s},
		{cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
		{cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, key},
		{MHD_OPTION_END, 0, NULL},
	};
	s->mhd = MHD_start_daemon(flags, 0, on_accept, s, on_access, s, MHD_OPTION_ARRAY, ops,
				  MHD_OPTION_END);
	if (!s->mhd)
		return tk_errorf(err, -EADDRINUSE,
				 "cannot listen on %s: address in use, not local, or not allowed%s",
				 listen,
				 cert ? " (or the TLS certificate and key do not match)" : "");
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	const union MHD_DaemonInfo *lfd = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_LISTEN_FD);
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	if (!info || !lfd || getsockname(lfd->listen_fd, (struct sockaddr *)&bound, &blen) < 0) {
		MHD_stop_daemon(s->mhd);
		s->mhd = NULL;
		return tk_errorf(err, -EIO, "cannot set up the HTTP listener");
	}
	int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						     : ((struct sockaddr_in *)&bound)->sin_port);
	const char *shown = host;
	if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "") == 0)
		shown = "127.0.0.1";
	else if (strcmp(host, "::") == 0)
		shown = "::1";
	if (strchr(shown, ':'))
		snprintf(s->url, sizeof(s->url), "%s://[%s]:%d", cert ? "https" : "http", shown,
			 port);
	else
		snprintf(s->url, sizeof(s->url), "%s://%s:%d", cert ? "https" : "http", shown,
			 port);
	uv_poll_init(s->loop, &s->mhd_poll, info->epoll_fd);
	s->mhd_poll.data = s;
	uv_poll_start(&s->mhd_poll, UV_READABLE, mhd_poll_cb);
	uv_timer_init(s->loop, &s->mhd_timer);
	s->mhd_timer.data = s;
	for (int i = 0; i < s->st.nnodes; i++) /* where the nodes we know were */
		node_ip_add(s, s->st.nodes[i]->rec.inv.addr);
	uv_timer_init(s->loop, &s->sweep);
	s->sweep.data = s;
	uint64_t every = (uint64_t)(s->cfg.request_timeout_ms / 4 > 1000
					    ? 1000
					    : s->cfg.request_timeout_ms / 4 + 1);
	uv_timer_start(&s->sweep, sweep_cb, every, every);
	s->open_handles += 3;
	local_start(s);
	return 0;
}

void http_stop(struct server *s)
{
	if (!s->mhd)
		return;
	while (s->longpolls)
		reply_error(s->longpolls, 503, "server is stopping; retry shortly");
	/* answers still at the gate go out now: what they depend on was written by
	 * server_stop, or is in a batch that will commit or never be known */
	while (s->gate.head) {
		struct request *r = s->gate.head;
		s->gate.head = r->gate_next;
		r->gate_next = NULL;
		resume(r);
	}
	s->gate.tail = NULL;
	ptys_close_all(s);
	for (int i = 0; i < 4; i++)
		run_mhd(s);
	if (s->mhd_local) {
		uv_poll_stop(&s->local_poll);
		uv_close((uv_handle_t *)&s->local_poll, server_handle_closed);
		MHD_stop_daemon(s->mhd_local);
		s->mhd_local = NULL;
		unlink(s->local_path);
	}
	free(s->local_path);
	s->local_path = NULL;
	uv_poll_stop(&s->mhd_poll);
	uv_timer_stop(&s->mhd_timer);
	uv_timer_stop(&s->sweep);
	uv_close((uv_handle_t *)&s->mhd_poll, server_handle_closed);
	uv_close((uv_handle_t *)&s->mhd_timer, server_handle_closed);
	uv_close((uv_handle_t *)&s->sweep, server_handle_closed);
	MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	while (s->hconns) { /* had MHD not said they closed */
		struct hconn *h = s->hconns;
		s->hconns = h->next;
		free(h);
	}
	s->nconns = 0;
	size_t pos = 0;
	const char *key;
	void *val;
	while (tk_map_next(&s->node_ips, &pos, &key, &val))
		free(val);
	tk_map_release(&s->node_ips);
}
