/*
 * Terminals users attach to (`tenk run --pty`), through the server: the
 * user's GET /v1/jobs/ID/pty is upgraded to a byte stream (a session), the
 * job's node learns of it in its next work answer (the agent's long-poll is
 * answered at once), and the agent's GET /v1/agent/pty?session=ID, upgraded
 * too, is the session's other end. From then on the server copies bytes
 * each way on its loop (what one end sent waits in a buffer until the other
 * took it; the sender is not read meanwhile) and reads none of them: the
 * frames are the CLI's and the shim's (agent/internal.h, SHIM_PTY_*).
 * Either end closing ends the session; one the node does not join within
 * PTY_JOIN_MS is ended, telling the user why.
 *
 * Over TLS, MHD (0.9.75) hands us one end of a socket pair and never says
 * when the peer closed its TCP connection: we watch that connection for the
 * peer's close ourselves (UV_DISCONNECT), give MHD PTY_DRAIN_MS to pass on
 * what came before it, then end the session.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define PTY_JOIN_MS 15000
#define PTY_DRAIN_MS 200
#define PTY_BUF (64 * 1024)

struct pty_session;

/* One end of a session: an upgraded connection. buf holds what was read
 * from it and not yet written to the other end. */
struct pty_end {
	struct pty_session *ps;
	bool up; /* upgraded: fd and urh are valid */
	bool polling;
	int fd;
	struct MHD_UpgradeResponseHandle *urh;
	uv_poll_t poll;
	uv_poll_t hup; /* TLS: the TCP connection, for its peer's close */
	bool hup_polling;
	char *buf;
	size_t off, len;
};

struct pty_session {
	struct pty_session *next;
	struct server *s;
	char id[WIRE_PTY_SESSION_MAX];
	int64_t job;
	int attempt;
	int node;  /* its index in the state */
	bool sent; /* the node was told */
	bool closing;
	uv_timer_t drain; /* a peer closed: the session ends when it fires */
	bool draining;
	int open_handles;
	int64_t deadline_ms; /* monotonic: the node must join by then */
	struct pty_end cli, agent;
};

static struct pty_end *other(struct pty_end *e)
{
	return e == &e->ps->cli ? &e->ps->agent : &e->ps->cli;
}

static void session_unlink(struct pty_session *ps)
{
	for (struct pty_session **pp = &ps->s->ptys; *pp; pp = &(*pp)->next)
		if (*pp == ps) {
			*pp = ps->next;
			return;
		}
}

static void session_free(struct pty_session *ps)
{
	free(ps->cli.buf);
	free(ps->agent.buf);
	free(ps);
}

static void end_closed(uv_handle_t *h)
{
	struct pty_session *ps = h->data;
	if (--ps->open_handles == 0)
		session_free(ps);
}

static void close_handle(struct pty_session *ps, uv_handle_t *h)
{
	h->data = ps;
	uv_close(h, end_closed);
	ps->open_handles++;
}

/* Ends the session: both connections closed (MHD closes their sockets),
 * the memory freed once libuv let go of the polls. */
static void session_close(struct pty_session *ps)
{
	if (ps->closing)
		return;
	ps->closing = true;
	log_info("job %lld: terminal session %.8s ends", (long long)ps->job, ps->id);
	session_unlink(ps);
	struct pty_end *ends[] = {&ps->cli, &ps->agent};
	for (int i = 0; i < 2; i++) {
		struct pty_end *e = ends[i];
		if (!e->up)
			continue;
		if (e->polling)
			close_handle(ps, (uv_handle_t *)&e->poll);
		if (e->hup_polling)
			close_handle(ps, (uv_handle_t *)&e->hup);
		e->polling = e->hup_polling = false;
		/* the peer hears of the end now, not when MHD next cleans up */
		shutdown(e->fd, SHUT_RDWR);
		MHD_upgrade_action(e->urh, MHD_UPGRADE_ACTION_CLOSE);
		e->up = false;
	}
	if (ps->draining)
		close_handle(ps, (uv_handle_t *)&ps->drain);
	server_kick_mhd(ps->s); /* MHD closes them in its next run */
	if (!ps->open_handles)
		session_free(ps);
}

static void end_events(struct pty_end *e);
static void hup_cb(uv_poll_t *h, int status, int events);

/* Writes what e holds to the other end; false when the session ended. */
static bool flush(struct pty_end *e)
{
	struct pty_end *o = other(e);
	while (e->off < e->len) {
		ssize_t w =
			send(o->fd, e->buf + e->off, e->len - e->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			session_close(e->ps);
			return false;
		}
		e->off += (size_t)w;
	}
	if (e->off == e->len)
		e->off = e->len = 0;
	server_kick_mhd(e->ps->s); /* TLS: MHD encrypts what the socket pair holds */
	return true;
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
	struct pty_end *e = h->data;
	struct pty_session *ps = e->ps;
	if (status < 0) {
		session_close(ps);
		return;
	}
	if (events & UV_WRITABLE) {
		/* room again: what the other end sent */
		if (!flush(other(e)))
			return;
	}
	if ((events & UV_READABLE) && e->len == 0) {
		ssize_t n;
		do
			n = recv(e->fd, e->buf, PTY_BUF, MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			session_close(ps);
			return;
		}
		if (n > 0) {
			e->len = (size_t)n;
			if (!flush(e))
				return;
		}
	}
	end_events(&ps->cli);
	end_events(&ps->agent);
}

/* Reading e while its buffer is empty; writing to it while the other's is
 * not. */
static void end_events(struct pty_end *e)
{
	if (!e->polling)
		return;
	int ev = (e->len == 0 ? UV_READABLE : 0) | (other(e)->len ? UV_WRITABLE : 0);
	uv_poll_start(&e->poll, ev, poll_cb);
}

static void end_start(struct pty_end *e)
{
	struct server *s = e->ps->s;
	uv_poll_init(s->loop, &e->poll, e->fd);
	e->poll.data = e;
	e->polling = true;
}

/* An upgraded connection becomes e; extra: what its peer sent already. */
static void end_up(struct pty_end *e, struct MHD_Connection *c, const char *extra, size_t n,
		   MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct server *s = e->ps->s;
	http_mark_upgraded(s, c);
	/* a terminal may sit idle for hours: no idle timeout of MHD's (its
	 * 120 s cut idle sessions) */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0U);
	e->up = true;
	e->fd = sock;
	e->urh = urh;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci && ci->connect_fd != sock) {
		/* TLS: sock is a socket pair's; the peer's close shows on this one */
		uv_poll_init(s->loop, &e->hup, ci->connect_fd);
		e->hup.data = e;
		e->hup_polling = true;
		uv_poll_start(&e->hup, UV_DISCONNECT, hup_cb);
	}
	e->buf = xmalloc(PTY_BUF);
	fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
	if (n) {
		memcpy(e->buf, extra, MIN(n, (size_t)PTY_BUF));
		e->len = MIN(n, (size_t)PTY_BUF);
	}
}

static void drain_cb(uv_timer_t *t)
{
	session_close(t->data);
}

/* The TCP peer of e closed: what MHD still holds of it gets through, then
 * the session ends. */
static void hup_cb(uv_poll_t *h, int status, int events)
{
	struct pty_end *e = h->data;
	struct pty_session *ps = e->ps;
	uv_poll_stop(h);
	if (ps->draining || ps->closing)
		return;
	ps->draining = true;
	uv_timer_init(ps->s->loop, &ps->drain);
	ps->drain.data = ps;
	uv_timer_start(&ps->drain, drain_cb, PTY_DRAIN_MS, 0);
	server_kick_mhd(ps->s);
}

static void cli_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra,
			 size_t n, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct pty_session *ps = cls;
	(void)con_cls;
	end_up(&ps->cli, c, extra, n, sock, urh);
	/* the node joins when its long-poll hears of it */
	struct snode *node = ps->node < ps->s->st.nnodes ? ps->s->st.nodes[ps->node] : NULL;
	if (node)
		api_wake_node(ps->s, node);
}

static void agent_upgraded(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra,
			   size_t n, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct pty_session *ps = cls;
	(void)con_cls;
	end_up(&ps->agent, c, extra, n, sock, urh);
	if (!ps->cli.up) {
		session_close(ps);
		return;
	}
	log_info("job %lld: terminal attached (session %.8s)", (long long)ps->job, ps->id);
	end_start(&ps->cli);
	end_start(&ps->agent);
	/* what either sent with its request goes first */
	if ((ps->cli.len && !flush(&ps->cli)) || (ps->agent.len && !flush(&ps->agent)))
		return;
	end_events(&ps->cli);
	end_events(&ps->agent);
}

static bool wants_upgrade(struct request *r)
{
	const char *u =
		MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_UPGRADE);
	if (u && strcasecmp(u, WIRE_PTY_PROTOCOL) == 0)
		return true;
	reply_error(r, 400, "expected an upgrade to %s (Connection: Upgrade, Upgrade: %s)",
		    WIRE_PTY_PROTOCOL, WIRE_PTY_PROTOCOL);
	return false;
}

/* GET /v1/jobs/ID/pty, upgraded: the job's terminal, for its owner or an
 * admin, while it runs. */
void h_job_pty(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	struct sjob *j;
	(void)body;
	if (api_job_ref(r, param, &j, NULL) < 0)
		return;
	if (strcmp(j->job.owner, r->user) != 0 && r->role != ROLE_ADMIN) {
		reply_error(r, 403, "job %lld is %s's: only its owner or an admin attaches to it",
			    (long long)j->job.id, j->job.owner);
		return;
	}
	if (!wants_upgrade(r))
		return;
	if (!j->job.req.pty) {
		reply_error(r, 400, "job %lld has no terminal (tenk run --pty makes one)",
			    (long long)j->job.id);
		return;
	}
	const struct attempt *a = job_current_attempt(&j->job);
	if (j->job.state != JOB_RUNNING || !a || a->ended || a->nnodes < 1) {
		reply_error(r, 409, "job %lld is %s: its terminal is there while it runs",
			    (long long)j->job.id, job_state_name(j->job.state));
		return;
	}
	struct snode *n = state_node(&s->st, a->nodes[0].name);
	if (!n) {
		reply_error(r, 409, "job %lld: its node %s is gone", (long long)j->job.id,
			    a->nodes[0].name);
		return;
	}
	struct pty_session *ps = xcalloc(1, sizeof(*ps));
	if (tk_random_hex(ps->id, (WIRE_PTY_SESSION_MAX - 1) / 2) < 0) {
		free(ps);
		reply_error(r, 500, "no randomness for a session id");
		return;
	}
	ps->s = s;
	ps->job = j->job.id;
	ps->attempt = a->number;
	ps->node = n->index;
	ps->deadline_ms = tk_mono_ms() + PTY_JOIN_MS;
	ps->cli.ps = ps->agent.ps = ps;
	ps->next = s->ptys;
	s->ptys = ps;
	reply_upgrade(r, cli_upgraded, ps);
}

/* GET /v1/agent/pty?node=N&agent_id=A&session=S, upgraded: the node's end
 * of a session asked of it. */
void h_agent_pty(struct request *r, const char *param, json_t *body)
{
	struct server *s = r->s;
	(void)param;
	(void)body;
	const char *id = request_arg(r, "session");
	struct snode *n = api_agent_node(r, request_arg(r, "node"), request_arg(r, "agent_id"));
	if (!n || !wants_upgrade(r))
		return;
	for (struct pty_session *ps = s->ptys; ps; ps = ps->next)
		if (id && strcmp(ps->id, id) == 0 && ps->node == n->index && !ps->agent.up &&
		    !ps->closing) {
			reply_upgrade(r, agent_upgraded, ps);
			return;
		}
	reply_error(r, 404, "no terminal session %.40s waits for node %s", id ? id : "",
		    n->rec.inv.name);
}

json_t *ptys_for_node(struct server *s, const struct snode *n)
{
	struct wire_pty p[WIRE_MAX_PTYS];
	int k = 0;
	for (struct pty_session *ps = s->ptys; ps && k < WIRE_MAX_PTYS; ps = ps->next)
		if (ps->node == n->index && ps->cli.up && !ps->sent && !ps->closing) {
			snprintf(p[k].session, sizeof(p[k].session), "%s", ps->id);
			p[k].job = ps->job;
			p[k].attempt = ps->attempt;
			ps->sent = true;
			k++;
		}
	return k ? wire_ptys_pack(p, k) : NULL;
}

void ptys_sweep(struct server *s, int64_t mono)
{
	for (struct pty_session *ps = s->ptys, *next; ps; ps = next) {
		next = ps->next;
		if (ps->agent.up || ps->deadline_ms > mono)
			continue;
		if (ps->cli.up) {
			static const char msg[] =
				"tenk: the job's node did not attach its terminal "
				"in time\r\n";
			if (send(ps->cli.fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) <
			    0) {
				/* closing anyway */
			}
		}
		log_warn("job %lld: node did not join terminal session %.8s in %d s",
			 (long long)ps->job, ps->id, PTY_JOIN_MS / 1000);
		session_close(ps);
	}
}

void ptys_close_all(struct server *s)
{
	while (s->ptys)
		session_close(s->ptys);
}
