/*
 * Task output for users, through the server: the work answer names files
 * (wire_log_fetch) and the agent sends what they hold from an offset
 * (POST /v1/agent/logs). Only a file of the job's own account is read, and
 * never through a link, so the server cannot have root read anything else;
 * it is opened as that account (the file-system ids of the agent's thread),
 * so an answer never tells whether a path exists where the account cannot
 * look.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOGS_POST_TIMEOUT_MS 10000

/* Where reading starts: offset, or from the end (the last `tail` lines of
 * the last max bytes, or the last max bytes). */
static int64_t read_start(int fd, const struct wire_log_file *x, int64_t size)
{
	if (x->offset >= 0)
		return x->offset > size ? 0 : x->offset; /* shorter now: rewritten */
	int64_t start = MAX(0, size - x->max);
	if (!x->tail)
		return start;
	size_t n = (size_t)(size - start);
	char *buf = xmalloc(n + 1);
	ssize_t got = pread(fd, buf, n, start);
	int64_t at = start;
	if (got > 0) {
		int lines = 0;
		ssize_t i = got - 1;
		if (buf[i] == '\n')
			i--; /* the last line's own newline */
		for (; i >= 0; i--)
			if (buf[i] == '\n' && ++lines == x->tail)
				break;
		at = start + (i >= 0 ? i + 1 : 0);
	}
	free(buf);
	return at;
}

static void read_part(const struct wire_log_file *x, const struct passwd *pw,
		      struct wire_log_part *p)
{
	p->rank = x->rank;
	/* setfsuid is this thread's alone (the pool's threads keep root) */
	int old_gid = pw ? setfsgid(pw->pw_gid) : -1;
	int old_uid = pw ? setfsuid(pw->pw_uid) : -1;
	int fd = open(x->path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	int e = errno;
	if (pw) {
		setfsuid((uid_t)old_uid);
		setfsgid((gid_t)old_gid);
	}
	errno = e;
	if (fd < 0) {
		p->status = errno == ENOENT ? LOG_NOT_YET : LOG_UNREADABLE;
		snprintf(p->error, sizeof(p->error), "%s: %s", x->path,
			 errno == ENOENT ? "no output yet" : strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !pw || st.st_uid != pw->pw_uid) {
		p->status = LOG_UNREADABLE;
		snprintf(p->error, sizeof(p->error), "%s: not a file of the job's account",
			 x->path);
		close(fd);
		return;
	}
	p->status = LOG_READ;
	p->size = st.st_size;
	p->offset = read_start(fd, x, st.st_size);
	size_t n = (size_t)MIN(x->max, MAX(0, st.st_size - p->offset));
	p->data = xmalloc(n + 1);
	ssize_t got = n ? pread(fd, p->data, n, p->offset) : 0;
	p->len = got > 0 ? (size_t)got : 0;
	close(fd);
}

static void logs_posted(void *arg, long status, const char *body, size_t len, const char *error)
{
	if (status != 200)
		log_warn("logs: the server did not take task output (%ld): %s", status,
			 error && *error ? error : "");
}

void agent_serve_logs(struct agent *a, const struct wire_log_fetch *f, int n)
{
	struct wire_logs m = {.nanswers = n};
	snprintf(m.node, sizeof(m.node), "%s", a->inv.name);
	snprintf(m.agent_id, sizeof(m.agent_id), "%s", a->agent_id);
	m.answers = xcalloc((size_t)n + 1, sizeof(*m.answers));
	for (int i = 0; i < n; i++) {
		struct wire_log_answer *an = &m.answers[i];
		an->id = f[i].id;
		an->nparts = f[i].nfiles;
		an->parts = xcalloc((size_t)f[i].nfiles + 1, sizeof(*an->parts));
		/* system work's output is the agent's, not a user's to read */
		struct passwd *pw = f[i].run_as[0] ? getpwnam(f[i].run_as) : NULL;
		for (int k = 0; k < f[i].nfiles; k++)
			read_part(&f[i].files[k], pw, &an->parts[k]);
	}
	json_t *body = wire_logs_pack(&m);
	wire_logs_release(&m);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	agent__hc_request(a->hc, "POST", a->url_logs, a->cred, text, LOGS_POST_TIMEOUT_MS,
			  logs_posted, a);
	free(text);
}
