/*
 * Thin wrappers over the system: clocks, kernel randomness, and whole-file
 * reads and atomic writes. They convert errno to -errno at the call.
 */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t tk_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tk_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tk_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int tk_random_hex(char *buf, size_t nbytes)
{
	unsigned char raw[64];
	if (nbytes > sizeof(raw))
		return -EINVAL;
	size_t got = 0;
	while (got < nbytes) {
		ssize_t r = getrandom(raw + got, nbytes - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)r;
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < nbytes; i++) {
		buf[2 * i] = hex[raw[i] >> 4];
		buf[2 * i + 1] = hex[raw[i] & 15];
	}
	buf[2 * nbytes] = '\0';
	return 0;
}

char *tk_which(const char *name, const char *def_path)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = def_path;
	if (!path)
		return NULL;
	_cleanup_free_ char *dirs = xstrdup(path);
	char *save = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char *f = xasprintf("%s/%s", d, name);
		if (access(f, X_OK) == 0)
			return f;
		free(f);
	}
	return NULL;
}

int tk_mkdir_p(const char *path, mode_t mode)
{
	/* the common case, its parent there: one call, not one a level */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	_cleanup_free_ char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int tk_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

static int in_memory(const char *path)
{
	struct statfs fs;
	if (statfs(path, &fs) < 0)
		return -errno;
	return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC ? 0 : -EXDEV;
}

int tk_private_dir(const char *path, mode_t mode, bool tmpfs)
{
	/* nothing made on a disk that was not asked for */
	_cleanup_free_ char *parent = xstrdup(path);
	char *slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = '\0';
	int r = tmpfs ? in_memory(slash ? parent : ".") : 0;
	if (r < 0)
		return r;
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return tmpfs ? in_memory(path) : 0;
}

void tk_rmdir_files(const char *dir)
{
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int r = 0;
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r == 0 && sync && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	if (r == 0 && sync) {
		/* the rename itself durable: the folder's entry synced */
		_cleanup_free_ char *dir = xstrdup(path);
		char *slash = strrchr(dir, '/');
		if (slash)
			*(slash == dir ? slash + 1 : slash) = '\0';
		int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			if (fsync(dfd) < 0)
				r = -errno;
			close(dfd);
		}
	}
	return r;
}

int tk_write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	return write_file(path, data, len, mode, true);
}

int tk_replace_file(const char *path, const void *data, size_t len, mode_t mode)
{
	return write_file(path, data, len, mode, false);
}

int tk_read_file(const char *path, size_t limit, char **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct strbuf sb;
	strbuf_init(&sb);
	char chunk[8192];
	int r = 0;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		if (sb.len + (size_t)n > limit) {
			r = -EFBIG;
			break;
		}
		strbuf_add(&sb, chunk, (size_t)n);
	}
	close(fd);
	if (r < 0) {
		strbuf_release(&sb);
		return r;
	}
	if (ret_len)
		*ret_len = sb.len;
	*ret = strbuf_detach(&sb);
	return 0;
}

void tk_strip(char *s)
{
	size_t n = strlen(s);
	while (n > 0 &&
	       (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
}

/* Splits "HOST:PORT" ("[v6]:PORT" too) and resolves it. */
int tk_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *host,
		    size_t hostlen, struct tk_error *err)
{
	const char *colon = strrchr(listen, ':');
	if (!colon || colon == listen)
		return tk_errorf(err, -EINVAL, "listen address \"%s\": expected HOST:PORT", listen);
	const char *h = listen;
	size_t hl = (size_t)(colon - listen);
	if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl >= hostlen)
		return tk_errorf(err, -EINVAL, "listen address \"%s\": host too long", listen);
	memcpy(host, h, hl);
	host[hl] = '\0';
	int64_t port;
	if (tk_parse_int64(colon + 1, 0, 65535, &port) < 0)
		return tk_errorf(err, -EINVAL, "listen address \"%s\": port must be 0..65535",
				 listen);
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
	struct addrinfo *res = NULL;
	char portstr[8];
	snprintf(portstr, sizeof(portstr), "%d", (int)port);
	int rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0 || !res)
		return tk_errorf(err, -EINVAL, "listen address \"%s\": %s", listen,
				 gai_strerror(rc));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int tk_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}
