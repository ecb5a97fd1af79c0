/*
 * Starting a task's process and learning when it exits.
 *
 * posix_spawn (which glibc implements with vfork: no copy of the agent's
 * page tables, the agent's thread waits only until exec) in a new session,
 * with every signal at its default disposition and every descriptor above
 * stderr closed, so nothing of the agent (sockets, the server's listener in
 * `tenk up`) leaks into a job. The exit is watched through a pidfd on the
 * agent's loop; where the kernel has no pidfd (before Linux 5.3) a timer
 * polls waitpid instead.
 *
 * We use this rather than uv_spawn because libuv 1.44 forks (copying the
 * page tables of the whole process, the server's too in `tenk up`), blocks
 * the loop until the child has exec'd, and leaves descriptors without
 * O_CLOEXEC open in the child.
 *
 * Shims come from the launcher (shimlauncher.c) where it serves: asked
 * over its socket, it forks one from its image, already loaded, and sends
 * a pidfd of it; the agent watches that process, not its child, until it
 * is gone (the launcher reaps it). Where it cannot serve, shims are
 * spawned as above.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_POLL_MS 20 /* waitpid polling when there is no pidfd */

static void proc_exited(struct proc *p, int wstatus)
{
	if (p->watching) {
		if (p->pidfd >= 0)
			uv_poll_stop(&p->poll);
		else
			uv_timer_stop(&p->timer);
		p->watching = false;
	}
	int64_t code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 0;
	int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
	p->exit_cb(p, code, sig);
}

static void try_reap(struct proc *p)
{
	if (p->foreign) {
		/* its pidfd is readable, or polled: gone once no signal reaches it */
		if (p->pidfd >= 0 || (kill(p->pid, 0) < 0 && errno == ESRCH))
			proc_exited(p, 0);
		return;
	}
	int wstatus;
	pid_t r;
	do
		r = waitpid(p->pid, &wstatus, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == p->pid)
		proc_exited(p, wstatus);
	else if (r < 0)
		proc_exited(p, W_EXITCODE(255, 0)); /* reaped elsewhere: unknowable */
}

static void pidfd_cb(uv_poll_t *h, int status, int events)
{
	try_reap(h->data);
}

static void poll_timer_cb(uv_timer_t *t)
{
	try_reap(t->data);
}

/* Watches pid, through pidfd where there is one (-1: polled). */
static void watch(uv_loop_t *loop, struct proc *p, pid_t pid, int pidfd, bool foreign,
		  proc_exit_cb exit_cb)
{
	void *data = p->data;
	memset(p, 0, sizeof(*p));
	p->data = data;
	p->pid = pid;
	p->exit_cb = exit_cb;
	p->pidfd = pidfd;
	p->foreign = foreign;
	p->watching = true;
	if (p->pidfd >= 0) {
		fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
		uv_poll_init(loop, &p->poll, p->pidfd);
		p->poll.data = p;
		uv_poll_start(&p->poll, UV_READABLE, pidfd_cb);
	} else {
		uv_timer_init(loop, &p->timer);
		p->timer.data = p;
		uv_timer_start(&p->timer, poll_timer_cb, SPAWN_POLL_MS, SPAWN_POLL_MS);
	}
}

int agent__proc_spawn(uv_loop_t *loop, struct proc *p, const char *path, char *const *argv,
		      char *const *env, int pass_fd, proc_exit_cb exit_cb)
{
	posix_spawnattr_t attr;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_init(&attr);
	posix_spawn_file_actions_init(&fa);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pass_fd, 3);
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
	pid_t pid;
	int r = posix_spawn(&pid, path, &fa, &attr, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (r != 0)
		return -r;
	watch(loop, p, pid, tk_pidfd_open(pid), false, exit_cb);
	return 0;
}

static void proc_handle_closed(uv_handle_t *h)
{
	struct proc *p = h->data;
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
	p->close_cb(p);
}

void agent__proc_close(struct proc *p, void (*close_cb)(struct proc *p))
{
	p->close_cb = close_cb;
	uv_handle_t *h = p->pidfd >= 0 ? (uv_handle_t *)&p->poll : (uv_handle_t *)&p->timer;
	uv_close(h, proc_handle_closed);
}

/* ---- the launcher ------------------------------------------------------------------------ */

#define LAUNCHER_ANSWER_MS 5000 /* a fork's answer, at most */
#define LAUNCHER_FAILURES 3	/* then shims are spawned, as without one */

static void launcher_closed(struct proc *p)
{
	struct agent *a = p->data;
	if (a->stopping)
		agent_handle_gone(a);
}

static void launcher_drop(struct agent *a)
{
	if (a->launcher_fd >= 0)
		close(a->launcher_fd);
	a->launcher_fd = -1;
	if (a->launcher_running) {
		a->launcher_running = false;
		agent__proc_close(&a->launcher, launcher_closed);
	}
}

static void launcher_exit_cb(struct proc *p, int64_t status, int sig)
{
	struct agent *a = p->data;
	if (a->launcher_fd >= 0) {
		log_warn("the shims' launcher exited %lld%s%s; it starts again when a shim "
			 "is due",
			 (long long)status, sig ? ", signal " : "", sig ? strsignal(sig) : "");
		a->launcher_failures++;
	}
	launcher_drop(a);
}

static int launcher_start(struct agent *a, const char *shim_path)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	char *pad = xmalloc(LAUNCHER_PAD + 1);
	memset(pad, ' ', LAUNCHER_PAD);
	pad[LAUNCHER_PAD] = '\0';
	char *argv[] = {"tenk-shim", "--launcher", pad, NULL};
	a->launcher.data = a;
	int r = agent__proc_spawn(a->loop, &a->launcher, shim_path, argv, environ, sv[1],
				  launcher_exit_cb);
	free(pad);
	close(sv[1]);
	if (r < 0) {
		close(sv[0]);
		return r;
	}
	a->launcher_fd = sv[0];
	a->launcher_running = true;
	return 0;
}

/* One request and its answer; the answer's pidfd in *pidfd (-1: none). */
static int launcher_ask(struct agent *a, const char *dir, int listen_fd,
			struct launcher_reply *reply, int *pidfd)
{
	*pidfd = -1;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	memset(&c, 0, sizeof(c));
	struct iovec iov = {(void *)dir, strlen(dir)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = c.buf,
			   .msg_controllen = sizeof(c.buf)};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &listen_fd, sizeof(int));
	ssize_t n;
	do
		n = sendmsg(a->launcher_fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	struct pollfd pf = {a->launcher_fd, POLLIN, 0};
	int64_t until = tk_mono_ms() + LAUNCHER_ANSWER_MS;
	int pr;
	do
		pr = poll(&pf, 1, (int)MAX(0, until - tk_mono_ms()));
	while (pr < 0 && errno == EINTR);
	if (pr <= 0)
		return -ETIMEDOUT;
	memset(&c, 0, sizeof(c));
	struct iovec riov = {reply, sizeof(*reply)};
	struct msghdr rm = {.msg_iov = &riov,
			    .msg_iovlen = 1,
			    .msg_control = c.buf,
			    .msg_controllen = sizeof(c.buf)};
	do
		n = recvmsg(a->launcher_fd, &rm, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(*reply))
		return -EPIPE; /* (0: it is gone) */
	h = CMSG_FIRSTHDR(&rm);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(pidfd, CMSG_DATA(h), sizeof(int));
	return 0;
}

int agent__launcher_spawn(struct agent *a, struct proc *p, const char *shim_path, const char *dir,
			  int listen_fd, proc_exit_cb exit_cb)
{
	if (a->launcher_failures >= LAUNCHER_FAILURES || a->stopping)
		return -ENOSYS;
	if (a->launcher_fd < 0) {
		/* only where the shims can be watched by pidfd: its children
		 * are not ours to wait for */
		int self = tk_pidfd_open(getpid());
		if (self < 0) {
			a->launcher_failures = LAUNCHER_FAILURES;
			return -ENOSYS;
		}
		close(self);
		int r = launcher_start(a, shim_path);
		if (r < 0) {
			log_warn("cannot start the shims' launcher %s: %s; shims are started "
				 "one by one",
				 shim_path, strerror(-r));
			a->launcher_failures = LAUNCHER_FAILURES;
			return r;
		}
	}
	struct launcher_reply reply;
	int pidfd;
	int r = launcher_ask(a, dir, listen_fd, &reply, &pidfd);
	if (r < 0) {
		/* it died or hangs: it goes (a fork it made meanwhile has no
		 * socket the agent knows of and ends at its lease) */
		log_warn("the shims' launcher did not answer: %s", strerror(-r));
		a->launcher_failures++;
		if (a->launcher_running)
			kill(a->launcher.pid, SIGKILL);
		launcher_drop(a);
		return r;
	}
	if (reply.pid <= 0) {
		if (pidfd >= 0)
			close(pidfd);
		return -(reply.err > 0 ? reply.err : EIO);
	}
	if (pidfd < 0)
		pidfd = tk_pidfd_open(reply.pid);
	watch(a->loop, p, reply.pid, pidfd, true, exit_cb);
	return 0;
}

void agent__launcher_stop(struct agent *a)
{
	/* its socket closes, it ends, and its exit (reaped) closes the watch */
	if (a->launcher_running)
		a->open_handles++;
	if (a->launcher_fd >= 0)
		close(a->launcher_fd);
	a->launcher_fd = -1;
}
