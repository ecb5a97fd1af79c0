/*
 * Training metrics from the job: each attempt gets $TENK_METRICS, a file
 * of its own user's in a folder of the agent's (WORK/metrics, which the
 * user can pass through but not change, so the file cannot be swapped for
 * a link), to which its tasks append lines such as
 * "step=120 loss=2.31 lr=3e-4 tokens_per_s=1.2e5". The agent reads what
 * is new every second and sends the lines with the heartbeats (at most 32
 * an attempt a beat, the oldest first), each with where it ends in the
 * file; it keeps them until a beat that carried them is answered (up to
 * 1,024, thinned evenly beyond), and the server takes each line once, by
 * that offset: a server away loses no line, an agent restarted (which reads
 * the file again) adds none twice.
 *
 * A line's time is when it was written, as near as the file tells: the
 * last line a read finds was written at the file's last change, and the
 * lines before it are spread evenly back to the last change the read
 * before saw (what goodput and stragglers measure steps by; a second's
 * read time would blur them).
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TRAIN_READ_MAX (64 * 1024) /* read per attempt and second */
#define TRAIN_BEHIND_MAX (1 << 20) /* further behind than this: skip to the end */
#define TRAIN_PER_BEAT 32	   /* lines of one attempt sent with one beat, at most */
/* lines of one attempt kept until the server takes them (the server away):
 * when full, every other one goes */
#define TRAIN_PEND_MAX 1024

/* RUN/metrics/JOB.ATTEMPT (RUN: the run folder, WORK by default) */
static char *train_path(const struct taskgroup *g)
{
	return xasprintf("%s/metrics/%lld.%d", g->a->cfg.run_dir, (long long)g->job, g->attempt);
}

char *agent__train_setup(struct taskgroup *g, bool as_user, uint32_t uid, uint32_t gid)
{
	struct agent *a = g->a;
	_cleanup_free_ char *base = xasprintf("%s/metrics", a->cfg.run_dir);
	char *path = train_path(g);
	int r = tk_mkdir_p(base, 0711);
	if (r == 0)
		chmod(base, 0711);
	int fd = r == 0 ? open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (fd < 0 && r == 0)
		r = -errno;
	if (fd >= 0) {
		if (as_user && fchown(fd, (uid_t)uid, (gid_t)gid) < 0)
			r = -errno;
		close(fd);
	}
	if (r < 0)
		log_warn("job %lld: cannot make its metrics file %s: %s", (long long)g->job, path,
			 strerror(-r));
	else /* nothing in it was written before now (the first read's spread) */
		g->train.made_ms = tk_wall_ms();
	return path;
}

static void take_line(struct taskgroup *g, const char *line, size_t len, int64_t end)
{
	struct train_point p;
	if (train_line_parse(line, len, &p) == 0)
		return;
	p.at_ms = tk_wall_ms();
	if (!g->train.pend) {
		g->train.pend = xcalloc(TRAIN_PEND_MAX, sizeof(*g->train.pend));
		g->train.pend_offset = xcalloc(TRAIN_PEND_MAX, sizeof(*g->train.pend_offset));
	}
	if (g->train.npend == TRAIN_PEND_MAX) { /* every other one goes */
		int k = 0;
		for (int i = 0; i < g->train.npend; i += 2, k++) {
			g->train.pend[k] = g->train.pend[i];
			g->train.pend_offset[k] = g->train.pend_offset[i];
		}
		g->train.npend = k;
	}
	g->train.pend_offset[g->train.npend] = end;
	g->train.pend[g->train.npend++] = p;
}

void agent__train_poll_group(struct taskgroup *g)
{
	if (g->train.fd < 0) {
		_cleanup_free_ char *path = train_path(g);
		g->train.fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (g->train.fd < 0)
			return;
	}
	struct stat st;
	if (fstat(g->train.fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	off_t pos = lseek(g->train.fd, 0, SEEK_CUR);
	if (st.st_size < pos) { /* the job truncated it */
		lseek(g->train.fd, 0, SEEK_SET);
		g->train.partial = 0;
	} else if (st.st_size - pos > TRAIN_BEHIND_MAX) {
		lseek(g->train.fd, st.st_size - TRAIN_READ_MAX, SEEK_SET);
		g->train.partial = 0;
		g->train.skip = true; /* to the end of the line cut */
	}
	char buf[TRAIN_READ_MAX];
	off_t at = lseek(g->train.fd, 0, SEEK_CUR);
	ssize_t n = read(g->train.fd, buf, sizeof(buf));
	int first = g->train.npend;
	bool thinned = false;
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (g->train.partial < sizeof(g->train.line))
				g->train.line[g->train.partial] = buf[i];
			g->train.partial++;
			continue;
		}
		if (!g->train.skip) {
			thinned |= g->train.npend == TRAIN_PEND_MAX;
			take_line(g, g->train.line, MIN(g->train.partial, sizeof(g->train.line)),
				  (int64_t)at + i + 1);
		}
		g->train.skip = false;
		g->train.partial = 0;
	}
	/* when they were written: up to the file's last change, spread back
	 * to the change the last read saw; at the first, a second before, or
	 * to when the file was made if later (the first lines of a job read
	 * half a second after its start were not written over a second: a
	 * rank that then stops would keep that step time) */
	int count = g->train.npend - first;
	if (count <= 0 || thinned)
		return;
	if (fstat(g->train.fd, &st) < 0) /* (after the read: what it read was written by then) */
		return;
	int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	int64_t prev = g->train.mtime_ms && g->train.mtime_ms < mt
			       ? g->train.mtime_ms
			       : MIN(MAX(mt - 1000, g->train.made_ms), mt);
	for (int k = 0; k < count; k++)
		g->train.pend[first + k].at_ms = prev + (mt - prev) * (k + 1) / count;
	g->train.mtime_ms = mt;
}

int agent__train_for_heartbeat(struct agent *a, struct wire_train **ret)
{
	*ret = NULL;
	int n = 0;
	size_t alloc = 0, pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v) && n < WIRE_MAX_CHECKPOINTS) {
		struct taskgroup *g = v;
		/* the oldest first; kept until the server takes them */
		for (int i = 0;
		     i < g->train.npend && i < TRAIN_PER_BEAT && n < WIRE_MAX_CHECKPOINTS; i++) {
			xgrow(ret, &alloc, (size_t)n + 1, sizeof(**ret));
			(*ret)[n++] = (struct wire_train){.job = g->job,
							  .attempt = g->attempt,
							  .point = g->train.pend[i],
							  .offset = g->train.pend_offset[i]};
			g->train.sent_upto = g->train.pend_offset[i];
		}
	}
	return n;
}

void agent__train_delivered(struct agent *a)
{
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		int k = 0;
		while (k < g->train.npend && g->train.pend_offset[k] <= g->train.sent_upto)
			k++;
		if (!k)
			continue;
		memmove(g->train.pend, g->train.pend + k,
			sizeof(*g->train.pend) * (size_t)(g->train.npend - k));
		memmove(g->train.pend_offset, g->train.pend_offset + k,
			sizeof(*g->train.pend_offset) * (size_t)(g->train.npend - k));
		g->train.npend -= k;
	}
}

void agent__train_release(struct taskgroup *g, bool remove)
{
	free(g->train.pend);
	free(g->train.pend_offset);
	g->train.pend = NULL;
	g->train.pend_offset = NULL;
	g->train.npend = 0;
	if (g->train.fd >= 0)
		close(g->train.fd);
	g->train.fd = -1;
	if (!remove)
		return;
	_cleanup_free_ char *path = train_path(g);
	unlink(path);
}
