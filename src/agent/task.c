/*
 * A task, started by its shim: in the child, a new session, the plan's user
 * for good, its folder and output opened as that user, then exec. The child
 * tells the shim why it could not get there through a pipe that exec closes.
 *
 * The child shares the shim's memory until it execs (clone with CLONE_VM
 * and CLONE_VFORK, as posix_spawn does, on a stack of its own): no copy of
 * the shim's page tables, which on a virtual machine is most of what a
 * fork costs. The shim is suspended meanwhile and has one thread, so the
 * child may use its heap; it changes nothing the shim reads after (no
 * environ: the task's environment goes to execve, and its PATH is searched
 * here), and its credentials change through the system calls themselves,
 * not libc's wrappers, which would act for every thread of the process they
 * believe they are in. Under AddressSanitizer, which cannot follow a
 * switch of stacks, it forks instead.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* In the child: says why it cannot go on to the shim through fd, and exits. */
_Noreturn static void child_fail(int fd, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
_Noreturn static void child_fail(int fd, int code, const char *fmt, ...)
{
	char msg[MODEL_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char out[MODEL_REASON_MAX + 8];
	int len = snprintf(out, sizeof(out), "%d %s", code, msg);
	(void)n;
	if (write(fd, out, (size_t)len) < 0) {
		/* nobody to tell */
	}
	_exit(code);
}

/* Becomes the plan's user for good: every supplementary group, the group,
 * the user, then proof that root cannot be had back. uid 0 only where the
 * plan allows root, whatever the agent checked before. */
static void become(const struct shim_user *u, bool allow_root, int fd)
{
	if (u->uid == 0 && !allow_root)
		child_fail(fd, 126, "user %s is root (uid 0), and this cluster runs no job as root",
			   u->name);
	gid_t groups[SHIM_MAX_GROUPS];
	for (int i = 0; i < u->ngroups; i++)
		groups[i] = (gid_t)u->groups[i];
	uid_t uid = (uid_t)u->uid;
	gid_t gid = (gid_t)u->gid;
	if (syscall(SYS_setgroups, (size_t)u->ngroups, groups) < 0 ||
	    syscall(SYS_setresgid, gid, gid, gid) < 0 || syscall(SYS_setresuid, uid, uid, uid) < 0)
		child_fail(fd, 126, "cannot become user %s (uid %u): %s", u->name, u->uid,
			   strerror(errno));
	uid_t r, e, s;
	gid_t rg, eg, sg;
	if (syscall(SYS_getresuid, &r, &e, &s) < 0 || r != uid || e != uid || s != uid ||
	    syscall(SYS_getresgid, &rg, &eg, &sg) < 0 || rg != gid || eg != gid || sg != gid ||
	    (uid != 0 &&
	     (syscall(SYS_setresuid, 0, 0, 0) == 0 || syscall(SYS_setresgid, 0, 0, 0) == 0)))
		child_fail(fd, 126, "user %s: could not drop root for good", u->name);
}

/* A file with no #! line that the kernel would not run: execvp gives it
 * to the shell. */
static void exec_script(const char *path, char *const *argv, char *const *env)
{
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **sh = calloc(argc + 2, sizeof(char *));
	if (!sh) {
		errno = ENOEXEC;
		return;
	}
	sh[0] = (char *)"/bin/sh";
	sh[1] = (char *)path;
	for (size_t i = 1; i < argc; i++)
		sh[i + 1] = argv[i];
	execve("/bin/sh", sh, env);
	free(sh);
	errno = ENOEXEC;
}

/* execvp's search, in the PATH of env (the task's own, not the shim's):
 * returns only where no candidate could be started, with errno saying why
 * (EACCES where one was found but not allowed). */
static void exec_path(char *const *argv, char *const *env)
{
	const char *file = argv[0];
	if (strchr(file, '/')) {
		execve(file, argv, env);
		if (errno == ENOEXEC)
			exec_script(file, argv, env);
		return;
	}
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (char *const *e = env; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	char full[MODEL_MAX_PATH];
	bool denied = false;
	size_t flen = strlen(file);
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen + flen + 2 <= sizeof(full)) {
			memcpy(full, p, dlen);
			size_t at = dlen;
			if (dlen > 0) /* an empty entry: the current folder */
				full[at++] = '/';
			memcpy(full + at, file, flen + 1);
			execve(full, argv, env);
			if (errno == ENOEXEC)
				exec_script(full, argv, env);
			if (errno == EACCES)
				denied = true;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG &&
				 errno != ELOOP && errno != ESTALE && errno != ENODEV &&
				 errno != ETIMEDOUT)
				return; /* found, and it failed: say why */
		}
		if (!*end)
			break;
		p = end;
	}
	errno = denied ? EACCES : ENOENT;
}

/* What a child is to do once it is in its session and cgroup: exec, or
 * child_fail through fd. */
typedef void child_body(int fd, void *arg);

struct child {
	const struct cgroup *cg;
	int fd; /* the end of the pipe it reports on */
	child_body *body;
	void *arg;
};

/* The child's stack while it shares the shim's memory: one, since the shim
 * waits for each child's exec before it starts another. */
#ifndef __SANITIZE_ADDRESS__
#define CHILD_STACK (256 * 1024)
static _Alignas(64) char child_stack[CHILD_STACK];
#endif

static int child_main(void *p)
{
	struct child *c = p;
	/* default dispositions, then the signals the parent held back */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (setsid() < 0)
		child_fail(c->fd, 127, "cannot start a session: %s", strerror(errno));
	/* into the attempt's cgroup while still root: it cannot leave it */
	int cr = c->cg->version ? cg_attach(c->cg, (int)syscall(SYS_getpid)) : 0;
	if (cr < 0)
		child_fail(c->fd, 127, "cannot join the attempt's cgroup: %s", strerror(-cr));
	c->body(c->fd, c->arg);
	_exit(127);
}

/* Starts a child in a session of its own, in cg, with default signals,
 * that runs body; *ret_fd: the end of the pipe it reports on. */
static pid_t start_child(const struct cgroup *cg, child_body *body, void *arg, int *ret_fd,
			 int *ret_code, char *detail, size_t n)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		*ret_code = 127;
		snprintf(detail, n, "cannot start a task: %s", strerror(errno));
		return -1;
	}
	struct child c = {.cg = cg, .fd = p[1], .body = body, .arg = arg};
	/* no handler of the shim's runs in the child before it has reset them */
	sigset_t all, old;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
#ifdef __SANITIZE_ADDRESS__
	pid_t pid = fork();
	if (pid == 0)
		child_main(&c);
#else
	pid_t pid =
		clone(child_main, child_stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
#endif
	int e = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		*ret_code = 127;
		snprintf(detail, n, "cannot start a task: %s", strerror(e));
		return -1;
	}
	*ret_fd = p[0];
	return pid;
}

/* The child's exec closes the pipe. A first line "=OUT ERR" says where its
 * output files stood; anything after it means it never got to exec. */
static int child_wait(pid_t pid, int fd, struct shim_task_status *ts, int *ret_code, char *detail,
		      size_t n)
{
	char all[MODEL_REASON_MAX + 64];
	size_t got = 0;
	for (;;) {
		ssize_t k = read(fd, all + got, sizeof(all) - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == sizeof(all) - 1)
			break;
	}
	close(fd);
	all[got] = '\0';
	char *buf = all;
	if (buf[0] == '=') {
		long long o = 0, e = 0;
		char *nl = strchr(buf, '\n');
		if (ts && sscanf(buf + 1, "%lld %lld", &o, &e) == 2) {
			ts->out_from = o;
			ts->err_from = e;
		}
		got -= nl ? (size_t)(nl + 1 - buf) : got;
		buf = nl ? nl + 1 : buf + strlen(buf);
	}
	if (got == 0)
		return pid;
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	char *sp = strchr(buf, ' ');
	*ret_code = atoi(buf) == 126 ? 126 : 127;
	snprintf(detail, n, "%s", sp ? sp + 1 : "the task could not start");
	return -1;
}

bool shim_task_marks(const struct shim_plan *plan, const struct shim_task *t, bool error)
{
	const char *path = error ? t->error : t->output;
	if (!plan->marks || !path || (error && strcmp(path, t->output) == 0))
		return false;
	for (const struct shim_task *o = plan->tasks; o < t; o++)
		if (strcmp(o->output, path) == 0 || (o->error && strcmp(o->error, path) == 0))
			return false;
	return true;
}

void shim_write_mark(int fd, const struct shim_plan *plan)
{
	char when[32], line[MODEL_NAME_MAX + 96];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	int len = snprintf(line, sizeof(line), "--- tenk: attempt %d on %s at %s ---\n",
			   plan->attempt, plan->node, when);
	if (write(fd, line, (size_t)MIN(len, (int)sizeof(line) - 1)) < 0) {
		/* a full disk: the task's own writes will say so */
	}
}

/* The size of the file open at fd (0 where it cannot say). */
static int64_t size_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
}

int shim_output_open(const char *path, bool read_too, char *why, size_t n)
{
	/* its last part is never followed: a link another user left in a
	 * shared folder would send the output into a file of the job's
	 * owner's that the job never named */
	int flags = O_CREAT | O_APPEND | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC;
	int fd = read_too ? open(path, O_RDWR | flags, 0600) : -1;
	if (fd < 0)
		fd = open(path, O_WRONLY | flags, 0600);
	if (fd >= 0)
		return fd;
	int e = errno;
	/* (a link another user owns in a sticky folder: EACCES, not ELOOP) */
	struct stat st;
	if ((e == ELOOP || e == EACCES) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		snprintf(why, n,
			 "output %s is a symbolic link: tenk opens no output through one (remove "
			 "it, or name another file)",
			 path);
	else
		snprintf(why, n, "cannot open output %s: %s", path, strerror(e));
	return -e;
}

struct task_child {
	const struct shim_plan *plan;
	const struct shim_task *t;
	const char *tty;
};

static void task_body(int cfd, void *arg)
{
	const struct task_child *tc = arg;
	const struct shim_plan *plan = tc->plan;
	const struct shim_task *t = tc->t;
	const char *tty = tc->tty;
	if (plan->as_user)
		become(&plan->user, plan->allow_root, cfd);
	/* as the user: permissions decide, a symlink redirects nothing */
	if (chdir(t->cwd) < 0)
		child_fail(cfd, 127, "cannot enter folder %s: %s", t->cwd, strerror(errno));
	if (tty) {
		/* the session's controlling terminal, and all three streams */
		int tfd = open(tty, O_RDWR);
		if (tfd < 0 || ioctl(tfd, TIOCSCTTY, 0) < 0 || dup2(tfd, 0) < 0 ||
		    dup2(tfd, 1) < 0 || dup2(tfd, 2) < 0)
			child_fail(cfd, 127, "cannot open the terminal %s: %s", tty,
				   strerror(errno));
		if (tfd > 2)
			close(tfd);
		exec_path(t->argv, t->env);
		child_fail(cfd, errno == EACCES ? 126 : 127, "cannot start %s: %s", t->argv[0],
			   strerror(errno));
	}
	char why[MODEL_REASON_MAX];
	int out = shim_output_open(t->output, false, why, sizeof(why));
	if (out < 0)
		child_fail(cfd, 127, "%s", why);
	int err = out;
	if (t->error && (err = shim_output_open(t->error, false, why, sizeof(why))) < 0)
		child_fail(cfd, 127, "%s", why);
	/* where this attempt begins in each, then its mark there */
	char at[64];
	int al = snprintf(at, sizeof(at), "=%lld %lld\n", (long long)size_of(out),
			  (long long)(err != out ? size_of(err) : 0));
	if (write(cfd, at, (size_t)al) < 0) {
		/* the shim is gone: the task goes on */
	}
	if (shim_task_marks(plan, t, false))
		shim_write_mark(out, plan);
	if (err != out && shim_task_marks(plan, t, true))
		shim_write_mark(err, plan);
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		child_fail(cfd, 127, "cannot set up the task's output: %s", strerror(errno));
	exec_path(t->argv, t->env);
	int e = errno;
	if (e == ENOENT)
		child_fail(cfd, 127, "command not found: %s", t->argv[0]);
	child_fail(cfd, e == EACCES ? 126 : 127, "cannot start %s: %s", t->argv[0], strerror(e));
}

int shim_task_fork(const struct shim_plan *plan, const struct cgroup *cg, const struct shim_task *t,
		   const char *tty, struct shim_task_status *ts, int *ret_code, char *detail,
		   size_t n)
{
	int fd = -1;
	struct task_child tc = {.plan = plan, .t = t, .tty = tty};
	pid_t pid = start_child(cg, task_body, &tc, &fd, ret_code, detail, n);
	if (pid < 0)
		return -1;
	return child_wait(pid, fd, ts, ret_code, detail, n);
}

static void exec_body(int cfd, void *arg)
{
	const struct task_exec *ex = arg;
	int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(ex->out_fd, 1) < 0 || dup2(ex->out_fd, 2) < 0 ||
	    chdir("/") < 0)
		child_fail(cfd, 127, "cannot set up the task's output: %s", strerror(errno));
	execve(ex->argv[0], ex->argv, ex->env);
	child_fail(cfd, 127, "cannot start %s: %s", ex->argv[0], strerror(errno));
}

int shim_task_fork_exec(const struct cgroup *cg, const struct task_exec *ex, int *ret_code,
			char *detail, size_t n)
{
	int fd = -1;
	pid_t pid = start_child(cg, exec_body, (void *)ex, &fd, ret_code, detail, n);
	if (pid < 0)
		return -1;
	return child_wait(pid, fd, NULL, ret_code, detail, n);
}
