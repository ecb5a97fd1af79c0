/*
 * `tenk run --pty`: the job's one task runs under a pseudo-terminal on its
 * node, and this terminal is joined to it through the server (GET
 * /v1/jobs/ID/pty, upgraded; server/pty.c, agent/pty.c, agent/shimpty.c).
 * While joined, this terminal is raw: every key goes to the task, Ctrl-C
 * and Ctrl-D too, as under ssh; its size goes along, and again when it
 * changes. When the task's side closes, the terminal is restored and the
 * job's end is waited for: its status is tenk run's.
 */
#include "internal.h"
#include "model/wire.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define PTY_POLL_MS 100
#define PTY_BUF 16384

static volatile sig_atomic_t interrupted, resized;

static void on_int(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int send_frame(struct client_stream *s, char type, const void *data, size_t n)
{
	unsigned char head[3] = {(unsigned char)type, (unsigned char)(n >> 8),
				 (unsigned char)(n & 0xff)};
	if (client_stream_send(s, head, 3) < 0)
		return -1;
	return n ? client_stream_send(s, data, n) : 0;
}

static int send_size(struct client_stream *s)
{
	struct winsize ws;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return 0;
	unsigned char b[4] = {(unsigned char)(ws.ws_row >> 8), (unsigned char)ws.ws_row,
			      (unsigned char)(ws.ws_col >> 8), (unsigned char)ws.ws_col};
	return send_frame(s, WIRE_PTY_WINSIZE, b, 4);
}

/* Joined: keys to the task, its output here, until its side ends. */
static void join(struct client_stream *s)
{
	char *buf = xmalloc(PTY_BUF);
	sigset_t block, none;
	sigemptyset(&block);
	sigaddset(&block, SIGWINCH);
	sigprocmask(SIG_BLOCK, &block, &none);
	sigdelset(&none, SIGWINCH);
	struct sigaction sa = {.sa_handler = on_winch};
	sigaction(SIGWINCH, &sa, NULL);
	bool in_open = true;
	for (;;) {
		if (cli__hangup)
			break;
		if (resized) {
			resized = 0;
			if (send_size(s) < 0)
				break;
		}
		struct pollfd p[2] = {{.fd = client_stream_fd(s), .events = POLLIN},
				      {.fd = STDIN_FILENO, .events = in_open ? POLLIN : 0}};
		int r = client_stream_buffered(s) ? 1 : ppoll(p, 2, NULL, &none);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (client_stream_buffered(s) || p[0].revents) {
			ssize_t n = client_stream_recv(s, buf, PTY_BUF);
			if (n == 0 || (n < 0 && n != -EAGAIN))
				break;
			if (n > 0 && tk_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
				break;
		}
		if (p[1].revents) {
			ssize_t n = read(STDIN_FILENO, buf, PTY_BUF > 65535 ? 65535 : PTY_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false; /* no more input; its output still comes */
				continue;
			}
			if (send_frame(s, WIRE_PTY_DATA, buf, (size_t)n) < 0)
				break;
		}
	}
	signal(SIGWINCH, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	sigprocmask(SIG_UNBLOCK, &block, NULL);
	free(buf);
}

/* The job's state, with its reason; NULL after saying what failed. */
static json_t *job_now(struct ctx *c, const char *path)
{
	json_t *j;
	struct tk_error err;
	if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) < 0) {
		cli__api_error(c, &err);
		return NULL;
	}
	return j;
}

/* Has job j ended? Then *rc is its exit status (tenk wait's). */
static bool ended(json_t *j, int *rc)
{
	const char *st = cli__jstr(j, "state");
	if (!strcmp(st, "PENDING") || !strcmp(st, "STARTING") || !strcmp(st, "RUNNING"))
		return false;
	*rc = cli__job_exit_status(j);
	return true;
}

int cli__run_pty(struct ctx *c, const char *id, bool keep)
{
	_cleanup_free_ char *path = xasprintf("/v1/jobs/%s", id);
	_cleanup_free_ char *pty_path = xasprintf("/v1/jobs/%s/pty", id);
	struct sigaction sa = {.sa_handler = on_int}, old;
	sigaction(SIGINT, &sa, &old);
	char reason[512] = "";
	int rc = CLI_EXIT_ERROR;
	/* until it runs: why it waits; Ctrl-C cancels it */
	for (;;) {
		if (cli__hangup) {
			rc = cli__hung_up(c, id, keep);
			goto out;
		}
		if (interrupted) {
			struct tk_error err;
			cli__cancel_job(c, id, &err);
			fprintf(stderr, "tenk run: job %s cancelled\n", id);
			sigaction(SIGINT, &old, NULL);
			return 130;
		}
		json_t *j = job_now(c, path);
		if (!j)
			goto out;
		const char *st = cli__jstr(j, "state");
		if (ended(j, &rc)) {
			fprintf(stderr, "tenk run: job %s is %s before its terminal opened\n", id,
				st);
			json_decref(j);
			goto out;
		}
		if (!strcmp(st, "PENDING") && strcmp(reason, cli__jstr(j, "reason")) != 0) {
			snprintf(reason, sizeof(reason), "%s", cli__jstr(j, "reason"));
			if (*reason)
				fprintf(stderr, "tenk run: job %s waits: %s\n", id, reason);
		}
		bool running = !strcmp(st, "RUNNING");
		json_decref(j);
		if (running)
			break;
		nap(PTY_POLL_MS);
	}
	struct client_stream *s;
	struct tk_error err;
	if (client_upgrade(&c->client, pty_path, WIRE_PTY_PROTOCOL, CALL_TIMEOUT_MS, &s, &err) <
	    0) {
		rc = cli__api_error(c, &err);
		goto out;
	}
	struct termios saved, raw;
	bool tty = tcgetattr(STDIN_FILENO, &saved) == 0;
	if (tty) {
		raw = saved;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSANOW, &raw); /* what was typed ahead goes too */
	}
	if (send_size(s) == 0)
		join(s);
	if (tty)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
	client_stream_close(s);
	if (cli__hangup) {
		rc = cli__hung_up(c, id, keep);
		goto out;
	}
	/* the terminal closed: the job ends (or has) */
	for (;;) {
		json_t *j = job_now(c, path);
		if (!j)
			goto out;
		bool done = ended(j, &rc);
		json_decref(j);
		if (done)
			break;
		if (interrupted) {
			fprintf(stderr, "tenk run: no longer waiting for job %s\n", id);
			rc = 130;
			break;
		}
		nap(PTY_POLL_MS);
	}
out:
	sigaction(SIGINT, &old, NULL);
	return rc;
}
