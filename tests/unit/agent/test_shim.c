/* Unit tests of the agent's shim side (src/agent): cgroups on a host the
 * test describes (v1 and v2 hierarchies in a temporary folder), the
 * messages between agent and shim, and a task's start as another user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/shim.h"

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/tenk-test-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return xstrdup(d);
}

static void put(const char *path, const char *text)
{
	assert_int_equal(tk_write_file(path, text, strlen(text), 0644), 0);
}

static char *get(const char *dir, const char *file)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
	char *text = NULL;
	if (tk_read_file(path, 1 << 20, &text, NULL) < 0)
		return NULL;
	tk_strip(text);
	return text;
}

static void rm_rf(const char *dir)
{
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* A v1 host in root: a hierarchy per controller; the process deep in
 * memory's, at the root of the others (the node's CPUs 0-7). */
static void v1_host(const char *root, char **ret_mi, char **ret_pc)
{
	const char *ctrls[] = {"memory", "cpuset", "pids", "devices", "cpuacct"};
	for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
		_cleanup_free_ char *d = xasprintf("%s/%s", root, ctrls[i]);
		assert_int_equal(mkdir(d, 0755), 0);
	}
	_cleanup_free_ char *deep = xasprintf("%s/memory/box/one", root);
	assert_int_equal(tk_mkdir_p(deep, 0755), 0);
	_cleanup_free_ char *cpus = xasprintf("%s/cpuset/cpuset.cpus", root);
	_cleanup_free_ char *mems = xasprintf("%s/cpuset/cpuset.mems", root);
	put(cpus, "0-7\n");
	put(mems, "0\n");
	char *mi = xasprintf("%s/mountinfo", root);
	_cleanup_free_ char *mount =
		xasprintf("22 1 0:20 / /sys rw - sysfs sysfs rw\n"
			  "35 31 0:32 / %s/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
			  "34 31 0:31 / %s/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
			  "39 31 0:36 / %s/pids rw,relatime - cgroup cgroup rw,pids\n"
			  "36 31 0:33 / %s/devices rw,relatime - cgroup cgroup rw,devices\n"
			  "33 31 0:30 / %s/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
			  "41 31 0:38 / %s/unified rw,relatime - cgroup2 cgroup2 rw\n",
			  root, root, root, root, root, root);
	put(mi, mount);
	char *pc = xasprintf("%s/cgroup", root);
	put(pc, "8:pids:/\n5:devices:/\n4:memory:/box/one\n3:cpuset:/\n2:cpuacct:/\n0::/\n");
	*ret_mi = mi;
	*ret_pc = pc;
}

/* v1: the attempt gets a folder in each hierarchy, with its limits. */
static void test_cgroup_v1(void **state)
{
	char *root = tmpdir();
	_cleanup_free_ char *mi = NULL, *pc = NULL;
	v1_host(root, &mi, &pc);
	struct cg_limits lim = {.mem_mib = 100, .cpus = "2,3", .pids_max = 4096, .ndeny = 1};
	snprintf(lim.deny[0], sizeof(lim.deny[0]), "c 195:1 rwm");
	struct cgroup cg;
	struct tk_error err;
	assert_int_equal(cg_create(&cg, mi, pc, "gpu07", "12.1", &lim, &err), 1);
	_cleanup_free_ char *mem = xasprintf("%s/memory/box/one/tenk-gpu07/12.1", root);
	_cleanup_free_ char *cs = xasprintf("%s/cpuset/tenk-gpu07/12.1", root);
	assert_string_equal(cg.dir[CG_MEMORY], mem);
	assert_string_equal(cg.dir[CG_CPUSET], cs);
	assert_int_equal(cg.ndirs, 5);
	_cleanup_free_ char *v = get(mem, "memory.limit_in_bytes");
	assert_string_equal(v, "104857600");
	_cleanup_free_ char *c = get(cs, "cpuset.cpus");
	assert_string_equal(c, "2,3");
	_cleanup_free_ char *m = get(cs, "cpuset.mems");
	assert_string_equal(m, "0"); /* copied down, as v1 wants */
	_cleanup_free_ char *lvl = xasprintf("%s/cpuset/tenk-gpu07", root);
	_cleanup_free_ char *lc = get(lvl, "cpuset.cpus");
	assert_string_equal(lc, "0-7");
	_cleanup_free_ char *p = get(cg.dir[CG_PIDS], "pids.max");
	assert_string_equal(p, "4096");
	_cleanup_free_ char *dn = get(cg.dir[CG_DEVICES], "devices.deny");
	assert_string_equal(dn, "c 195:1 rwm");
	assert_int_equal(cg_attach(&cg, 4242), 0);
	_cleanup_free_ char *procs = get(cg.dir[CG_CPUACCT], "cgroup.procs");
	assert_string_equal(procs, "4242");
	/* usage and out-of-memory, as the kernel shows them */
	_cleanup_free_ char *f1 = xasprintf("%s/cpuacct.usage", cg.dir[CG_CPUACCT]);
	_cleanup_free_ char *f2 = xasprintf("%s/memory.max_usage_in_bytes", mem);
	_cleanup_free_ char *f3 = xasprintf("%s/memory.oom_control", mem);
	put(f1, "2500000000\n");
	put(f2, "52428800\n");
	put(f3, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
	_cleanup_free_ char *f4 = xasprintf("%s/memory.usage_in_bytes", mem);
	put(f4, "20971520\n");
	int64_t cpu, peak, now;
	cg_usage(&cg, &cpu, &peak, &now);
	assert_int_equal(cpu, 2500);
	assert_int_equal(peak, 50);
	assert_int_equal(now, 20);
	assert_false(cg_oom_killed(&cg));
	put(f3, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	assert_true(cg_oom_killed(&cg));
	cg_destroy(&cg);
	rm_rf(root);
	free(root);
}

/* v1: an attempt's folders, empty at its end, are kept as spares, and the
 * next attempt takes them with what the last one left undone: its limits,
 * device rules, counters, the OOM kills counted so far. Folders that still
 * hold a process are not kept. */
static void test_cgroup_v1_spares(void **state)
{
	char *root = tmpdir();
	_cleanup_free_ char *mi = NULL, *pc = NULL;
	v1_host(root, &mi, &pc);
	const char *ctrls[] = {"memory/box/one", "cpuset", "pids", "devices", "cpuacct"};
	struct cg_limits lim = {.mem_mib = 100, .cpus = "2,3", .pids_max = 4096, .ndeny = 1};
	snprintf(lim.deny[0], sizeof(lim.deny[0]), "c 195:1 rwm");
	struct cgroup cg;
	struct tk_error err;
	struct cg_host *h;
	assert_int_equal(cg_host_load(mi, pc, &h, &err), 0);
	assert_int_equal(cg_create_on(&cg, h, "n1", "5.1", 3, &lim, &err), 1);
	/* as the kernel shows an emptied cgroup: no process, a little memory,
	 * one OOM kill */
	for (int i = 0; i < cg.ndirs; i++) {
		_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", cg.dirs[i]);
		put(procs, "");
		/* and a runtime's cgroup left below it (found by its link count) */
		_cleanup_free_ char *sub = xasprintf("%s/libpod-1", cg.dirs[i]);
		assert_int_equal(mkdir(sub, 0755), 0);
	}
	_cleanup_free_ char *usage = xasprintf("%s/memory.usage_in_bytes", cg.dir[CG_MEMORY]);
	_cleanup_free_ char *oom = xasprintf("%s/memory.oom_control", cg.dir[CG_MEMORY]);
	put(usage, "524288\n");
	put(oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	cg_destroy(&cg);
	const char *spare = "spare.3";
	for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
		_cleanup_free_ char *was = xasprintf("%s/%s/tenk-n1/5.1", root, ctrls[i]);
		_cleanup_free_ char *kept = xasprintf("%s/%s/tenk-n1/%s", root, ctrls[i], spare);
		_cleanup_free_ char *sub = xasprintf("%s/libpod-1", kept);
		assert_int_equal(access(was, F_OK), -1);
		assert_int_equal(access(kept, F_OK), 0);
		assert_int_equal(access(sub, F_OK), -1);
	}

	/* the next attempt in slot 3, with no limits of its own: the spare,
	 * reset */
	struct cg_limits none = {0};
	assert_int_equal(cg_create_on(&cg, h, "n1", "6.1", 3, &none, &err), 1);
	for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
		_cleanup_free_ char *kept = xasprintf("%s/%s/tenk-n1/%s", root, ctrls[i], spare);
		assert_int_equal(access(kept, F_OK), -1);
	}
	_cleanup_free_ char *mem = get(cg.dir[CG_MEMORY], "memory.limit_in_bytes");
	assert_string_equal(mem, "-1");
	_cleanup_free_ char *peak = get(cg.dir[CG_MEMORY], "memory.max_usage_in_bytes");
	assert_string_equal(peak, "0");
	_cleanup_free_ char *cpus = get(cg.dir[CG_CPUSET], "cpuset.cpus");
	assert_string_equal(cpus, "0-7"); /* the node's */
	_cleanup_free_ char *pids = get(cg.dir[CG_PIDS], "pids.max");
	assert_string_equal(pids, "max");
	_cleanup_free_ char *dev = get(cg.dir[CG_DEVICES], "devices.allow");
	assert_string_equal(dev, "a");
	_cleanup_free_ char *cpu = get(cg.dir[CG_CPUACCT], "cpuacct.usage");
	assert_string_equal(cpu, "0");
	/* the last attempt's OOM kill is not this one's */
	assert_false(cg_oom_killed(&cg));
	_cleanup_free_ char *oom6 = xasprintf("%s/memory.oom_control", cg.dir[CG_MEMORY]);
	put(oom6, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	assert_true(cg_oom_killed(&cg));

	/* a process still in it: not kept (here a plain folder with files,
	 * which rmdir leaves) */
	_cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", cg.dir[CG_PIDS]);
	put(procs, "4242\n");
	_cleanup_free_ char *usage6 = xasprintf("%s/memory.usage_in_bytes", cg.dir[CG_MEMORY]);
	put(usage6, "0\n");
	cg_destroy(&cg);
	for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
		_cleanup_free_ char *was = xasprintf("%s/%s/tenk-n1/6.1", root, ctrls[i]);
		_cleanup_free_ char *kept = xasprintf("%s/%s/tenk-n1/%s", root, ctrls[i], spare);
		assert_int_equal(access(was, F_OK), 0);
		assert_int_equal(access(kept, F_OK), -1);
	}

	/* an attempt's folder that is there already (an agent after its dead
	 * shim's processes) is taken as it is, not replaced by a spare */
	_cleanup_free_ char *sp = xasprintf("%s/memory/box/one/tenk-n1/spare.1", root);
	assert_int_equal(mkdir(sp, 0755), 0);
	assert_int_equal(cg_create_on(&cg, h, "n1", "6.1", 1, &lim, &err), 1);
	assert_int_equal(access(sp, F_OK), 0);
	_cleanup_free_ char *left = get(cg.dir[CG_PIDS], "cgroup.procs");
	assert_string_equal(left, "4242");
	cg_destroy(&cg);
	/* without a slot (an agent's own look at an attempt's cgroup), none kept */
	assert_int_equal(cg_create_on(&cg, h, "n1", "7.1", -1, &none, &err), 1);
	for (int i = 0; i < cg.ndirs; i++) {
		_cleanup_free_ char *procs7 = xasprintf("%s/cgroup.procs", cg.dirs[i]);
		put(procs7, "");
	}
	_cleanup_free_ char *usage7 = xasprintf("%s/memory.usage_in_bytes", cg.dir[CG_MEMORY]);
	put(usage7, "0\n");
	cg_destroy(&cg);
	_cleanup_free_ char *none_kept = xasprintf("%s/pids/tenk-n1/spare.-1", root);
	assert_int_equal(access(none_kept, F_OK), -1);
	cg_host_free(h);
	rm_rf(root);
	free(root);
}

/* v2: one hierarchy; controllers handed down to the node's level. */
static void test_cgroup_v2(void **state)
{
	char *root = tmpdir();
	_cleanup_free_ char *base = xasprintf("%s/cg/agent.slice", root);
	assert_int_equal(tk_mkdir_p(base, 0755), 0);
	_cleanup_free_ char *mi = xasprintf("%s/mountinfo", root);
	_cleanup_free_ char *mount =
		xasprintf("30 23 0:26 / %s/cg rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", root);
	put(mi, mount);
	_cleanup_free_ char *pc = xasprintf("%s/cgroup", root);
	put(pc, "0::/agent.slice\n");
	struct cg_limits lim = {.mem_mib = 2048, .pids_max = 100};
	struct cgroup cg;
	struct tk_error err;
	assert_int_equal(cg_create(&cg, mi, pc, "n1", "3.2", &lim, &err), 2);
	_cleanup_free_ char *dir = xasprintf("%s/tenk-n1/3.2", base);
	assert_string_equal(cg.dir[CG_MEMORY], dir);
	assert_int_equal(cg.ndirs, 1); /* every controller in one folder */
	_cleanup_free_ char *m = get(dir, "memory.max");
	assert_string_equal(m, "2147483648");
	_cleanup_free_ char *sw = get(dir, "memory.swap.max");
	assert_string_equal(sw, "0");
	_cleanup_free_ char *sub = get(base, "cgroup.subtree_control");
	assert_non_null(sub); /* asked, one controller at a time */
	assert_int_equal(cg.missing, 0);
	_cleanup_free_ char *ev = xasprintf("%s/memory.events", dir);
	put(ev, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n");
	assert_true(cg_oom_killed(&cg));
	_cleanup_free_ char *st = xasprintf("%s/cpu.stat", dir);
	put(st, "usage_usec 1234567\nuser_usec 1000000\n");
	_cleanup_free_ char *cur = xasprintf("%s/memory.current", dir);
	put(cur, "10485760\n");
	int64_t cpu, peak, now;
	cg_usage(&cg, &cpu, &peak, &now);
	assert_int_equal(cpu, 1234);
	assert_int_equal(now, 10);
	cg_destroy(&cg);
	/* a host without cgroups: none, and no error */
	put(mi, "22 1 0:20 / /sys rw - sysfs sysfs rw\n");
	assert_int_equal(cg_create(&cg, mi, pc, "n1", "3.3", &lim, &err), 0);
	assert_int_equal(cg.ndirs, 0);
	cg_destroy(&cg);
	rm_rf(root);
	free(root);
}

/* v2 where the agent's cgroup was given memory alone (its parent delegated
 * no more, as in a container's cgroup): the attempt gets the memory limit,
 * the others are reported missing, and nothing fails. The host is a plain
 * folder that lists the controllers as the kernel would. */
static void test_cgroup_v2_not_delegated(void **state)
{
	char *root = tmpdir();
	_cleanup_free_ char *base = xasprintf("%s/cg/api/7f3a", root);
	_cleanup_free_ char *dir = xasprintf("%s/tenk-n1/4.1", base);
	assert_int_equal(tk_mkdir_p(dir, 0755), 0);
	_cleanup_free_ char *f1 = xasprintf("%s/cgroup.controllers", base);
	_cleanup_free_ char *f2 = xasprintf("%s/tenk-n1/cgroup.controllers", base);
	_cleanup_free_ char *f3 = xasprintf("%s/cgroup.controllers", dir);
	put(f1, "memory\n");
	put(f2, "memory\n");
	put(f3, "memory\n");
	_cleanup_free_ char *mi = xasprintf("%s/mountinfo", root);
	_cleanup_free_ char *mount =
		xasprintf("30 23 0:26 / %s/cg rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", root);
	put(mi, mount);
	_cleanup_free_ char *pc = xasprintf("%s/cgroup", root);
	put(pc, "0::/api/7f3a\n");
	struct cg_limits lim = {.mem_mib = 64, .cpus = "1", .pids_max = 100};
	struct cgroup cg;
	struct tk_error err = {0};
	assert_int_equal(cg_create(&cg, mi, pc, "n1", "4.1", &lim, &err), 2);
	assert_int_equal(cg.missing, (1u << CG_PIDS) | (1u << CG_CPUSET));
	_cleanup_free_ char *m = get(dir, "memory.max");
	assert_string_equal(m, "67108864");
	_cleanup_free_ char *p = get(dir, "pids.max");
	assert_null(p);
	_cleanup_free_ char *c = get(dir, "cpuset.cpus");
	assert_null(c);
	/* only what the level has was asked for */
	_cleanup_free_ char *sub = get(base, "cgroup.subtree_control");
	assert_string_equal(sub, "+memory");
	cg_destroy(&cg);
	/* the probe the agent makes at its start says the same, and that no
	 * device program can be attached to a plain folder */
	_cleanup_free_ char *probe = xasprintf("%s/tenk-n1/probe-%d", base, (int)getpid());
	assert_int_equal(tk_mkdir_p(probe, 0755), 0);
	_cleanup_free_ char *f4 = xasprintf("%s/cgroup.controllers", probe);
	put(f4, "memory\n");
	unsigned missing = 0;
	assert_int_equal(cg_probe(mi, pc, "n1", &missing, &err), 2);
	assert_int_equal(missing, (1u << CG_PIDS) | (1u << CG_CPUSET) | (1u << CG_DEVICES));
	rm_rf(root);
	free(root);
}

/* The kernel's own cgroup2, where this machine has one: the test's host is
 * this process's cgroup2 line alone (as on a v2-only machine), whatever
 * controllers were delegated to it (on a machine whose controllers are all
 * in v1 hierarchies, none). The attempt's cgroup is made, holds the limits
 * of the controllers it has, reports the others, and takes and kills a
 * process. */
static void test_cgroup_v2_kernel(void **state)
{
	char *text = NULL, *line2 = NULL, *own = NULL;
	assert_int_equal(tk_read_file("/proc/self/mountinfo", 4 << 20, &text, NULL), 0);
	for (char *sv = NULL, *l = strtok_r(text, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv))
		if (!line2 && strstr(l, " - cgroup2 "))
			line2 = xstrdup(l);
	free(text);
	assert_int_equal(tk_read_file("/proc/self/cgroup", 1 << 20, &text, NULL), 0);
	for (char *sv = NULL, *l = strtok_r(text, "\n", &sv); l; l = strtok_r(NULL, "\n", &sv))
		if (strncmp(l, "0::", 3) == 0)
			own = xstrdup(l);
	free(text);
	if (!line2 || !own || geteuid() != 0) {
		free(line2);
		free(own);
		skip(); /* no cgroup2 here, or not root */
	}
	char *root = tmpdir();
	_cleanup_free_ char *mi = xasprintf("%s/mountinfo", root);
	_cleanup_free_ char *pc = xasprintf("%s/cgroup", root);
	_cleanup_free_ char *l2 = xasprintf("%s\n", line2);
	_cleanup_free_ char *o2 = xasprintf("%s\n", own);
	put(mi, l2);
	put(pc, o2);
	char node[32];
	snprintf(node, sizeof(node), "utest%d", (int)getpid());
	/* /dev/null refused, as the node's other GPUs are to a job */
	struct cg_limits lim = {.mem_mib = 64, .cpus = "0", .pids_max = 100, .ndeny = 1};
	snprintf(lim.deny[0], sizeof(lim.deny[0]), "c 1:3 rwm");
	struct cgroup cg;
	struct tk_error err = {0};
	int v = cg_create(&cg, mi, pc, node, "1.1", &lim, &err);
	if (v < 0)
		print_message("cg_create: %s\n", err.text);
	assert_int_equal(v, 2);
	const char *dir = cg.dirs[0];
	_cleanup_free_ char *have = get(dir, "cgroup.controllers");
	assert_non_null(have); /* the kernel's, not a plain folder */
	const struct {
		enum cg_ctrl c;
		const char *name, *file, *want;
	} ctl[] = {{CG_MEMORY, "memory", "memory.max", "67108864"},
		   {CG_PIDS, "pids", "pids.max", "100"},
		   {CG_CPUSET, "cpuset", "cpuset.cpus", "0"}};
	for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
		bool has = false;
		for (char *w = have; w && *w; w += strcspn(w, " "), w += *w == ' ')
			if (strncmp(w, ctl[i].name, strlen(ctl[i].name)) == 0 &&
			    (w[strlen(ctl[i].name)] == ' ' || w[strlen(ctl[i].name)] == '\0'))
				has = true;
		assert_int_equal(!(cg.missing & (1u << ctl[i].c)), has);
		_cleanup_free_ char *val = get(dir, ctl[i].file);
		if (has)
			assert_string_equal(val, ctl[i].want);
		else
			assert_null(val);
	}
	/* a device program refuses /dev/null to the cgroup's processes and
	 * nothing else (where BPF is refused here, the cgroup says so) */
	unsigned probed = 0;
	assert_int_equal(cg_probe(mi, pc, node, &probed, &err), 2);
	assert_int_equal(!!(probed & (1u << CG_DEVICES)), !!(cg.missing & (1u << CG_DEVICES)));
	if (!(cg.missing & (1u << CG_DEVICES))) {
		int go[2];
		assert_int_equal(pipe(go), 0);
		pid_t tries = fork();
		assert_true(tries >= 0);
		if (tries == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(9);
			int null = open("/dev/null", O_WRONLY);
			int err_null = errno;
			int zero = open("/dev/zero", O_RDONLY);
			_exit(null < 0 && err_null == EPERM && zero >= 0 ? 0 : 1);
		}
		close(go[0]);
		assert_int_equal(cg_attach(&cg, tries), 0);
		assert_int_equal(write(go[1], "g", 1), 1);
		close(go[1]);
		int st = 0;
		assert_int_equal(waitpid(tries, &st, 0), tries);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	} else {
		print_message("# no device program could be attached here\n");
	}
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	assert_int_equal(cg_attach(&cg, child), 0);
	_cleanup_free_ char *procs = get(dir, "cgroup.procs");
	char want[16];
	snprintf(want, sizeof(want), "%d", (int)child);
	assert_string_equal(procs, want);
	assert_int_equal(cg_kill(&cg), 0);
	int status = 0;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	_cleanup_free_ char *level = xstrdup(dir);
	*strrchr(level, '/') = '\0';
	cg_destroy(&cg);
	assert_int_equal(rmdir(level), 0); /* the attempt's folder went with it */
	free(line2);
	free(own);
	rm_rf(root);
	free(root);
}

/* The plan a shim reads: what the agent wrote, back; a bad one refused. */
static void test_plan_roundtrip(void **state)
{
	char *argv[] = {"sh", "-c", "true", NULL}, *env[] = {"A=1", NULL};
	struct shim_task t = {.rank = 3,
			      .argc = 3,
			      .argv = argv,
			      .nenv = 1,
			      .env = env,
			      .cwd = "/tmp",
			      .output = "/tmp/o"};
	struct shim_plan p = {.job = 9,
			      .attempt = 2,
			      .grace_ms = 500,
			      .lease_until_ms = 77000,
			      .lease_ms = 15000,
			      .fence_grace_ms = 7500,
			      .ntasks = 1,
			      .tasks = &t,
			      .as_user = true,
			      .cgroup = true,
			      .node = "n1"};
	p.user = (struct shim_user){
		.name = "alice", .uid = 1001, .gid = 1001, .ngroups = 2, .groups = {1001, 27}};
	p.limits = (struct cg_limits){.mem_mib = 64, .cpus = "0-1", .pids_max = 4096};
	p.cg_slot = 5;
	char *check[] = {"/usr/bin/tenk-daemon", "validate", "--device-check", NULL};
	char *check_env[] = {"CUDA_VISIBLE_DEVICES=1,3", NULL};
	p.check_argv = check;
	p.check_argc = 3;
	p.check_env = check_env;
	p.check_nenv = 1;
	json_t *j = shim_plan_pack(&p);
	struct shim_plan back;
	struct tk_error err;
	assert_int_equal(shim_plan_unpack(j, &back, &err), 0);
	assert_int_equal(back.tasks[0].rank, 3);
	assert_string_equal(back.tasks[0].argv[2], "true");
	assert_int_equal(back.user.groups[1], 27);
	assert_false(back.allow_root);
	assert_true(back.cgroup && back.limits.mem_mib == 64);
	assert_string_equal(back.limits.cpus, "0-1");
	assert_int_equal(back.cg_slot, 5);
	assert_int_equal(back.lease_until_ms, 77000);
	assert_int_equal(back.lease_ms, 15000);
	assert_int_equal(back.fence_grace_ms, 7500);
	assert_int_equal(back.check_argc, 3);
	assert_string_equal(back.check_argv[2], "--device-check");
	assert_null(back.check_argv[3]);
	assert_int_equal(back.check_nenv, 1);
	assert_string_equal(back.check_env[0], "CUDA_VISIBLE_DEVICES=1,3");
	shim_plan_release(&back);
	/* a device check with no command is refused, saying where */
	json_t *dc = json_object_get(j, "device_check");
	json_object_set_new(dc, "argv", json_array());
	assert_true(shim_plan_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "device_check"));
	assert_non_null(strstr(err.text, "argv"));
	json_object_del(j, "device_check");
	assert_int_equal(shim_plan_unpack(j, &back, &err), 0);
	assert_int_equal(back.check_argc, 0);
	shim_plan_release(&back);
	/* a plan of a newer shim protocol: refused, saying why */
	json_object_set_new(j, "protocol", json_integer(SHIM_PROTOCOL + 1));
	assert_true(shim_plan_unpack(j, &back, &err) < 0);
	assert_non_null(strstr(err.text, "must come from one installation"));
	json_object_set_new(j, "protocol", json_integer(SHIM_PROTOCOL));
	json_object_set_new(json_object_get(j, "cgroup"), "cpus", json_string("0; rm -rf /"));
	assert_true(shim_plan_unpack(j, &back, &err) < 0);
	assert_string_equal(err.text, "cgroup.cpus: not a list of CPUs");
	json_decref(j);
	/* a status says its protocol; one that says none is of version 1 */
	struct shim_task_status ts = {.rank = 0,
				      .state = SHIM_TASK_EXITED,
				      .exit_code = 125,
				      .cause = EXIT_LAUNCH_FAILED,
				      .node_fault = true};
	struct shim_status st = {.job = 4, .attempt = 1, .shim_pid = 77, .ntasks = 1, .tasks = &ts};
	j = shim_status_pack(&st);
	struct shim_status sb;
	assert_int_equal(shim_status_unpack(j, &sb, &err), 0);
	assert_true(sb.ntasks == 1 && sb.tasks[0].node_fault);
	assert_int_equal(sb.protocol, SHIM_PROTOCOL);
	shim_status_release(&sb);
	json_object_del(j, "protocol");
	json_object_set_new(j, "from_the_future", json_true());
	assert_int_equal(shim_status_unpack(j, &sb, &err), 0);
	assert_int_equal(sb.protocol, 1);
	assert_int_equal(sb.shim_pid, 77);
	shim_status_release(&sb);
	json_decref(j);
	struct shim_cmd c = {.type = SHIM_CMD_STOP, .cause = EXIT_TIMEOUT}, cb;
	j = shim_cmd_pack(&c);
	assert_int_equal(shim_cmd_unpack(j, &cb, &err), 0);
	assert_int_equal(cb.cause, EXIT_TIMEOUT);
	json_decref(j);
	c = (struct shim_cmd){.type = SHIM_CMD_SIGNAL, .signal = 12};
	j = shim_cmd_pack(&c);
	assert_int_equal(shim_cmd_unpack(j, &cb, &err), 0);
	assert_int_equal(cb.type, SHIM_CMD_SIGNAL);
	assert_int_equal(cb.signal, 12);
	json_decref(j);
	c = (struct shim_cmd){.type = SHIM_CMD_RENEW, .until_ms = 123456};
	j = shim_cmd_pack(&c);
	assert_int_equal(shim_cmd_unpack(j, &cb, &err), 0);
	assert_int_equal(cb.type, SHIM_CMD_RENEW);
	assert_int_equal(cb.until_ms, 123456);
	/* a newer agent's command: its keys this shim does not know are
	 * ignored, the ones it knows checked */
	json_object_set_new(j, "priority", json_string("high"));
	assert_int_equal(shim_cmd_unpack(j, &cb, &err), 0);
	assert_int_equal(cb.until_ms, 123456);
	json_object_set_new(j, "until_ms", json_integer(-1));
	assert_true(shim_cmd_unpack(j, &cb, &err) < 0);
	assert_non_null(strstr(err.text, "until_ms"));
	json_decref(j);
}

static void collect(void *arg, const char *line, size_t len)
{
	struct strbuf *sb = arg;
	strbuf_addf(sb, "[%.*s]", (int)len, line);
}

static void test_lines(void **state)
{
	struct strbuf buf, got;
	strbuf_init(&buf);
	strbuf_init(&got);
	assert_int_equal(shim_lines(&buf, "ab\ncd", 5, collect, &got), 0);
	assert_string_equal(got.buf, "[ab]");
	assert_int_equal(shim_lines(&buf, "e\n\nf", 4, collect, &got), 0);
	assert_string_equal(got.buf, "[ab][cde][]");
	assert_string_equal(buf.buf, "f");
	strbuf_release(&buf);
	strbuf_release(&got);
}

/* A task started as nobody: runs with nobody's ids, cannot become root
 * again, and cannot open an output nobody may not write. Needs root. */
static void test_task_as_another_user(void **state)
{
	if (geteuid() != 0)
		skip();
	struct passwd *pw = getpwnam("nobody");
	assert_non_null(pw);
	char *dir = tmpdir();
	chmod(dir, 0777);
	_cleanup_free_ char *out = xasprintf("%s/out", dir);
	char *argv[] = {"sh", "-c",
			"id -u; id -G; python3 -c 'import os; os.setuid(0)' 2>/dev/null || "
			"echo no-root",
			NULL};
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	struct shim_task t = {.rank = 0,
			      .argc = 3,
			      .argv = argv,
			      .nenv = 1,
			      .env = env,
			      .cwd = dir,
			      .output = out};
	struct shim_plan p = {.job = 1, .attempt = 1, .ntasks = 1, .tasks = &t, .as_user = true};
	p.user = (struct shim_user){
		.uid = pw->pw_uid, .gid = pw->pw_gid, .ngroups = 1, .groups = {pw->pw_gid}};
	snprintf(p.user.name, sizeof(p.user.name), "nobody");
	struct cgroup none = {0};
	struct shim_task_status ts = {0};
	int code;
	char why[256];
	int pid = shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why));
	assert_true(pid > 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	_cleanup_free_ char *text = get(dir, "out");
	char expect[64];
	snprintf(expect, sizeof(expect), "%u\n%u\nno-root", pw->pw_uid, pw->pw_gid);
	assert_string_equal(text, expect);
	struct stat st;
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_uid, pw->pw_uid);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(ts.out_from, 0);
	/* a second attempt: it begins where the first ended, with its mark */
	p.attempt = 2;
	p.marks = true;
	snprintf(p.node, sizeof(p.node), "gpu03");
	pid = shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(ts.out_from, st.st_size);
	_cleanup_free_ char *both = get(dir, "out");
	assert_int_equal(strncmp(both, text, strlen(text)), 0);
	assert_int_equal(strncmp(both + st.st_size, "--- tenk: attempt 2 on gpu03 at 20", 34), 0);
	assert_non_null(strstr(both + st.st_size, " ---\n"));
	assert_non_null(strstr(both + st.st_size, "no-root"));
	p.attempt = 1;
	p.marks = false;
	/* an output only root may write: refused, with why */
	t.output = "/etc/tenk-unit-test-out";
	assert_int_equal(shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why)), -1);
	assert_int_equal(code, 127);
	assert_string_equal(why, "cannot open output /etc/tenk-unit-test-out: Permission denied");
	assert_int_equal(access("/etc/tenk-unit-test-out", F_OK), -1);
	/* no such command */
	t.output = out;
	char *bad[] = {"no-such-command-xyz", NULL};
	t.argv = bad;
	t.argc = 1;
	assert_int_equal(shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why)), -1);
	assert_string_equal(why, "command not found: no-such-command-xyz");
	/* uid 0 (a second name of root): refused unless the plan allows root */
	t.argv = argv;
	t.argc = 3;
	p.user =
		(struct shim_user){.name = "toor", .uid = 0, .gid = 0, .ngroups = 1, .groups = {0}};
	assert_int_equal(shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why)), -1);
	assert_int_equal(code, 126);
	assert_string_equal(why, "user toor is root (uid 0), and this cluster runs no job as root");
	p.allow_root = true;
	pid = shim_task_fork(&p, &none, &t, NULL, &ts, &code, why, sizeof(why));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rm_rf(dir);
	free(dir);
}

/* A folder to mount is opened as its owner and that folder is what is
 * bound for podman, whatever its path becomes after: nobody swaps a
 * component of the path for a link into root's 0700 folder as fast as it
 * can (renameat2 RENAME_EXCHANGE), and 200 prepares never bind root's
 * file. Needs root. */
static void test_mount_is_what_was_checked(void **state)
{
	if (geteuid() != 0)
		skip();
	struct passwd *pw = getpwnam("nobody");
	assert_non_null(pw);
	char *base = tmpdir();
	chmod(base, 0711);
	_cleanup_free_ char *alice = xasprintf("%s/alice", base);
	_cleanup_free_ char *d = xasprintf("%s/d", alice), *s = xasprintf("%s/s", alice);
	_cleanup_free_ char *bob = xasprintf("%s/bob", base);
	_cleanup_free_ char *inner = xasprintf("%s/inner", bob);
	_cleanup_free_ char *shimdir = xasprintf("%s/shim", base);
	assert_int_equal(mkdir(alice, 0755), 0);
	assert_int_equal(mkdir(d, 0755), 0);
	assert_int_equal(mkdir(bob, 0700), 0);
	assert_int_equal(mkdir(inner, 0755), 0);
	assert_int_equal(mkdir(shimdir, 0700), 0);
	_cleanup_free_ char *df = xasprintf("%s/f", d), *bf = xasprintf("%s/f", inner);
	put(df, "alice");
	put(bf, "bob's");
	assert_int_equal(symlink(inner, s), 0);
	assert_int_equal(chown(alice, pw->pw_uid, pw->pw_gid), 0);
	assert_int_equal(chown(d, pw->pw_uid, pw->pw_gid), 0);
	assert_int_equal(lchown(s, pw->pw_uid, pw->pw_gid), 0);
	pid_t swapper = fork();
	assert_true(swapper >= 0);
	if (swapper == 0) {
		if (setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
			_exit(1);
		for (long i = 0; i < 100000000; i++) /* bounded; killed long before */
			syscall(SYS_renameat2, AT_FDCWD, d, AT_FDCWD, s, 2 /* RENAME_EXCHANGE */);
		_exit(0);
	}
	_cleanup_free_ char *mnt = xasprintf("%s:/data", d);
	char *mounts[] = {mnt};
	_cleanup_free_ char *out = xasprintf("%s/out", alice);
	char *argv[] = {"true", NULL};
	struct shim_task t = {.rank = 0, .argc = 1, .argv = argv, .cwd = base, .output = out};
	struct shim_plan p = {.job = 1, .attempt = 1, .ntasks = 1, .tasks = &t, .as_user = true};
	p.user = (struct shim_user){
		.uid = pw->pw_uid, .gid = pw->pw_gid, .ngroups = 1, .groups = {pw->pw_gid}};
	snprintf(p.user.name, sizeof(p.user.name), "nobody");
	struct shim_container ctr = {.nmounts = 1, .mounts = mounts};
	p.ctr = &ctr;
	_cleanup_free_ char *stage = xasprintf("%s/mnt.0.0", shimdir);
	/* 200 tries, and on until one bound (a swapper that has the processor
	 * to itself can make every try of a run find the link): 5,000 at most */
	int bound = 0, refused = 0, tries = 0;
	for (; tries < 5000 && (tries < 200 || !bound); tries++) {
		int fd = -1;
		char why[256] = "";
		if (ctr_prepare(&p, &t, shimdir, &fd, why, sizeof(why)) == 0) {
			_cleanup_free_ char *text = get(stage, "f");
			assert_non_null(text);
			assert_string_equal(text, "alice"); /* never bob's */
			close(fd);
			bound++;
		} else {
			/* the link was there when it was opened: refused as the owner */
			assert_non_null(strstr(why, "Permission denied"));
			assert_int_equal(fd, -1);
			refused++;
		}
		ctr_unstage(shimdir, 0);
		assert_int_equal(access(stage, F_OK), -1); /* the place went, nothing in it */
	}
	kill(swapper, SIGKILL);
	waitpid(swapper, NULL, 0);
	print_message("# bound %d, refused %d\n", bound, refused);
	assert_int_equal(bound + refused, tries);
	assert_true(bound > 0);
	/* what was bound was only ever looked at: both files are whole */
	struct stat st;
	assert_int_equal(lstat(d, &st), 0);
	_cleanup_free_ char *a = get(S_ISDIR(st.st_mode) ? d : s, "f"), *b = get(inner, "f");
	assert_non_null(a);
	assert_non_null(b);
	assert_string_equal(a, "alice");
	assert_string_equal(b, "bob's");
	rm_rf(base);
	free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cgroup_v1),
		cmocka_unit_test(test_cgroup_v1_spares),
		cmocka_unit_test(test_cgroup_v2),
		cmocka_unit_test(test_cgroup_v2_not_delegated),
		cmocka_unit_test(test_cgroup_v2_kernel),
		cmocka_unit_test(test_plan_roundtrip),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_task_as_another_user),
		cmocka_unit_test(test_mount_is_what_was_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
