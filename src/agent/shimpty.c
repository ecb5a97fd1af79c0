/*
 * An interactive task's terminal, in its shim (`tenk run --pty`): the shim
 * holds the pseudo-terminal's master and serves it on DIR/pty.sock, where
 * the agent connects for each session the server relays. What comes in is
 * frames (WIRE_PTY_DATA: keystrokes for the task; WIRE_PTY_WINSIZE: the
 * user's terminal size); what goes out is the terminal's output as it is.
 * The newest connection wins; with none, the master is not read and the
 * task blocks when it has written a terminal's buffer full, as under a
 * terminal nobody reads. When the task's side closes, what was read goes
 * out and the connection ends.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#define PTY_READ 16384
#define PTY_MAX_PENDING (1 << 20) /* keystrokes the task has not read yet */

struct pty_conn {
	uv_pipe_t pipe;
	uv_shutdown_t shut;
	struct shim_pty *p;
	struct strbuf frames; /* what came in, not yet a whole frame */
	bool ending;
};

struct shim_pty {
	uv_loop_t *loop;
	int master;
	uv_pipe_t listener;
	uv_poll_t poll;
	struct pty_conn *conn;
	struct strbuf in; /* for the task, not yet written */
	bool eof;	  /* the task's side is closed */
	bool closing;
	int open_handles;
};

/* The terminal's memory goes with the last of its handles (its
 * connections' too). */
static void unref(struct shim_pty *p)
{
	if (--p->open_handles == 0) {
		strbuf_release(&p->in);
		free(p);
	}
}

static void handle_closed(uv_handle_t *h)
{
	unref(h->data);
}

static void conn_closed(uv_handle_t *h)
{
	struct pty_conn *c = h->data;
	struct shim_pty *p = c->p;
	strbuf_release(&c->frames);
	free(c);
	unref(p);
}

static void conn_drop(struct pty_conn *c)
{
	if (c->p->conn == c)
		c->p->conn = NULL;
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, conn_closed);
}

static void shut_cb(uv_shutdown_t *s, int status)
{
	conn_drop(s->data);
}

/* Ends c once what it was given is written. */
static void conn_end(struct pty_conn *c)
{
	if (c->ending)
		return;
	c->ending = true;
	c->shut.data = c;
	if (uv_shutdown(&c->shut, (uv_stream_t *)&c->pipe, shut_cb) < 0)
		conn_drop(c);
}

static void poll_update(struct shim_pty *p);

static void write_done(uv_write_t *w, int status)
{
	free(w->data);
	free(w);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
	struct shim_pty *p = h->data;
	if (status < 0)
		events = UV_READABLE; /* a read says what is wrong */
	if ((events & UV_WRITABLE) && p->in.len) {
		ssize_t w = write(p->master, p->in.buf, p->in.len);
		if (w > 0) {
			memmove(p->in.buf, p->in.buf + w, p->in.len - (size_t)w);
			p->in.len -= (size_t)w;
		}
	}
	if ((events & UV_READABLE) && p->conn) {
		char *buf = xmalloc(PTY_READ);
		ssize_t n = read(p->master, buf, PTY_READ);
		if (n > 0) {
			uv_write_t *w = xcalloc(1, sizeof(*w));
			w->data = buf;
			uv_buf_t b = uv_buf_init(buf, (unsigned)n);
			if (uv_write(w, (uv_stream_t *)&p->conn->pipe, &b, 1, write_done) < 0) {
				free(buf);
				free(w);
				conn_drop(p->conn);
			}
		} else {
			free(buf);
			if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				/* EIO: every descriptor of the task's side is closed */
				p->eof = true;
				conn_end(p->conn);
			}
		}
	}
	poll_update(p);
}

/* The master is read while a connection takes the output, written while
 * keystrokes wait. */
static void poll_update(struct shim_pty *p)
{
	if (p->closing)
		return;
	int ev = (p->conn && !p->conn->ending && !p->eof ? UV_READABLE : 0) |
		 (p->in.len && !p->eof ? UV_WRITABLE : 0);
	if (ev)
		uv_poll_start(&p->poll, ev, poll_cb);
	else
		uv_poll_stop(&p->poll);
}

/* The whole frames of what came in. */
static void frames(struct pty_conn *c)
{
	struct shim_pty *p = c->p;
	size_t at = 0;
	while (c->frames.len - at >= 3) {
		const unsigned char *f = (const unsigned char *)c->frames.buf + at;
		size_t len = (size_t)f[1] << 8 | f[2];
		if (c->frames.len - at < 3 + len)
			break;
		if (f[0] == WIRE_PTY_DATA) {
			if (p->in.len + len <= PTY_MAX_PENDING)
				strbuf_add(&p->in, (const char *)f + 3, len);
		} else if (f[0] == WIRE_PTY_WINSIZE && len == 4) {
			struct winsize ws = {.ws_row = (unsigned short)(f[3] << 8 | f[4]),
					     .ws_col = (unsigned short)(f[5] << 8 | f[6])};
			if (ws.ws_row && ws.ws_col)
				ioctl(p->master, TIOCSWINSZ, &ws);
		}
		at += 3 + len;
	}
	memmove(c->frames.buf, c->frames.buf + at, c->frames.len - at);
	c->frames.len -= at;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	*buf = uv_buf_init(xmalloc(PTY_READ), PTY_READ);
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct pty_conn *c = s->data;
	if (n > 0 && !c->p->closing) {
		strbuf_add(&c->frames, buf->base, (size_t)n);
		frames(c);
	}
	free(buf->base);
	struct shim_pty *p = c->p;
	if (n < 0)
		conn_drop(c);
	poll_update(p);
}

static void connection_cb(uv_stream_t *server, int status)
{
	struct shim_pty *p = server->data;
	if (status < 0)
		return;
	struct pty_conn *c = xcalloc(1, sizeof(*c));
	c->p = p;
	p->open_handles++;
	strbuf_init(&c->frames);
	uv_pipe_init(p->loop, &c->pipe, 0);
	c->pipe.data = c;
	if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
		uv_close((uv_handle_t *)&c->pipe, conn_closed);
		return;
	}
	if (p->conn) /* the newest session wins */
		conn_end(p->conn);
	p->conn = c;
	uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb);
	if (p->eof)
		conn_end(c);
	poll_update(p);
}

/* DIR/pty.sock, 0600, named through the folder's descriptor (a socket's
 * name is at most 108 bytes). */
static int listen_at(const char *dir, char *why, size_t wn)
{
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(why, wn, "cannot open %s: %s", dir, strerror(errno));
		return -1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/pty.sock", dfd);
	unlink(sa.sun_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(0177);
	int r = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 4) < 0) {
		snprintf(why, wn, "cannot listen on %s/pty.sock: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	close(dfd);
	return fd;
}

struct shim_pty *shim_pty_open(uv_loop_t *loop, const char *dir, int uid, char *tty, size_t n,
			       char *why, size_t wn)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, tty, n) != 0) {
		snprintf(why, wn, "cannot make a terminal: %s", strerror(errno));
		if (m >= 0)
			close(m);
		return NULL;
	}
	/* the task's own, as a login's terminal is */
	if (uid >= 0 && chown(tty, (uid_t)uid, (gid_t)-1) < 0) {
		snprintf(why, wn, "cannot give %s to uid %d: %s", tty, uid, strerror(errno));
		close(m);
		return NULL;
	}
	chmod(tty, 0620);
	struct winsize ws = {.ws_row = 24, .ws_col = 80};
	ioctl(m, TIOCSWINSZ, &ws);
	int lfd = listen_at(dir, why, wn);
	if (lfd < 0) {
		close(m);
		return NULL;
	}
	fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
	struct shim_pty *p = xcalloc(1, sizeof(*p));
	p->loop = loop;
	p->master = m;
	strbuf_init(&p->in);
	uv_pipe_init(loop, &p->listener, 0);
	p->listener.data = p;
	uv_poll_init(loop, &p->poll, m);
	p->poll.data = p;
	p->open_handles = 2;
	if (uv_pipe_open(&p->listener, lfd) < 0 ||
	    uv_listen((uv_stream_t *)&p->listener, 4, connection_cb) < 0) {
		snprintf(why, wn, "cannot serve the terminal on %s/pty.sock", dir);
		shim_pty_close(p);
		return NULL;
	}
	return p;
}

void shim_pty_close(struct shim_pty *p)
{
	if (!p || p->closing)
		return;
	p->closing = true;
	if (p->conn)
		conn_drop(p->conn);
	uv_close((uv_handle_t *)&p->poll, handle_closed);
	uv_close((uv_handle_t *)&p->listener, handle_closed);
	close(p->master);
}
