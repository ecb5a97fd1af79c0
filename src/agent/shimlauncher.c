/*
 * `tenk-shim --launcher PAD`: the agent's resident starter of shims. The
 * agent starts it once, with one end of a sequenced-packet socket pair as
 * descriptor 3; for each attempt it sends the shim's folder and, attached,
 * the socket the shim is to listen on, and the launcher forks: the child is
 * the shim (shim_run, in a session of its own, with that socket as its
 * descriptor 3), exactly as a `tenk-shim DIR` the agent had started itself,
 * and the launcher answers with its pid and a pidfd naming it, by which the
 * agent watches it.
 *
 * Why: starting a program costs on a virtual machine more than the job it
 * supervises often does (exec maps and faults in a whole image); a fork of
 * this small process, already loaded, costs a third of that. The launcher
 * keeps nothing of an attempt's: a shim it forked lives on if the launcher
 * or the agent goes (and is found again by the next agent, as before), and
 * the launcher goes when the agent's end of the pair closes.
 *
 * PAD is room: a shim's command line, as ps and the agent's adoption read
 * it (/proc/PID/cmdline), is the launcher's own argument area, which the
 * child rewrites to "tenk-shim DIR".
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define LAUNCHER_FD 3

/* The argument area [area, area + len) made to read "tenk-shim\0ARG\0". */
static bool retitle(char *area, size_t len, const char *arg)
{
	size_t need = sizeof("tenk-shim") + strlen(arg) + 1;
	if (need > len)
		return false;
	memset(area, 0, len);
	memcpy(area, "tenk-shim", sizeof("tenk-shim"));
	memcpy(area + sizeof("tenk-shim"), arg, strlen(arg) + 1);
	return true;
}

/* Reaps the launcher's children; a shim that did not end well is logged
 * (the agent, not its parent, cannot read its status). */
static void reap(void)
{
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			log_warn("the shim of pid %d ended %s %d", (int)pid,
				 WIFSIGNALED(st) ? "by signal" : "with code",
				 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* Receives a request: the folder (NUL-terminated into dir) and the socket.
 * 1: one; 0: the agent's end closed; -1: a malformed one (nothing kept);
 * -2: nothing to read after all. */
static int receive(char *dir, size_t n, int *lfd)
{
	*lfd = -1;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = {dir, n - 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = c.buf,
			   .msg_controllen = sizeof(c.buf)};
	ssize_t got;
	do
		got = recvmsg(LAUNCHER_FD, &m, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return errno == EAGAIN ? -2 : 0;
	if (got == 0)
		return 0;
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(lfd, CMSG_DATA(h), sizeof(int));
	dir[got] = '\0';
	if (*lfd < 0 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || strlen(dir) != (size_t)got) {
		if (*lfd >= 0)
			close(*lfd);
		return -1;
	}
	return 1;
}

static void answer(pid_t pid, int err, int pidfd)
{
	struct launcher_reply r = {.pid = pid, .err = err};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} c;
	memset(&c, 0, sizeof(c));
	struct iovec iov = {&r, sizeof(r)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (pidfd >= 0) {
		m.msg_control = c.buf;
		m.msg_controllen = sizeof(c.buf);
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &pidfd, sizeof(int));
	}
	while (sendmsg(LAUNCHER_FD, &m, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

/* In the child: what `tenk-shim DIR`, started by the agent, would be. */
_Noreturn static void become_shim(char *area, size_t len, char *argv0, char *dir, int lfd, int sfd)
{
	close(sfd);
	if (dup2(lfd, LAUNCHER_FD) < 0) /* (in place of the agent's socket) */
		_exit(1);
	close_range(LAUNCHER_FD + 1, ~0U, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGCHLD, SIG_DFL);
	setsid();
	retitle(area, len, dir);
	char *args[] = {argv0, dir, NULL};
	int rc = shim_run(NULL, 2, args);
#ifdef __SANITIZE_ADDRESS__
	/* as a shim's main returning: the leak checker's report */
	exit(rc);
#else
	/* without the exit handlers' work on memory the launcher's image
	 * shares (each page written costs this child a copy) */
	fflush(NULL);
	_exit(rc);
#endif
}

int shim_launcher_run(int argc, char **argv)
{
	tk_log_set_prefix("shim launcher");
	signal(SIGPIPE, SIG_IGN);
	/* the argument area, which each child makes its own command line */
	char *area = argv[0];
	size_t len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[0]);
	char *argv0 = xstrdup(argv[0]);
	retitle(area, len, "--launcher");
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_err("cannot watch its children: %s", strerror(errno));
		return 1;
	}
	/* what every shim would find out for itself, once: where the cgroups
	 * are (its children are in the launcher's), and the seed of the JSON
	 * parser's hashes (else read from /dev/urandom by each) */
	struct cg_host *host = NULL;
	struct tk_error err;
	if (geteuid() == 0 &&
	    cg_host_load("/proc/self/mountinfo", "/proc/self/cgroup", &host, &err) < 0)
		log_warn("%s; each shim reads it again", err.text);
	shim_set_host(host);
	json_object_seed(0);
	char *dir = xmalloc(MODEL_MAX_PATH + 1);
	for (;;) {
		struct pollfd pf[2] = {{LAUNCHER_FD, POLLIN, 0}, {sfd, POLLIN, 0}};
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		if (!pf[0].revents)
			continue;
		int lfd;
		int got = receive(dir, MODEL_MAX_PATH + 1, &lfd);
		if (got == 0)
			break; /* the agent is gone */
		if (got == -2)
			continue;
		if (got < 0) {
			answer(-1, EINVAL, -1);
			continue;
		}
		pid_t pid = fork();
		if (pid == 0)
			become_shim(area, len, argv0, dir, lfd, sfd);
		int e = errno;
		close(lfd);
		/* (without one, the agent opens its own: the shim lasts until
		 * the agent releases it) */
		int pidfd = pid > 0 ? tk_pidfd_open(pid) : -1;
		answer(pid, pid > 0 ? 0 : e, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		reap();
	}
	free(dir);
	free(argv0);
	cg_host_free(host);
	close(sfd);
	return 0;
}
