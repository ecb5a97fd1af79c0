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
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SPAWN_POLL_MS 20 /* waitpid polling when there is no pidfd */

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

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
	void *data = p->data;
	memset(p, 0, sizeof(*p));
	p->data = data;
	p->pid = pid;
	p->exit_cb = exit_cb;
	p->pidfd = pidfd_open_(pid);
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
