/*
 * NCCL's transports, from its own log, for a job submitted with
 * --nccl-check (issue 41): its tasks get NCCL_DEBUG=INFO and
 * NCCL_DEBUG_FILE=RUN/nccl/JOB.ATTEMPT/nccl.%h.%p (launch.c; the job's own
 * settings win), a folder of the attempt's user in one of the agent's
 * that the user can pass through but not change. Every second the agent
 * reads what is new in its files (regular files of that user only, opened
 * without following links) and keeps what NCCL says of its connections
 * (model nccl_log.c); each heartbeat carries it, and the server keeps it
 * with the attempt's node and says where ranks went between nodes over
 * sockets on an RDMA node.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NCCL_READ_MAX (256 * 1024) /* read per attempt and second */

static char *nccl_dir(const struct taskgroup *g)
{
	return xasprintf("%s/nccl/%lld.%d", g->a->cfg.run_dir, (long long)g->job, g->attempt);
}

char *agent__nccl_setup(struct taskgroup *g, const struct work_spec *spec, bool as_user,
			uint32_t uid, uint32_t gid)
{
	if (!spec->nccl_check)
		return NULL;
	_cleanup_free_ char *base = xasprintf("%s/nccl", g->a->cfg.run_dir);
	char *dir = nccl_dir(g);
	int r = tk_mkdir_p(base, 0711);
	if (r == 0)
		chmod(base, 0711);
	if (r == 0 && mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = -errno;
	if (r == 0 && as_user && chown(dir, (uid_t)uid, (gid_t)gid) < 0)
		r = -errno;
	if (r < 0) {
		log_warn("job %lld: cannot make the folder of NCCL's log %s (--nccl-check): %s",
			 (long long)g->job, dir, strerror(-r));
		free(dir);
		return NULL;
	}
	g->nccl.probed = g->nccl.on = true;
	g->nccl.uid = as_user ? uid : 0;
	return dir;
}

/* One file's new lines into the group's log; *budget: bytes left to read. */
static void read_file(struct taskgroup *g, int dfd, const char *name, size_t *budget)
{
	struct group_nccl *c = &g->nccl;
	int k = 0;
	while (k < c->nfiles && strcmp(c->files[k].name, name) != 0)
		k++;
	if (k == c->nfiles) {
		if (c->nfiles == GROUP_NCCL_FILES || strlen(name) >= sizeof(c->files[0].name))
			return;
		if (!c->files)
			c->files = xcalloc(GROUP_NCCL_FILES, sizeof(*c->files));
		snprintf(c->files[k].name, sizeof(c->files[k].name), "%s", name);
		c->nfiles++;
	}
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	struct stat st;
	/* the user's own files, and nothing else it could point us to */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != c->uid ||
	    st.st_size <= c->files[k].off) {
		close(fd);
		return;
	}
	char buf[16384];
	while (*budget > 0) {
		ssize_t n = pread(fd, buf, MIN(sizeof(buf), *budget), c->files[k].off);
		if (n <= 0)
			break;
		*budget -= (size_t)n;
		c->files[k].off += n;
		for (ssize_t i = 0; i < n; i++) {
			size_t *np = &c->files[k].npart;
			if (buf[i] != '\n') {
				if (*np < sizeof(c->files[k].part) - 1)
					c->files[k].part[(*np)++] = buf[i];
				continue;
			}
			c->files[k].part[*np] = '\0';
			model_nccl_log_line(&c->log, c->files[k].part);
			*np = 0;
		}
	}
	close(fd);
}

void agent__nccl_poll_group(struct taskgroup *g)
{
	_cleanup_free_ char *dir = nccl_dir(g);
	if (!g->nccl.probed) { /* adopted from an agent before: the folder says */
		struct stat st;
		g->nccl.probed = true;
		g->nccl.on = lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
		g->nccl.uid = g->nccl.on ? (uint32_t)st.st_uid : 0;
	}
	if (!g->nccl.on)
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	size_t budget = NCCL_READ_MAX;
	for (struct dirent *e; (e = readdir(d)) && budget > 0;)
		if (e->d_name[0] != '.')
			read_file(g, dirfd(d), e->d_name, &budget);
	closedir(d);
}

int agent__nccl_for_heartbeat(struct agent *a, struct wire_nccl **ret)
{
	*ret = NULL;
	int n = 0;
	size_t alloc = 0, pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v) && n < WIRE_MAX_CHECKPOINTS) {
		const struct taskgroup *g = v;
		const struct nccl_log *l = &g->nccl.log;
		bool said = false;
		for (int t = 0; t < NCCL_TR_MAX; t++)
			said |= l->connections[t] > 0;
		if (!g->nccl.on || !said)
			continue;
		xgrow(ret, &alloc, (size_t)n + 1, sizeof(**ret));
		struct wire_nccl *w = &(*ret)[n++];
		*w = (struct wire_nccl){.job = g->job, .attempt = g->attempt};
		memcpy(w->connections, l->connections, sizeof(w->connections));
		snprintf(w->network, sizeof(w->network), "%s", l->network);
		snprintf(w->line, sizeof(w->line), "%s", l->socket_line);
	}
	return n;
}

void agent__nccl_release(struct taskgroup *g, bool remove)
{
	free(g->nccl.files);
	g->nccl.files = NULL;
	g->nccl.nfiles = 0;
	if (!remove || !g->a)
		return;
	_cleanup_free_ char *dir = nccl_dir(g);
	tk_rmdir_files(dir);
}
