/*
 * One cgroup per attempt and node, which holds every process of the
 * attempt and enforces its limits (DESIGN.md section 8): memory, the CPUs
 * reserved for it (cpuset), a number of processes, and, where NVIDIA
 * devices exist, no other job's GPUs. On cgroup v1 (one hierarchy per
 * controller, as on this project's development machine) the attempt has a
 * folder in each controller's hierarchy; on v2, one folder.
 *
 * The folders go under the cgroup the shim itself is in, in a level of the
 * node's own (tenk-NODE), so that several agents on one machine never
 * share one. Where the host is found from is two files (mountinfo and the
 * process's cgroup list), so that tests can describe a host of their own.
 */
#include "shim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const ctrl_names[CG_CTRL_MAX] = {
	[CG_MEMORY] = "memory",	  [CG_CPUSET] = "cpuset",   [CG_PIDS] = "pids",
	[CG_DEVICES] = "devices", [CG_CPUACCT] = "cpuacct",
};

#define CG_KILL_ROUNDS 200	/* passes over cgroup.procs before giving up */
#define CG_KILL_QUICK_ROUNDS 20 /* ... the first ones back to back, then: */
#define CG_KILL_WAIT_US 10000	/* (at most 1.8 s in all) */

/* v1: an attempt's folders, once empty, are kept in the node's level as
 * the spares of its slot (renamed "spare.SLOT"; the agent numbers its
 * running attempts' slots from 0), and the next attempt in that slot takes
 * them (renamed to its own name) with its counters and limits reset: two
 * renames cost a fraction of a cgroup's making and removal in each
 * hierarchy, and a process joins a used cgroup for half of what it pays to
 * join a new one (docs/design-notes.md). */
#define CG_SPARE "spare."
#define CG_SPARE_MAX_BYTES (8 << 20) /* memory still charged to a folder kept (page cache) */

static int write_str(const char *dir, const char *file, const char *text)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	/* cgroupfs has every file already; O_CREAT lets a test's plain folder stand in */
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int r = n < 0 ? -errno : 0;
	close(fd);
	return r;
}

static char *read_str(const char *dir, const char *file)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	char *text = NULL;
	if (tk_read_file(path, 1 << 20, &text, NULL) < 0)
		return NULL;
	tk_strip(text);
	return text;
}

/* The value after "key " in a "key value" file (memory.events, cpu.stat). */
static int64_t keyed(const char *dir, const char *file, const char *key)
{
	_cleanup_free_ char *text = read_str(dir, file);
	if (!text)
		return -1;
	size_t k = strlen(key);
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');
		if (strncmp(line, key, k) == 0 && line[k] == ' ')
			return strtoll(line + k + 1, NULL, 10);
		line = nl ? nl + 1 : NULL;
	}
	return -1;
}

/* ---- finding the hierarchy --------------------------------------------------------- */

/* The mount points of the v1 controllers and of cgroup2, from mountinfo. */
struct mounts {
	char *v1[CG_CTRL_MAX];
	char *v1_root[CG_CTRL_MAX];
	char *v2;
};

static void mounts_release(struct mounts *m)
{
	for (int c = 0; c < CG_CTRL_MAX; c++) {
		free(m->v1[c]);
		free(m->v1_root[c]);
	}
	free(m->v2);
}

/* Is word one of list's, separated by sep (',' in mount options, ' ' in
 * cgroup.controllers)? */
static bool has_word_sep(const char *list, const char *word, char sep)
{
	size_t n = strlen(word);
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, sep);
		size_t len = end ? (size_t)(end - p) : strcspn(p, "\n");
		if (len == n && strncmp(p, word, n) == 0)
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

static bool has_word(const char *list, const char *word)
{
	return has_word_sep(list, word, ',');
}

static int read_mounts(const char *mountinfo, struct mounts *m)
{
	char *text;
	int r = tk_read_file(mountinfo, 4 << 20, &text, NULL);
	if (r < 0)
		return r;
	for (char *line = text; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *f[6] = {0};
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 6; i++, tok = strtok_r(NULL, " ", &save))
			f[i] = tok;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " ", &save);
		char *fstype = tok ? strtok_r(NULL, " ", &save) : NULL;
		char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
		char *super = source ? strtok_r(NULL, " ", &save) : NULL;
		if (f[4] && fstype && strcmp(fstype, "cgroup2") == 0 && !m->v2)
			m->v2 = xstrdup(f[4]);
		if (f[4] && fstype && super && strcmp(fstype, "cgroup") == 0)
			for (int c = 0; c < CG_CTRL_MAX; c++)
				if (!m->v1[c] && has_word(super, ctrl_names[c])) {
					m->v1[c] = xstrdup(f[4]);
					m->v1_root[c] = xstrdup(f[3]);
				}
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return 0;
}

/* Where this process is in the hierarchy of controller `name` ("" for
 * cgroup2's line), from its cgroup list (the text of /proc/self/cgroup);
 * NULL when not listed. */
static char *own_path(const char *list, const char *name)
{
	if (!list)
		return NULL;
	char *text = xstrdup(list);
	char *found = NULL;
	for (char *line = text; line && *line && !found;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2) {
			*c2 = '\0';
			bool match = *name ? has_word(c1 + 1, name) : c1[1] == '\0';
			if (match)
				found = xstrdup(c2 + 1);
		}
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	return found;
}

/* mountpoint + the process's path, less the mount's own root. */
static char *join(const char *mountpoint, const char *mount_root, const char *path)
{
	size_t k = mount_root ? strlen(mount_root) : 0;
	if (k > 1 && strncmp(path, mount_root, k) == 0)
		path += k;
	while (*path == '/')
		path++;
	return *path ? xasprintf("%s/%s", mountpoint, path) : xstrdup(mountpoint);
}

/* ---- creating ---------------------------------------------------------------------- */

/* Makes dir (its parent exists); with a v1 cpuset, copies the parent's CPUs
 * and memory nodes into it first, as v1 wants before anything joins (a
 * level that was there already and has CPUs is left as it is: every
 * attempt passes through the node's). */
static int make_dir(const char *dir, bool v1_cpuset, const char *cpus)
{
	bool there = mkdir(dir, 0755) < 0;
	if (there && errno != EEXIST)
		return -errno;
	if (!v1_cpuset)
		return 0;
	if (there && !cpus) {
		_cleanup_free_ char *have = read_str(dir, "cpuset.cpus");
		if (have && *have)
			return 0;
	}
	_cleanup_free_ char *parent = xstrdup(dir);
	char *slash = strrchr(parent, '/');
	if (slash)
		*slash = '\0';
	_cleanup_free_ char *mems = read_str(parent, "cpuset.mems");
	_cleanup_free_ char *pcpus = read_str(parent, "cpuset.cpus");
	int r = 0;
	if (mems && *mems)
		r = write_str(dir, "cpuset.mems", mems);
	if (r == 0 && (cpus || (pcpus && *pcpus)))
		r = write_str(dir, "cpuset.cpus", cpus ? cpus : pcpus);
	return r;
}

/* Makes the folders from mountpoint mp down to base (each a cgroup level,
 * v1 cpusets given their parent's CPUs), where a nested cgroup needs a
 * path that exists in only one hierarchy so far. */
static int make_parents(const char *mp, const char *base, bool v1_cpuset)
{
	_cleanup_free_ char *path = xstrdup(base);
	for (char *p = path + strlen(mp) + 1; p <= path + strlen(base); p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char keep = *p;
		*p = '\0';
		struct stat st;
		int r = stat(path, &st) == 0 ? 0 : make_dir(path, v1_cpuset, NULL);
		*p = keep;
		if (r < 0)
			return r;
		if (!keep)
			break;
	}
	return 0;
}

static void add_dir(struct cgroup *cg, char *dir)
{
	for (int i = 0; i < cg->ndirs; i++)
		if (strcmp(cg->dirs[i], dir) == 0) {
			free(dir);
			return;
		}
	cg->dirs[cg->ndirs++] = dir;
}

/* cgroup v2 gives a child only the controllers its parent lists in
 * cgroup.subtree_control: asks for ours one at a time, since one the
 * parent has not (cgroup.controllers) fails the whole write. A cgroup that
 * holds processes of its own cannot hand any down (EBUSY): then its
 * children have none, which cg_create finds and reports. */
static void v2_delegate(const char *dir)
{
	static const char *const want[] = {"memory", "pids", "cpuset", "cpu"};
	_cleanup_free_ char *have = read_str(dir, "cgroup.controllers");
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		if (have && !has_word_sep(have, want[i], ' '))
			continue;
		char add[16];
		snprintf(add, sizeof(add), "+%s", want[i]);
		write_str(dir, "cgroup.subtree_control", add);
	}
}

/* On v2, the controllers the attempt's folder has; a plain folder (a
 * test's host) lists none and is taken to have them all. (Device rules are
 * BPF programs, which need no controller: devbpf.c.) */
static unsigned v2_missing(const char *dir)
{
	static const enum cg_ctrl ours[] = {CG_MEMORY, CG_PIDS, CG_CPUSET};
	unsigned missing = 0;
	_cleanup_free_ char *have = read_str(dir, "cgroup.controllers");
	for (size_t i = 0; have && i < ARRAY_SIZE(ours); i++)
		if (!has_word_sep(have, ctrl_names[ours[i]], ' '))
			missing |= 1u << ours[i];
	return missing;
}

static int apply_limits(struct cgroup *cg, const struct cg_limits *lim, struct tk_error *err)
{
	char num[32];
	int r = 0;
	/* what it has not cannot be written to: the node reports those */
	const char *mem = cg->missing & (1u << CG_MEMORY) ? NULL : cg->dir[CG_MEMORY];
	if (mem && lim->mem_mib > 0) {
		snprintf(num, sizeof(num), "%lld", (long long)lim->mem_mib * 1024 * 1024);
		r = write_str(mem, cg->version == 1 ? "memory.limit_in_bytes" : "memory.max", num);
		if (r == 0 && cg->version == 1)
			write_str(mem, "memory.memsw.limit_in_bytes", num); /* no swap beyond it */
		if (r == 0 && cg->version == 2)
			write_str(mem, "memory.swap.max", "0");
		if (r < 0)
			return tk_errorf(err, r, "cgroup %s: memory limit: %s", mem, strerror(-r));
	}
	const char *pids = cg->missing & (1u << CG_PIDS) ? NULL : cg->dir[CG_PIDS];
	if (pids && lim->pids_max > 0) {
		snprintf(num, sizeof(num), "%lld", (long long)lim->pids_max);
		if ((r = write_str(pids, "pids.max", num)) < 0)
			return tk_errorf(err, r, "cgroup %s: pids limit: %s", pids, strerror(-r));
	}
	const char *cpuset = cg->missing & (1u << CG_CPUSET) ? NULL : cg->dir[CG_CPUSET];
	if (cpuset && lim->cpus[0] && cg->version == 2 &&
	    (r = write_str(cpuset, "cpuset.cpus", lim->cpus)) < 0)
		return tk_errorf(err, r, "cgroup %s: cpuset %s: %s", cpuset, lim->cpus,
				 strerror(-r));
	const char *dev = cg->missing & (1u << CG_DEVICES) ? NULL : cg->dir[CG_DEVICES];
	char why[256];
	if (dev && cg->version == 2 && lim->ndeny > 0 &&
	    cg_v2_deny_devices(dev, lim, why, sizeof(why)) < 0) {
		/* as the probe found at the agent's start, which the node reports */
		cg->missing |= 1u << CG_DEVICES;
	}
	for (int i = 0; dev && cg->version == 1 && i < lim->ndeny; i++)
		if ((r = write_str(dev, "devices.deny", lim->deny[i])) < 0)
			return tk_errorf(err, r, "cgroup %s: denying %s: %s", dev, lim->deny[i],
					 strerror(-r));
	return 0;
}

/* Where the cgroups are, as the caller sees them: the hierarchies' mount
 * points and the caller's own cgroup list. */
struct cg_host {
	struct mounts m;
	char *list; /* the text of proc_cgroup; NULL: unread */
};

int cg_host_load(const char *mountinfo, const char *proc_cgroup, struct cg_host **ret,
		 struct tk_error *err)
{
	struct cg_host *h = xcalloc(1, sizeof(*h));
	*ret = NULL;
	int r = read_mounts(mountinfo, &h->m);
	if (r < 0) {
		cg_host_free(h);
		return tk_errorf(err, r, "cannot read %s: %s", mountinfo, strerror(-r));
	}
	if ((h->m.v1[CG_MEMORY] || h->m.v2) &&
	    tk_read_file(proc_cgroup, 1 << 20, &h->list, NULL) < 0)
		h->list = NULL;
	*ret = h;
	return 0;
}

void cg_host_free(struct cg_host *h)
{
	if (!h)
		return;
	mounts_release(&h->m);
	free(h->list);
	free(h);
}

/* A spare taken for another attempt (v1): what the last one left in its
 * counters and limits undone, so that it reads as a new folder. 0 or
 * -errno (then it is not used). */
static int reset_spare(struct cgroup *cg, enum cg_ctrl c, const char *dir, const char *cpus)
{
	switch (c) {
	case CG_MEMORY:
		/* the limits lifted (swap's first: it may not go under memory's),
		 * the peak and failure counts started again; the kernel's count of
		 * OOM kills cannot be, so it is where this attempt starts from */
		write_str(dir, "memory.memsw.limit_in_bytes", "-1");
		write_str(dir, "memory.memsw.max_usage_in_bytes", "0");
		write_str(dir, "memory.memsw.failcnt", "0");
		write_str(dir, "memory.failcnt", "0");
		cg->oom_base = MAX(keyed(dir, "memory.oom_control", "oom_kill"), 0);
		int r = write_str(dir, "memory.limit_in_bytes", "-1");
		return r < 0 ? r : write_str(dir, "memory.max_usage_in_bytes", "0");
	case CG_CPUSET: /* (none to give it: a new folder, which copies its parent's) */
		return *cpus ? write_str(dir, "cpuset.cpus", cpus) : -ENOENT;
	case CG_PIDS:
		return write_str(dir, "pids.max", "max");
	case CG_DEVICES:
		return write_str(dir, "devices.allow", "a"); /* the rules denied go */
	case CG_CPUACCT:
		return write_str(dir, "cpuacct.usage", "0");
	default:
		return 0;
	}
}

/* cg_create_on on the host that mountinfo and proc_cgroup describe. */
static int create_from(struct cgroup *cg, const char *mountinfo, const char *proc_cgroup,
		       const char *node, const char *name, int slot, const struct cg_limits *lim,
		       struct tk_error *err)
{
	memset(cg, 0, sizeof(*cg));
	struct cg_host *h;
	int r = cg_host_load(mountinfo, proc_cgroup, &h, err);
	if (r < 0)
		return r;
	r = cg_create_on(cg, h, node, name, slot, lim, err);
	cg_host_free(h);
	return r;
}

int cg_create_on(struct cgroup *cg, const struct cg_host *h, const char *node, const char *name,
		 int slot, const struct cg_limits *lim, struct tk_error *err)
{
	if (!h)
		return create_from(cg, "/proc/self/mountinfo", "/proc/self/cgroup", node, name,
				   slot, lim, err);
	memset(cg, 0, sizeof(*cg));
	cg->slot = -1;
	const struct mounts *m = &h->m;
	const char *list = h->list;
	int r;
	/* v1 where memory has a hierarchy of its own, else v2 */
	cg->version = m->v1[CG_MEMORY] ? 1 : m->v2 ? 2 : 0;
	/* nested: every controller at the memory controller's path */
	_cleanup_free_ char *common =
		cg->version && lim->nest
			? own_path(list, cg->version == 1 ? ctrl_names[CG_MEMORY] : "")
			: NULL;
	bool delegated = false;
	char spare[32] = "";
	if (cg->version == 1 && slot >= 0) {
		snprintf(spare, sizeof(spare), CG_SPARE "%d", slot);
		cg->slot = slot;
	}
	for (int c = 0; c < CG_CTRL_MAX && cg->version; c++) {
		const char *mp = cg->version == 1 ? m->v1[c] : m->v2;
		if (!mp) {
			cg->missing |= 1u << c;
			continue;
		}
		_cleanup_free_ char *self =
			common ? xstrdup(common)
			       : own_path(list, cg->version == 1 ? ctrl_names[c] : "");
		if (!self) {
			cg->missing |= 1u << c;
			continue;
		}
		const char *mroot = cg->version == 1 ? m->v1_root[c] : NULL;
		_cleanup_free_ char *base = join(mp, mroot, self);
		_cleanup_free_ char *level = xasprintf("%s/tenk-%s", base, node);
		bool v1cpuset = cg->version == 1 && c == CG_CPUSET;
		bool delegate = cg->version == 2 && !delegated;
		if (delegate) /* the controllers, handed down to the node's level */
			v2_delegate(base);
		r = common ? make_parents(mp, base, v1cpuset) : 0;
		if (r == 0)
			r = make_dir(level, v1cpuset, NULL);
		if (r == 0 && delegate) /* ... and to the attempt's */
			v2_delegate(level);
		delegated = true;
		char *dir = xasprintf("%s/%s", level, name);
		/* the slot's spare, where one is (else, or with one of that name
		 * there already, as an agent after its shim finds it: made) */
		_cleanup_free_ char *from = spare[0] ? xasprintf("%s/%s", level, spare) : NULL;
		bool reused = r == 0 && from && rename(from, dir) == 0;
		if (reused) {
			_cleanup_free_ char *pcpus =
				v1cpuset && !lim->cpus[0] ? read_str(level, "cpuset.cpus") : NULL;
			if (reset_spare(cg, (enum cg_ctrl)c, dir,
					lim->cpus[0] ? lim->cpus
					: pcpus	     ? pcpus
						     : "") < 0) {
				rmdir(dir); /* a new one instead */
				reused = false;
			}
		}
		if (r == 0 && !reused)
			r = make_dir(dir, v1cpuset, lim->cpus[0] ? lim->cpus : NULL);
		if (r < 0) {
			tk_errorf(err, r, "cannot create cgroup %s: %s", dir, strerror(-r));
			free(dir);
			cg_destroy(cg);
			return r;
		}
		cg->dir[c] = dir;
		if (!cg->rel)
			cg->rel = xstrdup(dir + strlen(mp));
	}
	for (int c = 0; c < CG_CTRL_MAX; c++)
		if (cg->dir[c])
			add_dir(cg, xstrdup(cg->dir[c]));
	if (cg->version == 2 && cg->ndirs)
		cg->missing |= v2_missing(cg->dirs[0]);
	else if (!cg->version)
		cg->missing = (1u << CG_CTRL_MAX) - 1;
	if (cg->version && (r = apply_limits(cg, lim, err)) < 0) {
		cg_destroy(cg);
		return r;
	}
	return cg->version;
}

int cg_create(struct cgroup *cg, const char *mountinfo, const char *proc_cgroup, const char *node,
	      const char *name, const struct cg_limits *lim, struct tk_error *err)
{
	return create_from(cg, mountinfo, proc_cgroup, node, name, -1, lim, err);
}

int cg_probe(const char *mountinfo, const char *proc_cgroup, const char *node, unsigned *missing,
	     struct tk_error *err)
{
	struct cgroup cg;
	struct cg_limits none = {0};
	char name[32];
	snprintf(name, sizeof(name), "probe-%d", (int)getpid());
	int r = cg_create(&cg, mountinfo, proc_cgroup, node, name, &none, err);
	*missing = r < 0 ? (1u << CG_CTRL_MAX) - 1 : cg.missing;
	char why[256];
	/* v2's device rules: whether a program can be attached here */
	if (r == 2 && cg.ndirs && cg_v2_deny_devices(cg.dirs[0], &none, why, sizeof(why)) < 0)
		*missing |= 1u << CG_DEVICES;
	cg_destroy(&cg);
	return r;
}

/* ---- using ------------------------------------------------------------------------ */

int cg_attach(const struct cgroup *cg, int pid)
{
	char num[16];
	snprintf(num, sizeof(num), "%d", pid);
	for (int i = 0; i < cg->ndirs; i++) {
		int r = write_str(cg->dirs[i], "cgroup.procs", num);
		if (r < 0)
			return r;
	}
	return 0;
}

#define CG_MAX_DEPTH 8 /* levels below an attempt's cgroup looked into (a runtime's) */

/* Has cgroup dir cgroups below it? A folder's link count is 2 and one
 * per folder in it (cgroupfs keeps it so too): a stat, not a listing. */
static bool has_below(const char *dir)
{
	struct stat st;
	return stat(dir, &st) < 0 || st.st_nlink != 2;
}

/* sig to every process of dir and the cgroups below it. */
static int signal_tree(const char *dir, int sig, int depth)
{
	_cleanup_free_ char *procs = read_str(dir, "cgroup.procs");
	int n = 0;
	for (char *p = procs; p && *p;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0 && kill((pid_t)pid, sig) == 0)
			n++;
		p = end;
		while (*p == '\n')
			p++;
	}
	DIR *d = depth < CG_MAX_DEPTH && has_below(dir) ? opendir(dir) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", dir, e->d_name);
		n += signal_tree(sub, sig, depth + 1);
	}
	if (d)
		closedir(d);
	return n;
}

int cg_signal(const struct cgroup *cg, int sig)
{
	if (!cg->ndirs)
		return 0;
	/* every controller's folder holds the same processes: one is enough */
	return signal_tree(cg->dirs[0], sig, 0);
}

/* Removes the cgroups below dir (a runtime's that it left), deepest first. */
static void remove_below(const char *dir, int depth)
{
	DIR *d = depth < CG_MAX_DEPTH && has_below(dir) ? opendir(dir) : NULL;
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", dir, e->d_name);
		remove_below(sub, depth + 1);
		rmdir(sub);
	}
	if (d)
		closedir(d);
}

int cg_kill(const struct cgroup *cg)
{
	if (cg->version == 2 && cg->ndirs)
		write_str(cg->dirs[0], "cgroup.kill", "1");
	/* a process may fork while we kill, and a killed one stays listed
	 * until it has exited: go over them until none is left, the later
	 * rounds a moment apart */
	int left = 0;
	for (int round = 0; round < CG_KILL_ROUNDS; round++) {
		if ((left = cg_signal(cg, SIGKILL)) == 0)
			return 0;
		if (round >= CG_KILL_QUICK_ROUNDS)
			usleep(CG_KILL_WAIT_US);
	}
	return left;
}

bool cg_oom_killed(const struct cgroup *cg)
{
	const char *mem = cg->dir[CG_MEMORY];
	if (!mem)
		return false;
	int64_t n = cg->version == 1 ? keyed(mem, "memory.oom_control", "oom_kill")
				     : keyed(mem, "memory.events", "oom_kill");
	return n > cg->oom_base;
}

void cg_usage(const struct cgroup *cg, int64_t *cpu_ms, int64_t *mem_peak_mib, int64_t *mem_mib)
{
	*cpu_ms = *mem_peak_mib = *mem_mib = 0;
	if (cg->version == 1) {
		if (cg->dir[CG_CPUACCT]) {
			_cleanup_free_ char *ns = read_str(cg->dir[CG_CPUACCT], "cpuacct.usage");
			if (ns)
				*cpu_ms = strtoll(ns, NULL, 10) / 1000000;
		}
		if (cg->dir[CG_MEMORY]) {
			_cleanup_free_ char *b =
				read_str(cg->dir[CG_MEMORY], "memory.max_usage_in_bytes");
			if (b)
				*mem_peak_mib = (strtoll(b, NULL, 10) + (1 << 20) - 1) >> 20;
			_cleanup_free_ char *now =
				read_str(cg->dir[CG_MEMORY], "memory.usage_in_bytes");
			if (now)
				*mem_mib = (strtoll(now, NULL, 10) + (1 << 20) - 1) >> 20;
		}
	} else if (cg->version == 2 && cg->ndirs) {
		int64_t us = keyed(cg->dirs[0], "cpu.stat", "usage_usec");
		*cpu_ms = us > 0 ? us / 1000 : 0;
		_cleanup_free_ char *b = read_str(cg->dirs[0], "memory.peak");
		if (b)
			*mem_peak_mib = (strtoll(b, NULL, 10) + (1 << 20) - 1) >> 20;
		_cleanup_free_ char *now = read_str(cg->dirs[0], "memory.current");
		if (now)
			*mem_mib = (strtoll(now, NULL, 10) + (1 << 20) - 1) >> 20;
	}
}

/* Can the attempt's folders be kept as its slot's spare (v1)? Only
 * empty, and with little memory still charged to them. */
static bool recyclable(const struct cgroup *cg)
{
	if (cg->version != 1 || cg->slot < 0 || !cg->dir[CG_MEMORY])
		return false;
	_cleanup_free_ char *now = read_str(cg->dir[CG_MEMORY], "memory.usage_in_bytes");
	if (!now || strtoll(now, NULL, 10) > CG_SPARE_MAX_BYTES)
		return false;
	for (int i = 0; i < cg->ndirs; i++) {
		_cleanup_free_ char *procs = read_str(cg->dirs[i], "cgroup.procs");
		if (!procs || *procs)
			return false;
	}
	return true;
}

void cg_destroy(struct cgroup *cg)
{
	for (int i = 0; i < cg->ndirs; i++)
		remove_below(cg->dirs[i], 0);
	bool keep = recyclable(cg);
	char spare[32];
	snprintf(spare, sizeof(spare), CG_SPARE "%d", cg->slot);
	for (int i = 0; i < cg->ndirs; i++) {
		_cleanup_free_ char *to = NULL;
		char *slash = strrchr(cg->dirs[i], '/');
		if (keep && slash)
			to = xasprintf("%.*s/%s", (int)(slash - cg->dirs[i]), cg->dirs[i], spare);
		/* (a spare of that name there already: this one goes) */
		if (!to || rename(cg->dirs[i], to) < 0) {
			/* the last processes may take a moment to leave */
			for (int k = 0; k < 50 && rmdir(cg->dirs[i]) < 0 && errno == EBUSY; k++)
				usleep(2000);
		}
		free(cg->dirs[i]);
	}
	for (int c = 0; c < CG_CTRL_MAX; c++)
		free(cg->dir[c]);
	free(cg->rel);
	memset(cg, 0, sizeof(*cg));
}
