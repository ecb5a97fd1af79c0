/*
 * The pairs over RDMA (issue 41), with perftest (`ib_write_bw`,
 * `ib_send_lat`), as operators run them by hand.
 *
 * Every pair of nodes that both have rails (ACTIVE RDMA ports) meets in the
 * rounds the TCP pairs use (each node in one pair a round). Rail k of one
 * node is measured against rail k of the other, as rail-optimised fabrics
 * wire them, all rails of the pair at once: first the bandwidth
 *     ib_write_bw -d mlx5_0 -i 1 -F --report_gbits -D 2 -p PORT [ADDR]
 * then the latency
 *     ib_send_lat -d mlx5_0 -i 1 -F -n 1000 -p PORT [ADDR]
 * The lower rank serves: it starts a server per rail, waits until each says
 * it waits for its client, and tells the other which rails listen (one
 * exchange over coll); the other starts a client per rail at the address
 * its peers reach the server by. Each reads the row after perftest's
 * "#bytes" header (a write test's server prints the client's figures too),
 * and the two exchange them, so both rows of the pair agree. A pair's
 * figure is its weakest rail's (what a job's collective feels); a node's,
 * the upper median of its pairs' (one bad peer does not sink it).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PT_PORT_BASE 18515 /* perftest's own default port */
#define PT_PORT_SPAN 40000 /* ports used: PT_PORT_BASE + [0, span) */
#define PT_LISTEN_MS 10000 /* a server's time to say it waits */
#define PT_RUN_MS 60000	   /* a client's time, connection to figures */
#define PT_END_MS 10000	   /* a server's, once its client has ended */
#define PT_GRACE_MS 1000   /* and where its client has no figure */
#define PT_CONNECT_TRIES 3 /* a client that could not connect tries again */
#define PT_OUT_KEEP 8192   /* the tail of a tool's output kept */
#define PT_WAITING "Waiting for client to connect"
#define PT_PEERS 8	 /* peers each node meets over RDMA by default */
#define PT_PEERS_QUICK 4 /* with --quick */

enum { PT_BW, PT_LAT, PT_TESTS };
static const char *const pt_tool[PT_TESTS] = {"ib_write_bw", "ib_send_lat"};
static const char *const pt_column[PT_TESTS] = {"average[Gb/sec]", "t_typical[usec]"};

/* ---- perftest's table (pure) ------------------------------------------------------- */

/* The next line of *p into buf (cut to n); false at the end. */
static bool next_line(const char **p, char *buf, size_t n)
{
	if (!*p || !**p)
		return false;
	const char *eol = strchr(*p, '\n');
	size_t len = eol ? (size_t)(eol - *p) : strlen(*p);
	snprintf(buf, n, "%.*s", (int)MIN(len, n - 1), *p);
	*p = eol ? eol + 1 : NULL;
	return true;
}

double validate__perftest_figure(const char *out, const char *column)
{
	const char *p = out;
	char line[512];
	while (next_line(&p, line, sizeof(line))) {
		char *t = line + strspn(line, " \t");
		if (strncmp(t, "#bytes", 6) != 0)
			continue;
		/* a column is the words up to one that starts with '#' or holds
		 * ']': "BW average[Gb/sec]" is one, "99% percentile[usec]" one */
		int col = -1, k = 0;
		char name[160] = "", *save = NULL;
		for (char *w = strtok_r(t, " \t\r", &save); w; w = strtok_r(NULL, " \t\r", &save)) {
			size_t l = strlen(name);
			snprintf(name + l, sizeof(name) - l, "%s%s", l ? " " : "", w);
			if (w[0] == '#' || strchr(w, ']')) {
				if (col < 0 && strstr(name, column))
					col = k;
				k++;
				name[0] = '\0';
			}
		}
		if (col < 0)
			continue;
		/* its first row: the line that starts with a number (dashes,
		 * blank lines and warnings between are passed over) */
		while (next_line(&p, line, sizeof(line))) {
			char *w = line + strspn(line, " \t");
			if (strncmp(w, "#bytes", 6) == 0)
				break;
			if (*w < '0' || *w > '9')
				continue;
			save = NULL;
			int i = 0;
			for (w = strtok_r(w, " \t\r", &save); w;
			     w = strtok_r(NULL, " \t\r", &save)) {
				if (i++ != col)
					continue;
				char *end;
				double v = strtod(w, &end);
				return end != w && v >= 0 ? v : -1;
			}
			return -1;
		}
	}
	return -1;
}

/* ---- this node's rails ------------------------------------------------------------------ */

void validate__rdma_rails(struct vpeer *me, const struct node_inventory *inv)
{
	me->nrails = 0;
	me->rail_gbps = 0;
	for (int i = 0; i < inv->nrdma && me->nrails < VRAILS; i++) {
		const struct rdma_port *r = &inv->rdma[i];
		if (!r->active)
			continue;
		snprintf(me->rails[me->nrails++], sizeof(me->rails[0]), "%s:%d", r->dev, r->port);
		if (r->rate_gbps > 0 && (me->rail_gbps == 0 || r->rate_gbps < me->rail_gbps))
			me->rail_gbps = r->rate_gbps;
	}
	char *bw = tk_which(pt_tool[PT_BW], "/usr/bin:/bin"),
	     *lat = tk_which(pt_tool[PT_LAT], "/usr/bin:/bin");
	me->perftest = bw && lat;
	free(bw);
	free(lat);
}

/* ---- running perftest ------------------------------------------------------------------ */

struct pproc {
	pid_t pid; /* 0: none, or reaped */
	int fd;	   /* its output; -1 at its end */
	char out[PT_OUT_KEEP + 1];
	size_t got;
	int status; /* its exit status, 128 + a signal; -1: not ended */
};

static int pproc_start(struct pproc *p, char *const argv[])
{
	p->pid = 0;
	p->fd = -1;
	p->got = 0;
	p->out[0] = '\0';
	p->status = -1;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
	posix_spawnattr_init(&at);
	/* its own group: a tool that outlives its time is killed with its
	 * children */
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&at, 0);
	int rc = posix_spawnp(&p->pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		p->pid = 0;
		p->status = 127;
		snprintf(p->out, sizeof(p->out), "cannot start %s: %s", argv[0], strerror(rc));
		return -rc;
	}
	p->fd = fds[0];
	fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* Reads what it printed; at its output's end, reaps it if it has ended. */
static void pproc_read(struct pproc *p)
{
	while (p->fd >= 0) {
		if (p->got == PT_OUT_KEEP) {
			memmove(p->out, p->out + PT_OUT_KEEP / 2, PT_OUT_KEEP / 2);
			p->got = PT_OUT_KEEP / 2;
		}
		ssize_t n = read(p->fd, p->out + p->got, PT_OUT_KEEP - p->got);
		if (n > 0) {
			p->got += (size_t)n;
			p->out[p->got] = '\0';
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close(p->fd);
		p->fd = -1;
	}
	int st;
	if (p->pid > 0 && waitpid(p->pid, &st, WNOHANG) == p->pid) {
		p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		p->pid = 0;
	}
}

static void pproc_kill(struct pproc *p)
{
	if (p->pid > 0) {
		kill(-p->pid, SIGKILL);
		int st;
		while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
			;
		p->pid = 0;
		p->status = 128 + SIGKILL;
	}
	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
}

/* Waits until each of ps[0..n) that runs has ended or (want not NULL)
 * printed want; those still waited for at the deadline are killed. */
static void pprocs_wait(struct pproc *ps, int n, const char *want, int64_t deadline)
{
	for (;;) {
		struct pollfd pf[VRAILS];
		int k = 0;
		bool pending = false;
		for (int i = 0; i < n; i++) {
			pproc_read(&ps[i]);
			if (ps[i].pid > 0 && !(want && strstr(ps[i].out, want))) {
				pending = true;
				if (ps[i].fd >= 0)
					pf[k++] = (struct pollfd){.fd = ps[i].fd, .events = POLLIN};
			}
		}
		if (!pending)
			return;
		int64_t left = deadline - tk_mono_ms();
		if (left <= 0) {
			for (int i = 0; i < n; i++)
				if (ps[i].pid > 0 && !(want && strstr(ps[i].out, want)))
					pproc_kill(&ps[i]);
			return;
		}
		/* (one that closed its output but runs on is looked at again
		 * shortly) */
		if (poll(pf, (nfds_t)k, (int)MIN(left, k ? 200 : 20)) < 0 && errno != EINTR)
			usleep(20000);
	}
}

/* Its output's last line with something on it, for a reason. */
static void last_line(const char *out, char *buf, size_t n)
{
	const char *end = out + strlen(out);
	while (end > out && strchr(" \t\r\n*", end[-1]))
		end--;
	const char *start = end;
	while (start > out && start[-1] != '\n')
		start--;
	start += strspn(start, " \t*");
	snprintf(buf, n, "%.*s", (int)MIN((size_t)(end - start), n - 1), start);
	if (!buf[0])
		snprintf(buf, n, "no output");
}

/* ---- a pair ---------------------------------------------------------------------------- */

struct pair_ctx {
	struct coll_comm *c;
	int q;	    /* the other node's rank */
	bool serve; /* this node is the lower rank */
	int lower;  /* the lower rank's: the ports are its */
	bool quick;
	const struct vpeer *me, *peer;
	struct rdma_note *note;
	const struct pproc *procs; /* the test's, a rail each */
};

static void note_why(struct rdma_note *note, const char *tool, const char *rail, const char *peer,
		     const char *out)
{
	if (note->why[0])
		return;
	char line[160];
	last_line(out, line, sizeof(line));
	snprintf(note->why, sizeof(note->why), "%s on %s to %s: %s", tool, rail, peer, line);
}

/* A client that could not reach its server (perftest's "Couldn't
 * connect to ADDR:PORT"). */
static bool refused(const struct pproc *p)
{
	return p->status > 0 && strstr(p->out, "connect");
}

/* Its figure, or -1 with why noted. */
static double figure_of(const struct pproc *p, int test, const struct pair_ctx *x)
{
	double f = p->status == 0 ? validate__perftest_figure(p->out, pt_column[test]) : -1;
	if (f <= 0) {
		char rail[MODEL_NIC_NAME_MAX + 8];
		snprintf(rail, sizeof(rail), "%s", x->me->rails[p - x->procs]);
		char *colon = strrchr(rail, ':');
		if (colon)
			*colon = '\0';
		note_why(x->note, pt_tool[test], rail, x->peer->node,
			 p->status == 128 + SIGKILL ? "killed, out of time" : p->out);
	}
	return f > 0 ? f : -1;
}

/* One test on every rail both nodes have, at once: fig[r] the figure of
 * rail r (-1: not measured; 0: it failed). */
static int pair_test(struct pair_ctx *x, int test, double *fig, struct tk_error *err)
{
	int nr = MIN(x->me->nrails, x->peer->nrails), rc = 0;
	struct pproc *ps = xcalloc((size_t)nr + 1, sizeof(*ps));
	x->procs = ps;
	uint32_t mine = 0, theirs = 0;
	char dev[VRAILS][MODEL_NIC_NAME_MAX + 8], port[VRAILS][16], tcp[VRAILS][16];
	const char *argv[VRAILS][16];
	for (int r = 0; r < nr; r++) {
		char *colon;
		snprintf(dev[r], sizeof(dev[r]), "%s", x->me->rails[r]);
		colon = strrchr(dev[r], ':');
		snprintf(port[r], sizeof(port[r]), "%s", colon ? colon + 1 : "1");
		if (colon)
			*colon = '\0';
		snprintf(tcp[r], sizeof(tcp[r]), "%d",
			 PT_PORT_BASE + ((x->lower * VRAILS + r) * PT_TESTS + test) % PT_PORT_SPAN);
		int a = 0;
		argv[r][a++] = pt_tool[test];
		argv[r][a++] = "-d";
		argv[r][a++] = dev[r];
		argv[r][a++] = "-i";
		argv[r][a++] = port[r];
		argv[r][a++] = "-F"; /* no warning over the CPU's frequency */
		argv[r][a++] = "-p";
		argv[r][a++] = tcp[r];
		if (test == PT_BW) {
			argv[r][a++] = "--report_gbits";
			argv[r][a++] = "-D";
			argv[r][a++] = x->quick ? "1" : "2";
		} else {
			argv[r][a++] = "-n";
			argv[r][a++] = x->quick ? "200" : "1000";
		}
		if (!x->serve)
			argv[r][a++] = x->peer->addr;
		argv[r][a] = NULL;
	}
	/* the servers listen; the client is ready where perftest is here */
	if (x->serve) {
		for (int r = 0; r < nr; r++) {
			if (pproc_start(&ps[r], (char *const *)argv[r]) == 0)
				mine |= 1u << r;
			else
				note_why(x->note, pt_tool[test], dev[r], x->peer->node, ps[r].out);
		}
		pprocs_wait(ps, nr, PT_WAITING, tk_mono_ms() + PT_LISTEN_MS);
		for (int r = 0; r < nr; r++)
			if ((mine & (1u << r)) &&
			    (ps[r].pid == 0 || !strstr(ps[r].out, PT_WAITING))) {
				mine &= ~(1u << r);
				note_why(x->note, pt_tool[test], dev[r], x->peer->node, ps[r].out);
			}
	} else if (x->me->perftest) {
		mine = nr >= 32 ? ~0u : (1u << nr) - 1;
	}
	rc = coll_sendrecv(x->c, x->q, &mine, sizeof(mine), x->q, &theirs, sizeof(theirs), err);
	uint32_t both = rc >= 0 ? mine & theirs : 0;
	for (int r = 0; r < nr; r++)
		if (x->serve && !(both & (1u << r)))
			pproc_kill(&ps[r]);
	double got[VRAILS], other[VRAILS];
	for (int r = 0; r < VRAILS; r++)
		got[r] = other[r] = -1;
	if (!x->serve) {
		/* the server says it waits a moment before it listens: a
		 * client that could not connect tries again */
		int64_t deadline = tk_mono_ms() + PT_RUN_MS;
		for (int t = 0; t < PT_CONNECT_TRIES && both; t++) {
			for (int r = 0; r < nr; r++)
				if ((both & (1u << r)) && (t == 0 || refused(&ps[r])))
					pproc_start(&ps[r], (char *const *)argv[r]);
			pprocs_wait(ps, nr, NULL, deadline);
			bool again = false;
			for (int r = 0; r < nr; r++)
				again |= (both & (1u << r)) && refused(&ps[r]);
			if (!again)
				break;
			usleep(300000);
		}
	}
	/* the client's figures go to the server once its tools have ended (a
	 * server whose client never came would wait for it for ever); then
	 * the server's tools end, and the pair's figures go back: the
	 * client's where it has one, so that both rows agree */
	for (int r = 0; r < nr; r++)
		if (!x->serve && (both & (1u << r)))
			got[r] = figure_of(&ps[r], test, x);
	if (rc >= 0)
		rc = coll_sendrecv(x->c, x->q, got, sizeof(got), x->q, other, sizeof(other), err);
	if (x->serve) {
		/* a server whose client ended without a figure may wait for
		 * it still: a moment, then it is killed */
		pprocs_wait(ps, nr, NULL, tk_mono_ms() + PT_GRACE_MS);
		for (int r = 0; r < nr; r++)
			if (other[r] <= 0)
				pproc_kill(&ps[r]);
		pprocs_wait(ps, nr, NULL, tk_mono_ms() + PT_END_MS);
		for (int r = 0; r < nr; r++) {
			if (!(both & (1u << r)) || other[r] > 0) {
				got[r] = other[r];
				continue;
			}
			double f = ps[r].status == 0
					   ? validate__perftest_figure(ps[r].out, pt_column[test])
					   : -1;
			got[r] = f > 0 ? f : 0;
			if (f <= 0) {
				char why[128];
				snprintf(why, sizeof(why), "no figure from its client at %.60s",
					 x->peer->addr);
				note_why(x->note, pt_tool[test], dev[r], x->peer->node, why);
			}
		}
	}
	if (rc >= 0)
		rc = coll_sendrecv(x->c, x->q, got, sizeof(got), x->q, other, sizeof(other), err);
	for (int r = 0; r < nr; r++) {
		double pair = x->serve ? got[r] : other[r];
		fig[r] = !(both & (1u << r)) ? -1 : pair > 0 ? pair : 0;
	}
	for (int r = 0; r < nr; r++)
		pproc_kill(&ps[r]);
	free(ps);
	return rc;
}

int validate__rdma_pairs(struct coll_comm *c, const struct vpeer *all, bool quick, int peers,
			 double *bw, double *lat, struct rdma_note *note, struct tk_error *err)
{
	int me = coll_rank(c), n = coll_size(c), m = n % 2 ? n + 1 : n;
	/* a round is seconds (perftest's -D 2, its set-up, the latency): the
	 * first rounds only, so that a cluster's run takes as long whatever
	 * its size; each gives every node a new peer, enough for the upper
	 * median to name a bad node (--rdma-peers all: every pair) */
	int rounds = MIN(m - 1, peers > 0 ? peers : quick ? PT_PEERS_QUICK : PT_PEERS);
	memset(note, 0, sizeof(*note));
	int with = 0;
	for (int i = 0; i < n; i++) {
		bw[i] = lat[i] = -1;
		with += all[i].nrails > 0;
	}
	/* no pair to measure (every node knows every node's rails: all
	 * leave alike, without the rounds' barriers) */
	if (with < 2)
		return 0;
	int rc = 0;
	for (int round = 0; round < rounds && rc >= 0; round++) {
		int q = validate__partner(round, me, m);
		if ((rc = coll_barrier(c, err)) < 0)
			break;
		if (q >= n || all[me].nrails == 0 || all[q].nrails == 0)
			continue;
		struct pair_ctx x = {.c = c,
				     .q = q,
				     .serve = me < q,
				     .lower = MIN(me, q),
				     .quick = quick,
				     .me = &all[me],
				     .peer = &all[q],
				     .note = note};
		int nr = MIN(all[me].nrails, all[q].nrails);
		double f[PT_TESTS][VRAILS];
		for (int t = 0; t < PT_TESTS && rc >= 0; t++)
			rc = pair_test(&x, t, f[t], err);
		if (rc < 0)
			break;
		/* the pair's bandwidth: its weakest rail's (0 where one failed) */
		for (int r = 0; r < nr; r++) {
			if (f[PT_BW][r] < 0)
				continue;
			if (bw[q] < 0 || f[PT_BW][r] < bw[q])
				bw[q] = f[PT_BW][r];
			if (f[PT_BW][r] > 0 &&
			    (!note->weakest[0] || f[PT_BW][r] < note->weakest_gbits)) {
				note->weakest_gbits = f[PT_BW][r];
				snprintf(note->weakest, sizeof(note->weakest), "%.40s to %.40s",
					 all[me].rails[r], all[q].node);
			}
			if (f[PT_LAT][r] > 0 && f[PT_LAT][r] > lat[q])
				lat[q] = f[PT_LAT][r];
			if (f[PT_LAT][r] > 0 && f[PT_LAT][r] > note->slowest_us) {
				note->slowest_us = f[PT_LAT][r];
				snprintf(note->slowest, sizeof(note->slowest), "%.40s to %.40s",
					 all[me].rails[r], all[q].node);
			}
		}
	}
	return rc;
}

/* ---- judging (pure) ------------------------------------------------------------------- */

/* The median of the others' figures (lat: latency, else bandwidth), those
 * over 0; k: how many. */
static double peers_median(const struct vpeer *all, int n, int me, bool lat, int *k)
{
	double *v = xcalloc((size_t)n + 1, sizeof(double));
	*k = 0;
	for (int i = 0; i < n; i++) {
		double f = lat ? all[i].rdma_lat_us : all[i].rdma_gbits;
		if (i != me && all[i].rdma_pairs > 0 && f > 0)
			v[(*k)++] = f;
	}
	double med = *k > 0 ? validate__median(v, *k) : 0;
	free(v);
	return med;
}

/* Why this node's pairs were not measured, or false where they were. */
static bool rdma_skipped(const struct vpeer *my, char *detail, size_t n)
{
	if (my->nrails == 0)
		snprintf(detail, n, "skipped: no ACTIVE RDMA port");
	else if (!my->perftest)
		snprintf(detail, n,
			 "skipped: perftest is not installed here (ib_write_bw, ib_send_lat on "
			 "the PATH: the perftest package)");
	else if (my->rdma_pairs == 0)
		snprintf(detail, n,
			 "skipped: no peer on another host with an ACTIVE RDMA port and perftest");
	else
		return false;
	return true;
}

/* Appends to a check's detail, cut at its end. */
__attribute__((format(printf, 2, 3))) static void detail_add(struct vcheck *c, const char *fmt, ...)
{
	size_t l = strlen(c->detail);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->detail + l, sizeof(c->detail) - l, fmt, ap);
	va_end(ap);
}

/* What both checks share: skipped, or failed (no figure: perftest's own
 * words); false where the figure is there to be judged. */
static bool rdma_settled(struct vcheck *c, const struct vpeer *my, double figure,
			 const struct rdma_note *note, const char *tool)
{
	c->figure = figure;
	if (rdma_skipped(my, c->detail, sizeof(c->detail))) {
		c->verdict = V_SKIP;
		return true;
	}
	if (figure > 0)
		return false;
	c->verdict = V_FAIL;
	c->broken = true;
	if (note->why[0])
		snprintf(c->detail, sizeof(c->detail), "%s", note->why);
	else
		snprintf(c->detail, sizeof(c->detail), "no figure from %s", tool);
	return true;
}

int validate__rdma_judge(const struct vpeer *all, int n, int me, const struct vrun *o,
			 const struct rdma_note *note, struct vcheck *c)
{
	const struct vpeer *my = &all[me];
	int k;
	/* the bandwidth: half the port's rate at least, and near the peers' */
	struct vcheck *b = &c[0];
	validate__vcheck_set(b, "interconnect", "rdma_pair_bandwidth", "Gb/s", true);
	if (!rdma_settled(b, my, my->rdma_gbits, note, pt_tool[PT_BW])) {
		if (my->rail_gbps > 0)
			validate__vcheck_judge(b, 0.5 * my->rail_gbps, "half the port's rate");
		double med = peers_median(all, n, me, false, &k);
		char from[48];
		snprintf(from, sizeof(from), "%.0f%% of %d peers' median", (1 - o->tolerance) * 100,
			 k);
		if (k >= 2)
			validate__vcheck_raise(b, (1 - o->tolerance) * med, from);
		detail_add(b, "ib_write_bw on %d rail%s, the upper median of %d pair%s' weakest",
			   my->nrails, my->nrails == 1 ? "" : "s", my->rdma_pairs,
			   my->rdma_pairs == 1 ? "" : "s");
		if (k >= 2 && my->rdma_gbits < med)
			detail_add(b, "; %.1f%% below the peers' median (%.4g Gb/s)",
				   (1 - my->rdma_gbits / med) * 100, med);
		if (note->weakest[0])
			detail_add(b, "; the weakest: %s, %.4g Gb/s", note->weakest,
				   note->weakest_gbits);
	}
	/* the latency: not far over the peers' */
	struct vcheck *t = &c[1];
	validate__vcheck_set(t, "interconnect", "rdma_pair_latency", "us", false);
	if (!rdma_settled(t, my, my->rdma_lat_us, note, pt_tool[PT_LAT])) {
		double med = peers_median(all, n, me, true, &k);
		detail_add(t, "ib_send_lat, the lower median of %d pair%s' slowest rail",
			   my->rdma_pairs, my->rdma_pairs == 1 ? "" : "s");
		if (k >= 2) {
			/* RDMA's latency is steady: twice the peers', and 2 µs
			 * over (a node's PCIe or a cable, not jitter) */
			validate__vcheck_judge(t, MAX(2 * med, med + 2),
					       "2x the peers' median and 2 us over");
			detail_add(t, "; the peers' median %.3g us", med);
		} else {
			detail_add(t, " (%d peer%s measured: none to hold it to)", k,
				   k == 1 ? "" : "s");
		}
		if (note->slowest[0])
			detail_add(t, "; the slowest: %s, %.3g us", note->slowest,
				   note->slowest_us);
	}
	return 2;
}
