/*
 * A job's own disk use is the job's, not the node's. Each attempt here
 * writes in its checkpoint folder (WORK/checkpoints/JOB, $TENK_CHECKPOINT_DIR);
 * the agent measures each such folder every few seconds. One over the
 * limit (--job-disk-limit, by default half the work folder's file system)
 * stops its attempt, which fails saying so, and its files go when the
 * attempt is over (removed as the job's owner). The space the folders hold
 * is left out of the node's own free-space check: only space nothing tenk
 * accounts for takes up is a fault that drains the node, so no user can
 * drain a node, and requeue everyone's jobs on it, by filling the disk.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DISK_EVERY_MS 2000	/* how often the folders are measured */
#define DISK_MAX_ENTRIES 200000 /* entries one measure visits at most */

struct walk {
	dev_t dev;
	int64_t bytes;
	int entries;
	bool cut; /* stopped at DISK_MAX_ENTRIES */
};

/* Adds what the folder fd holds (it closes fd): nothing followed, no other
 * file system entered, descriptors only (a path changed meanwhile is not
 * walked into). */
static void walk_dir(struct walk *w, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (++w->entries > DISK_MAX_ENTRIES) {
			w->cut = true;
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_dev != w->dev)
			continue;
		w->bytes += (int64_t)st.st_blocks * 512;
		if (S_ISDIR(st.st_mode) && depth < 64) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				walk_dir(w, sub, depth + 1);
		}
	}
	closedir(d);
}

/* The bytes folder dir holds; -1 when it cannot be read. */
static int64_t measure(const char *dir, bool *cut)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	struct walk w = {.dev = st.st_dev, .bytes = (int64_t)st.st_blocks * 512};
	walk_dir(&w, fd, 0);
	*cut = w.cut;
	return w.bytes;
}

int64_t agent__disk_limit_mib(const struct agent *a)
{
	if (a->cfg.job_disk_limit_mib > 0)
		return a->cfg.job_disk_limit_mib;
	if (a->cfg.job_disk_limit_pct <= 0)
		return 0;
	struct statvfs vfs;
	if (statvfs(a->cfg.work_dir, &vfs) < 0)
		return 0;
	int64_t size_mib = (int64_t)((unsigned long long)vfs.f_blocks * vfs.f_frsize >> 20);
	return MAX(1, size_mib * a->cfg.job_disk_limit_pct / 100);
}

static void fmt_size(int64_t mib, char *buf, size_t n)
{
	if (mib >= 10240 && mib % 1024 == 0)
		snprintf(buf, n, "%lld GiB", (long long)(mib / 1024));
	else
		snprintf(buf, n, "%lld MiB", (long long)mib);
}

void agent__disk_tick(struct agent *a, bool now_too)
{
	int64_t now = tk_mono_ms();
	if (now < a->disk_next_ms && !now_too)
		return;
	a->disk_next_ms = now + DISK_EVERY_MS;
	int64_t limit_mib = agent__disk_limit_mib(a);
	int64_t total = 0;
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		/* attempts of one job share its folder: measured once, for the newest */
		bool newer = false;
		size_t p2 = 0;
		void *v2;
		while (!newer && tk_map_next(&a->groups, &p2, NULL, &v2)) {
			const struct taskgroup *o = v2;
			newer = o != g && o->job == g->job && o->attempt > g->attempt;
		}
		g->disk_bytes = 0;
		if (newer)
			continue;
		bool cut = false;
		_cleanup_free_ char *dir =
			xasprintf("%s/checkpoints/%lld", a->cfg.work_dir, (long long)g->job);
		int64_t bytes = measure(dir, &cut);
		if (bytes < 0)
			continue;
		g->disk_bytes = bytes;
		total += bytes;
		if (cut && !g->disk_cut_said) {
			g->disk_cut_said = true;
			log_warn("job %lld.%d: its checkpoint folder has more than %d entries; "
				 "measured up to there",
				 (long long)g->job, g->attempt, DISK_MAX_ENTRIES);
		}
		if (!limit_mib || bytes <= limit_mib << 20 || g->disk_over ||
		    (g->state != GROUP_STARTING && g->state != GROUP_RUNNING))
			continue;
		g->disk_over = true;
		char lim[24];
		fmt_size(limit_mib, lim, sizeof(lim));
		char why[64];
		snprintf(why, sizeof(why), "checkpoint folder over its %s limit", lim);
		log_warn("job %lld.%d: %s (%lld MiB): stopping it", (long long)g->job, g->attempt,
			 why, (long long)(bytes >> 20));
		group_stop(g, EXIT_DISK_LIMIT, why);
	}
	a->disk_jobs_bytes = total;
}

static void removed(struct cmd *c, int64_t status, const char *out, const char *err)
{
	char *dir = c->data;
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", dir, strerror(errno));
	free(dir);
}

void agent__disk_remove(struct taskgroup *g)
{
	struct agent *a = g->a;
	if (!g->disk_over || !a)
		return;
	char *dir = xasprintf("%s/checkpoints/%lld", a->cfg.work_dir, (long long)g->job);
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(dir);
		return;
	}
	/* as the folder's owner (the job's user): a link the job left in it
	 * leads nowhere root's */
	char uid[24], gid[24];
	snprintf(uid, sizeof(uid), "--reuid=%u", (unsigned)st.st_uid);
	snprintf(gid, sizeof(gid), "--regid=%u", (unsigned)st.st_gid);
	char *argv[] = {"/usr/bin/setpriv",  uid, gid, "--clear-groups", "--", "rm", "-rf",
			"--one-file-system", dir, NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	log_info("job %lld.%d: removing its checkpoint folder %s, over its limit",
		 (long long)g->job, g->attempt, dir);
	if (agent__cmd_run(a, argv, env, 600000, removed, dir) < 0) {
		log_warn("cannot remove %s: setpriv did not start", dir);
		free(dir);
	}
}
