/*
 * Checkpoints on the node (issue 15's protocol): a job marks a tag of its
 * TENK_CHECKPOINT_DIR complete with TAG/.tenk-commit ({"step": N}); the
 * agent freezes the tag (every file opened with O_NOFOLLOW, regular files
 * only, hard-linked into a staging folder so the job deleting them breaks
 * nothing), hashes it (SHA-256), checks nothing changed and nothing holds a
 * file open for writing, and uploads it to the cluster's store at
 * STORE/JOB/TAG/aATTEMPT/nRANK/ (each file to a temporary name, fsynced,
 * renamed; the manifest last), then reports it (TASK_EVENT_CHECKPOINT).
 * Before a new attempt's tasks start, it restores the tag the server names
 * into TENK_CHECKPOINT_DIR/TAG, verifying every hash, unless an intact copy
 * is there already (TASK_EVENT_RESTORED).
 *
 * The file work runs in libuv's thread pool, one checkpoint job at a time
 * per agent (uploads newest first: an older tag still waiting is skipped).
 * What is in the store is the journal: a restarted agent uploads a tag
 * again and skips every file already there whole.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_SCAN_MS 1000
#define CKPT_MAX_FILES 100000
#define CKPT_MAX_DEPTH 32
#define CKPT_MARKER ".tenk-commit"
#define CKPT_MANIFEST "manifest.json"
#define CKPT_BUF (1 << 20)
#define CKPT_DRAIN_MS (10 * 60 * 1000) /* uploads go on this long after the tasks end */
#define CKPT_SWEEP_MS 60000	       /* node rank 0 tidies a job's store this often */

/* ---- one file of a tag ------------------------------------------------------------ */

struct cfile {
	char *path; /* relative to the tag */
	int64_t size;
	int64_t mtime_ns;
	char sha[65];
};

struct ckjob {
	uv_work_t w;
	struct agent *a;
	char key[48]; /* the group's */
	int64_t job;
	int attempt, node_rank;
	bool restore;
	char tag[MODEL_CKPT_TAG_MAX];
	int64_t step;
	char *tagdir;  /* upload: CKPT_DIR/TAG */
	char *stage;   /* upload: WORK/ckpt-stage/JOB.ATTEMPT.TAG */
	char *store;   /* STORE/JOB/TAG/aATTEMPT/nRANK */
	char *ckptdir; /* restore: CKPT_DIR */
	bool chown;
	uint32_t uid, gid;
	int64_t rate; /* upload: bytes a second at most (0: no limit) */
	enum ckpt_marker marker;
	int nnodes;
	bool sweep; /* STORE/JOB/ of what it need not keep */
	char *jobdir;
	int nkeep;
	char (*keep_tag)[MODEL_CKPT_TAG_MAX];
	int *keep_attempt;
	int64_t oldest_kept;
	int removed;
	struct cfile *files;
	size_t nfiles, files_alloc;
	/* the outcome */
	char err[MODEL_REASON_MAX];
	char digest[MODEL_DIGEST_MAX];
	int64_t bytes, dur_ms;
	/* upload: the tag's files' first birth and last change (ns; born 0:
	 * the filesystem keeps no birth times): how long the job took to
	 * write it */
	int64_t born_ns, changed_ns;
};

static void fail(struct ckjob *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct ckjob *k, const char *fmt, ...)
{
	if (k->err[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(k->err, sizeof(k->err), fmt, ap);
	va_end(ap);
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Makes every folder of rel's parent under root (a real folder). */
static int mkdirs_for(const char *root, const char *rel)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
	char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	return tk_mkdir_p(path, 0700);
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* An upload's pace: at most rate bytes a second since start_ms. */
struct throttle {
	int64_t rate;
	int64_t start_ms;
	int64_t bytes;
};

static void throttle_wait(struct throttle *th, ssize_t n)
{
	if (!th || th->rate <= 0)
		return;
	th->bytes += n;
	int64_t due = th->start_ms + th->bytes * 1000 / th->rate, now = tk_mono_ms();
	if (due > now)
		usleep((useconds_t)MIN(due - now, 10000) * 1000);
}

/* Copies fd_in to fd_out (when >= 0) and hashes what passed, at the pace
 * of th (NULL: as fast as it goes). */
static int copy_hash_at(int in, int out, char sha[65], int64_t *ret_bytes, struct throttle *th)
{
	gnutls_hash_hd_t h;
	if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
		return -ENOMEM;
	char *buf = xmalloc(CKPT_BUF);
	int64_t total = 0;
	int r = 0;
	for (;;) {
		ssize_t n = read(in, buf, CKPT_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		gnutls_hash(h, buf, (size_t)n);
		total += n;
		for (ssize_t off = 0; out >= 0 && off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				r = -errno;
				goto done;
			}
			off += w;
		}
		if (out >= 0)
			throttle_wait(th, n);
	}
done:
	free(buf);
	unsigned char d[32];
	gnutls_hash_deinit(h, d);
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		sha[2 * i] = hex[d[i] >> 4];
		sha[2 * i + 1] = hex[d[i] & 15];
	}
	sha[64] = '\0';
	*ret_bytes = total;
	return r;
}

static int copy_hash(int in, int out, char sha[65], int64_t *ret_bytes)
{
	return copy_hash_at(in, out, sha, ret_bytes, NULL);
}

/* The entries of the folder dfd (which stays open), or NULL. */
static DIR *dir_of(int dfd)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* Removes name under dirfd and all below it, following no link. */
static void rm_tree_at(int dfd, const char *name, int depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (!S_ISDIR(st.st_mode) || depth > CKPT_MAX_DEPTH) {
		unlinkat(dfd, name, 0);
		return;
	}
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		if (d) {
			struct dirent *de;
			while ((de = readdir(d)))
				if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
					rm_tree_at(dirfd(d), de->d_name, depth + 1);
			closedir(d);
		} else {
			close(fd);
		}
	}
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void rm_tree(const char *path)
{
	rm_tree_at(AT_FDCWD, path, 0);
}

/* ---- writers ---------------------------------------------------------------------- */

/* Is a file under dir (a real path, no trailing slash) open for writing by
 * any process of this host? Names the first one found in why. */
static bool open_for_writing(const char *dir, char *why, size_t n)
{
	DIR *procs = opendir("/proc");
	if (!procs)
		return false;
	size_t dl = strlen(dir);
	bool found = false;
	struct dirent *p;
	while (!found && (p = readdir(procs))) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		long pid = strtol(p->d_name, NULL, 10);
		char fds[64];
		snprintf(fds, sizeof(fds), "/proc/%ld/fd", pid);
		DIR *d = opendir(fds);
		if (!d)
			continue;
		struct dirent *f;
		while (!found && (f = readdir(d))) {
			if (f->d_name[0] == '.')
				continue;
			long fdn = strtol(f->d_name, NULL, 10);
			char link[MODEL_MAX_PATH], path[128];
			snprintf(path, sizeof(path), "%s/%ld", fds, fdn);
			ssize_t len = readlink(path, link, sizeof(link) - 1);
			if (len <= (ssize_t)dl || strncmp(link, dir, dl) != 0 || link[dl] != '/')
				continue;
			link[len] = '\0';
			snprintf(path, sizeof(path), "/proc/%ld/fdinfo/%ld", pid, fdn);
			char *info = NULL;
			if (tk_read_file(path, 4096, &info, NULL) < 0)
				continue;
			const char *fl = strstr(info, "flags:");
			unsigned long flags = fl ? strtoul(fl + 6, NULL, 8) : 0;
			free(info);
			if ((flags & O_ACCMODE) != O_RDONLY) {
				snprintf(why, n, "%.160s is still open for writing (pid %ld)",
					 link + dl + 1, pid);
				found = true;
			}
		}
		closedir(d);
	}
	closedir(procs);
	return found;
}

/* ---- upload ----------------------------------------------------------------------- */

static void add_file(struct ckjob *k, const char *rel, const struct stat *st)
{
	xgrow(&k->files, &k->files_alloc, k->nfiles + 1, sizeof(*k->files));
	struct cfile *f = &k->files[k->nfiles++];
	memset(f, 0, sizeof(*f));
	f->path = xstrdup(rel);
	f->size = st->st_size;
	f->mtime_ns = mtime_ns(st);
}

/* Freezes the folder dirfd (the tag's rel, "" at its top): each entry
 * opened without following links, regular files hard-linked into the
 * staging folder. */
static void freeze(struct ckjob *k, int dfd, const char *rel, int depth)
{
	if (depth > CKPT_MAX_DEPTH) {
		fail(k, "%s/%s: folders nested deeper than %d", k->tag, rel, CKPT_MAX_DEPTH);
		return;
	}
	DIR *d = dir_of(dfd);
	if (!d) {
		fail(k, "%s/%s: cannot read: %s", k->tag, rel, strerror(errno));
		return;
	}
	struct dirent *de;
	while (!k->err[0] && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *sub =
			rel[0] ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			fail(k, "%s/%s: %s", k->tag, sub, strerror(errno));
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			fail(k, "%s/%s is a symbolic link: a tag holds regular files only", k->tag,
			     sub);
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int cfd = openat(dfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				fail(k, "%s/%s: %s", k->tag, sub, strerror(errno));
				break;
			}
			freeze(k, cfd, sub, depth + 1);
			close(cfd);
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			fail(k, "%s/%s is not a regular file", k->tag, sub);
			break;
		}
		if (k->nfiles >= CKPT_MAX_FILES) {
			fail(k, "%s: more than %d files", k->tag, CKPT_MAX_FILES);
			break;
		}
		int ffd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat fst;
		if (ffd < 0 || fstat(ffd, &fst) < 0 || !S_ISREG(fst.st_mode) ||
		    fst.st_ino != st.st_ino) {
			fail(k, "%s/%s changed while it was frozen", k->tag, sub);
			if (ffd >= 0)
				close(ffd);
			break;
		}
		struct statx sx;
		if (statx(ffd, "", AT_EMPTY_PATH, STATX_BTIME | STATX_MTIME, &sx) == 0) {
			int64_t mt =
				(int64_t)sx.stx_mtime.tv_sec * 1000000000 + sx.stx_mtime.tv_nsec;
			k->changed_ns = MAX(k->changed_ns, mt);
			if (sx.stx_mask & STATX_BTIME) {
				int64_t bt = (int64_t)sx.stx_btime.tv_sec * 1000000000 +
					     sx.stx_btime.tv_nsec;
				k->born_ns = k->born_ns ? MIN(k->born_ns, bt) : bt;
			}
		}
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ffd);
		_cleanup_free_ char *staged = xasprintf("%s/%s", k->stage, sub);
		int r = mkdirs_for(k->stage, sub);
		if (r == 0 && linkat(AT_FDCWD, proc, AT_FDCWD, staged, AT_SYMLINK_FOLLOW) < 0)
			r = -errno;
		close(ffd);
		if (r < 0) {
			fail(k, "%s/%s: cannot stage it: %s", k->tag, sub, strerror(-r));
			break;
		}
		add_file(k, sub, &fst);
	}
	closedir(d);
}

/* Writes data to dest/rel through a temporary name, fsynced, renamed, the
 * folder fsynced. */
static int put_file(const char *dest, const char *rel, int in, char sha[65], int64_t *bytes,
		    struct throttle *th)
{
	int r = mkdirs_for(dest, rel);
	if (r < 0)
		return r;
	_cleanup_free_ char *final = xasprintf("%s/%s", dest, rel);
	_cleanup_free_ char *tmp = xasprintf("%s.tenk-tmp", final);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	r = copy_hash_at(in, out, sha, bytes, th);
	if (r == 0 && fsync(out) < 0)
		r = -errno;
	if (close(out) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, final) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	char *slash = strrchr(final, '/');
	*slash = '\0';
	return fsync_dir(final);
}

/* The size of dest/rel, or -1 when it is not there. */
static int64_t stored_size(const char *dest, const struct cfile *f)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dest, f->path);
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
}

/* Is dest/rel already a whole copy of f (an upload resumed)? */
static bool have_copy(const char *dest, const struct cfile *f)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dest, f->path);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	char sha[65];
	int64_t n;
	bool same = fstat(fd, &st) == 0 && st.st_size == f->size &&
		    copy_hash(fd, -1, sha, &n) == 0 && strcmp(sha, f->sha) == 0;
	close(fd);
	return same;
}

static json_t *manifest_pack(const struct ckjob *k)
{
	json_t *files = json_array();
	for (size_t i = 0; i < k->nfiles; i++)
		json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "path", k->files[i].path,
						       "size", (json_int_t)k->files[i].size,
						       "sha256", k->files[i].sha));
	return json_pack("{s:I, s:i, s:i, s:s, s:I, s:o}", "job", (json_int_t)k->job, "attempt",
			 k->attempt, "node_rank", k->node_rank, "tag", k->tag, "step",
			 (json_int_t)k->step, "files", files);
}

static void upload_work(uv_work_t *w)
{
	struct ckjob *k = w->data;
	int64_t t0 = tk_mono_ms();
	char why[MODEL_REASON_MAX];
	if (open_for_writing(k->tagdir, why, sizeof(why))) {
		fail(k, "%s/%s", k->tag, why);
		return;
	}
	rm_tree(k->stage);
	int r = tk_mkdir_p(k->stage, 0700);
	int dfd = open(k->tagdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r < 0 || dfd < 0) {
		fail(k, "%s: cannot open it: %s", k->tag, strerror(r < 0 ? -r : errno));
		if (dfd >= 0)
			close(dfd);
		return;
	}
	freeze(k, dfd, "", 0);
	close(dfd);
	/* one pass a file: copied and hashed together (a resumed upload hashes
	 * what the store holds first); the frozen file must not have changed */
	struct throttle th = {.rate = k->rate, .start_ms = tk_mono_ms()};
	for (size_t i = 0; !k->err[0] && i < k->nfiles; i++) {
		struct cfile *f = &k->files[i];
		_cleanup_free_ char *staged = xasprintf("%s/%s", k->stage, f->path);
		int fd = open(staged, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		int64_t n = 0;
		bool skip = false;
		if (fd >= 0 && stored_size(k->store, f) == f->size) {
			r = copy_hash(fd, -1, f->sha, &n);
			skip = r == 0 && n == f->size && have_copy(k->store, f);
			if (!skip && lseek(fd, 0, SEEK_SET) < 0)
				r = -errno;
		}
		r = fd < 0 ? -errno : skip ? 0 : put_file(k->store, f->path, fd, f->sha, &n, &th);
		struct stat st;
		if (r < 0)
			fail(k, "cannot write %s/%s: %s", k->store, f->path, strerror(-r));
		else if (fstat(fd, &st) < 0 || st.st_size != f->size || n != f->size ||
			 mtime_ns(&st) != f->mtime_ns)
			fail(k, "%s/%s changed while it was frozen", k->tag, f->path);
		if (!skip)
			k->bytes += n;
		if (fd >= 0)
			close(fd);
	}
	if (!k->err[0] && open_for_writing(k->tagdir, why, sizeof(why)))
		fail(k, "%s/%s", k->tag, why);
	if (!k->err[0]) {
		json_t *m = manifest_pack(k);
		char *text = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(m);
		char sha[65];
		tk_sha256_hex(text, strlen(text), sha);
		snprintf(k->digest, sizeof(k->digest), "sha256:%s", sha);
		_cleanup_free_ char *path = xasprintf("%s/%s", k->store, CKPT_MANIFEST);
		if ((r = tk_write_file(path, text, strlen(text), 0600)) < 0 ||
		    (r = fsync_dir(k->store)) < 0)
			fail(k, "cannot write %s: %s", path, strerror(-r));
		free(text);
	}
	rm_tree(k->stage);
	k->dur_ms = tk_mono_ms() - t0;
}

/* ---- restore ---------------------------------------------------------------------- */

static bool rel_path_ok(const char *p)
{
	if (!*p || *p == '/' || strlen(p) >= MODEL_MAX_PATH / 2)
		return false;
	for (const char *c = p; *c;) {
		const char *end = strchr(c, '/');
		size_t n = end ? (size_t)(end - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n + (end ? 1 : 0);
	}
	return true;
}

/* The manifest of the node's part in folder `part` of the store, parsed;
 * NULL (and *ret_r) when it cannot be read or is no JSON. */
static json_t *manifest_load(const char *part, int *ret_r)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", part, CKPT_MANIFEST);
	char *text = NULL;
	int r = tk_read_file(path, 64 << 20, &text, NULL);
	json_error_t jerr;
	json_t *m = r < 0 ? NULL : json_loads(text, 0, &jerr);
	free(text);
	if (ret_r)
		*ret_r = r < 0 ? r : m ? 0 : -EINVAL;
	return m;
}

/* Reads STORE/.../manifest.json into k->files. */
static int read_manifest(struct ckjob *k)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", k->store, CKPT_MANIFEST);
	int r;
	json_t *m = manifest_load(k->store, &r);
	if (r < 0 && r != -EINVAL) { /* no JSON: said below, as no manifest */
		fail(k, "cannot read %s: %s", path, strerror(-r));
		return r;
	}
	json_t *files = m ? json_object_get(m, "files") : NULL;
	if (!json_is_array(files) || json_array_size(files) > CKPT_MAX_FILES) {
		json_decref(m);
		fail(k, "%s: not a manifest", path);
		return -EINVAL;
	}
	size_t i;
	json_t *v;
	json_array_foreach (files, i, v) {
		const char *p = json_string_value(json_object_get(v, "path"));
		const char *sha = json_string_value(json_object_get(v, "sha256"));
		json_t *size = json_object_get(v, "size");
		if (!p || !rel_path_ok(p) || !sha || strlen(sha) != 64 || !json_is_integer(size) ||
		    json_integer_value(size) < 0) {
			json_decref(m);
			fail(k, "%s: files[%zu] is not a file of a tag", path, i);
			return -EINVAL;
		}
		struct stat st = {.st_size = (off_t)json_integer_value(size)};
		add_file(k, p, &st);
		snprintf(k->files[k->nfiles - 1].sha, 65, "%s", sha);
	}
	json_decref(m);
	return 0;
}

/* Opens rel under dirfd following no link on the way. */
static int open_beneath(int dfd, const char *rel, int flags)
{
	_cleanup_free_ char *copy = xstrdup(rel);
	int fd = dup(dfd);
	char *save = NULL;
	char *part = strtok_r(copy, "/", &save);
	while (part && fd >= 0) {
		char *next = strtok_r(NULL, "/", &save);
		int nfd = openat(fd, part,
				 (next ? O_RDONLY | O_DIRECTORY : flags) | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
		part = next;
	}
	return fd;
}

/* Does CKPT_DIR/TAG hold an intact copy of every file of the manifest? */
static bool intact(struct ckjob *k, int ckfd)
{
	int tfd = openat(ckfd, k->tag, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0)
		return false;
	bool ok = true;
	for (size_t i = 0; ok && i < k->nfiles; i++) {
		int fd = open_beneath(tfd, k->files[i].path, O_RDONLY);
		struct stat st;
		char sha[65];
		int64_t n;
		ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		     st.st_size == k->files[i].size && copy_hash(fd, -1, sha, &n) == 0 &&
		     strcmp(sha, k->files[i].sha) == 0;
		if (fd >= 0)
			close(fd);
	}
	close(tfd);
	return ok;
}

/* Makes the folders of rel's parent under dirfd (no link followed) and
 * returns the parent's descriptor. */
static int parent_beneath(int dfd, const char *rel, const char **leaf)
{
	_cleanup_free_ char *copy = xstrdup(rel);
	char *slash = strrchr(copy, '/');
	*leaf = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	int fd = dup(dfd);
	if (!slash)
		return fd;
	*slash = '\0';
	char *save = NULL;
	for (char *part = strtok_r(copy, "/", &save); part && fd >= 0;
	     part = strtok_r(NULL, "/", &save)) {
		if (mkdirat(fd, part, 0700) < 0 && errno != EEXIST) {
			close(fd);
			return -1;
		}
		int nfd = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = nfd;
	}
	return fd;
}

static void chown_tree(int dfd, uint32_t uid, uint32_t gid, int depth)
{
	if (fchown(dfd, uid, gid) < 0)
		return;
	DIR *d = dir_of(dfd);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fchownat(dfd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int cfd = depth < CKPT_MAX_DEPTH
				  ? openat(dfd, de->d_name,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
				  : -1;
		if (cfd >= 0) {
			chown_tree(cfd, uid, gid, depth + 1);
			close(cfd);
		}
	}
	closedir(d);
}

/* Writes name beside the tags (replacing it whole), owned by the job's user. */
static void pointer_write(struct ckjob *k, int ckfd, const char *name, const char *text)
{
	char tmp[96];
	snprintf(tmp, sizeof(tmp), ".%s.tenk-tmp", name);
	unlinkat(ckfd, tmp, 0);
	int fd = openat(ckfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) < 0 ||
	    (k->chown && fchown(fd, k->uid, k->gid) < 0) || renameat(ckfd, tmp, ckfd, name) < 0)
		fail(k, "cannot write %s: %s", name, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* After a restore: the framework's pointer to the tag, and for DCP the
 * .metadata its coordinator wrote on one node only. */
static void restore_extras(struct ckjob *k, int ckfd)
{
	char text[64];
	if (k->marker == CKPT_DEEPSPEED) {
		pointer_write(k, ckfd, "latest", k->tag);
	} else if (k->marker == CKPT_MEGATRON) {
		snprintf(text, sizeof(text), "%lld", (long long)k->step);
		pointer_write(k, ckfd, "latest_checkpointed_iteration.txt", text);
	}
	if (k->marker != CKPT_DCP)
		return;
	_cleanup_free_ char *rel = xasprintf("%s/.metadata", k->tag);
	struct stat st;
	if (fstatat(ckfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	/* the part of the node that has it: its manifest names its hash */
	for (int r = 0; r < k->nnodes; r++) {
		_cleanup_free_ char *part = xasprintf(
			"%.*s/n%d", (int)(strrchr(k->store, '/') - k->store), k->store, r);
		json_t *m = manifest_load(part, NULL);
		if (!m)
			continue;
		const char *want = NULL;
		size_t i;
		json_t *v;
		json_array_foreach (json_object_get(m, "files"), i, v)
			if (json_string_value(json_object_get(v, "path")) &&
			    strcmp(json_string_value(json_object_get(v, "path")), ".metadata") == 0)
				want = json_string_value(json_object_get(v, "sha256"));
		int in = -1, tfd = -1, out = -1;
		_cleanup_free_ char *src = xasprintf("%s/.metadata", part);
		if (want && (in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
		    (tfd = openat(ckfd, k->tag, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >=
			    0 &&
		    (out = openat(tfd, ".metadata",
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) >=
			    0) {
			char sha[65];
			int64_t n;
			if (copy_hash(in, out, sha, &n) < 0 || strcmp(sha, want) != 0) {
				fail(k, "%s/.metadata of node %d does not match its hash", k->tag,
				     r);
				unlinkat(tfd, ".metadata", 0);
			} else {
				k->bytes += n;
				if (k->chown && fchown(out, k->uid, k->gid) < 0)
					fail(k, "cannot give %s/.metadata to its user", k->tag);
			}
		}
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		if (tfd >= 0)
			close(tfd);
		json_decref(m);
		if (want)
			return;
	}
	fail(k, "%s: no node's part holds DCP's .metadata", k->tag);
}

static void restore_work(uv_work_t *w)
{
	struct ckjob *k = w->data;
	int64_t t0 = tk_mono_ms();
	if (read_manifest(k) < 0)
		goto out;
	int ckfd = open(k->ckptdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ckfd < 0) {
		fail(k, "cannot open %s: %s", k->ckptdir, strerror(errno));
		goto out;
	}
	if (intact(k, ckfd)) {
		restore_extras(k, ckfd);
		close(ckfd);
		goto out; /* its own copy: nothing moves */
	}
	char tmp[MODEL_CKPT_TAG_MAX + 32];
	snprintf(tmp, sizeof(tmp), ".tenk-restore-%s", k->tag);
	rm_tree_at(ckfd, tmp, 0);
	if (mkdirat(ckfd, tmp, 0700) < 0) {
		fail(k, "cannot make %s/%s: %s", k->ckptdir, tmp, strerror(errno));
		close(ckfd);
		goto out;
	}
	int tfd = openat(ckfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (size_t i = 0; !k->err[0] && tfd >= 0 && i < k->nfiles; i++) {
		const struct cfile *f = &k->files[i];
		_cleanup_free_ char *src = xasprintf("%s/%s", k->store, f->path);
		int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		const char *leaf;
		int pfd = parent_beneath(tfd, f->path, &leaf);
		int out = pfd >= 0 ? openat(pfd, leaf,
					    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
					    0600)
				   : -1;
		char sha[65];
		int64_t n = 0;
		if (in < 0 || out < 0)
			fail(k, "%s/%s: %s", k->tag, f->path,
			     in < 0 ? "missing from the store" : "cannot write it here");
		else if (copy_hash(in, out, sha, &n) < 0 || fsync(out) < 0)
			fail(k, "%s/%s: cannot copy it: %s", k->tag, f->path, strerror(errno));
		else if (n != f->size || strcmp(sha, f->sha) != 0)
			fail(k, "%s/%s does not match its hash: the store's copy is damaged",
			     k->tag, f->path);
		k->bytes += n;
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
		if (pfd >= 0)
			close(pfd);
	}
	if (tfd < 0)
		fail(k, "cannot open %s/%s", k->ckptdir, tmp);
	if (!k->err[0]) {
		if (k->chown)
			chown_tree(tfd, k->uid, k->gid, 0);
		fsync(tfd);
		rm_tree_at(ckfd, k->tag, 0); /* a damaged or partial copy, or a link */
		if (renameat(ckfd, tmp, ckfd, k->tag) < 0)
			fail(k, "cannot move the restored %s into place: %s", k->tag,
			     strerror(errno));
		fsync(ckfd);
	} else {
		rm_tree_at(ckfd, tmp, 0);
	}
	if (tfd >= 0)
		close(tfd);
	if (!k->err[0])
		restore_extras(k, ckfd);
	close(ckfd);
out:
	k->dur_ms = tk_mono_ms() - t0;
}

/* ---- on the loop ------------------------------------------------------------------ */

/* The step a part's manifest names (any node's), or -1 when none is there. */
static int64_t prefix_step(const char *prefix)
{
	DIR *d = opendir(prefix);
	if (!d)
		return -1;
	int64_t step = -1;
	struct dirent *de;
	while (step < 0 && (de = readdir(d))) {
		if (de->d_name[0] != 'n')
			continue;
		_cleanup_free_ char *part = xasprintf("%s/%s", prefix, de->d_name);
		json_t *m = manifest_load(part, NULL);
		json_t *st = json_object_get(m, "step");
		if (json_is_integer(st))
			step = json_integer_value(st);
		json_decref(m);
	}
	closedir(d);
	return step;
}

/* Removes from STORE/JOB what no commit kept needs: the parts of older
 * attempts not kept, and the current attempt's parts of steps older than
 * the oldest kept (what retention dropped); never an upload under way of
 * the current attempt (no manifest yet, or a step not older). */
static void sweep_work(uv_work_t *w)
{
	struct ckjob *k = w->data;
	DIR *tags = opendir(k->jobdir);
	if (!tags)
		return;
	struct dirent *t;
	while ((t = readdir(tags))) {
		if (!model_ckpt_tag_valid(t->d_name))
			continue;
		_cleanup_free_ char *tagdir = xasprintf("%s/%s", k->jobdir, t->d_name);
		DIR *atts = opendir(tagdir);
		if (!atts)
			continue;
		struct dirent *a;
		while ((a = readdir(atts))) {
			char *end;
			long n = a->d_name[0] == 'a' ? strtol(a->d_name + 1, &end, 10) : -1;
			if (n < 1 || *end)
				continue;
			bool kept = false;
			for (int i = 0; i < k->nkeep && !kept; i++)
				kept = k->keep_attempt[i] == n &&
				       strcmp(k->keep_tag[i], t->d_name) == 0;
			if (kept || n > k->attempt)
				continue;
			_cleanup_free_ char *prefix = xasprintf("%s/%s", tagdir, a->d_name);
			if (n == k->attempt) {
				int64_t st = prefix_step(prefix);
				if (st < 0 || st >= k->oldest_kept)
					continue;
			}
			rm_tree(prefix);
			k->removed++;
		}
		closedir(atts);
		rmdir(tagdir); /* once empty */
	}
	closedir(tags);
}

static void ckjob_free(struct ckjob *k)
{
	free(k->jobdir);
	free(k->keep_tag);
	free(k->keep_attempt);
	for (size_t i = 0; i < k->nfiles; i++)
		free(k->files[i].path);
	free(k->files);
	free(k->tagdir);
	free(k->stage);
	free(k->store);
	free(k->ckptdir);
	free(k);
}

static void report(struct taskgroup *g, const struct ckjob *k)
{
	struct task_event ev = {
		.job = g->job,
		.attempt = g->attempt,
		.rank = g->tasks[0].rank,
		.type = k->restore ? TASK_EVENT_RESTORED : TASK_EVENT_CHECKPOINT,
		.at_ms = tk_wall_ms(),
		.step = k->step,
		.bytes = k->bytes,
		.dur_ms = k->dur_ms,
		/* from its first file's birth to its last change */
		.write_ms = !k->restore && k->born_ns && k->changed_ns > k->born_ns
				    ? (k->changed_ns - k->born_ns) / 1000000
				    : 0,
	};
	snprintf(ev.tag, sizeof(ev.tag), "%s", k->tag);
	snprintf(ev.digest, sizeof(ev.digest), "%s", k->digest);
	snprintf(ev.detail, sizeof(ev.detail), "%s", k->err);
	group_emit(g, &ev);
}

static void ckpt_kick(struct agent *a);

static void after_cb(uv_work_t *w, int status)
{
	struct ckjob *k = w->data;
	struct agent *a = k->a;
	a->ckpt_busy = false;
	struct taskgroup *g = tk_map_get(&a->groups, k->key);
	if (!g || g->attempt != k->attempt || status < 0) {
		ckjob_free(k);
		ckpt_kick(a);
		agent_stop_check(a);
		return;
	}
	if (k->sweep) {
		log_debug("job %lld: swept the store, %d part(s) removed", (long long)g->job,
			  k->removed);
		if (k->removed)
			log_info("job %lld: %d checkpoint part(s) no commit needs removed from the "
				 "store",
				 (long long)g->job, k->removed);
	} else if (k->restore) {
		g->ckpt.restore_running = false;
		if (k->err[0])
			log_warn("job %lld.%d: restore of %s failed: %s", (long long)g->job,
				 g->attempt, k->tag, k->err);
		else
			log_info("job %lld.%d: %s restored (%lld bytes from the store) in %lld ms",
				 (long long)g->job, g->attempt, k->tag, (long long)k->bytes,
				 (long long)k->dur_ms);
		snprintf(g->ckpt.restored_tag, sizeof(g->ckpt.restored_tag), "%s", k->tag);
		report(g, k);
	} else {
		g->ckpt.uploading = false;
		g->ckpt.done_step = MAX(g->ckpt.done_step, k->step);
		if (k->err[0]) {
			log_warn("job %lld.%d: checkpoint %s not uploaded: %s", (long long)g->job,
				 g->attempt, k->tag, k->err);
		} else {
			log_info("job %lld.%d: checkpoint %s (step %lld) uploaded, %lld bytes in "
				 "%lld ms",
				 (long long)g->job, g->attempt, k->tag, (long long)k->step,
				 (long long)k->bytes, (long long)k->dur_ms);
			report(g, k);
		}
	}
	ckjob_free(k);
	group_ckpt_news(g); /* a drained group goes (once its report is acknowledged) */
	ckpt_kick(a);
	agent_stop_check(a);
}

/* The part of node rank store_node (-1: this node's own). */
static struct ckjob *ckjob_new(struct taskgroup *g, const char *tag, int64_t step,
			       int store_attempt, int store_node)
{
	struct ckjob *k = xcalloc(1, sizeof(*k));
	k->a = g->a;
	snprintf(k->key, sizeof(k->key), "%s", g->key);
	k->job = g->job;
	k->attempt = g->attempt;
	k->node_rank = g->node_rank;
	snprintf(k->tag, sizeof(k->tag), "%s", tag);
	k->step = step;
	k->store = xasprintf("%s/%lld/%s/a%d/n%d", g->ckpt.store, (long long)g->job, tag,
			     store_attempt, store_node >= 0 ? store_node : g->node_rank);
	k->w.data = k;
	return k;
}

/* The step a tag's marker names, or -1 when it has none (not complete) or
 * one written before since_ns (by an attempt before this one). */
static int64_t marker_step(int ckfd, const char *tag, int64_t since_ns)
{
	_cleanup_free_ char *rel = xasprintf("%s/%s", tag, CKPT_MARKER);
	int fd = openat(ckfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || mtime_ns(&st) < since_ns) {
		close(fd);
		return -1;
	}
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	json_error_t jerr;
	json_t *j = json_loads(buf, 0, &jerr);
	json_t *s = j ? json_object_get(j, "step") : NULL;
	int64_t step =
		json_is_integer(s) && json_integer_value(s) >= 0 ? json_integer_value(s) : -1;
	json_decref(j);
	return step;
}

/* A small file beside the tags (a framework's pointer), as text, when
 * written since since_ns; NULL otherwise. */
static char *pointer_read(int ckfd, const char *name, int64_t since_ns)
{
	int fd = openat(ckfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	char buf[256];
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && mtime_ns(&st) >= since_ns)
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	tk_strip(buf);
	return xstrdup(buf);
}

/* Is TAG a folder here (no link)? */
static bool tag_here(int ckfd, const char *tag)
{
	struct stat st;
	return model_ckpt_tag_valid(tag) && fstatat(ckfd, tag, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* The step of a DCP tag whose .metadata was written since since_ns. */
static int64_t dcp_step(int ckfd, const char *tag, int64_t since_ns)
{
	_cleanup_free_ char *rel = xasprintf("%s/.metadata", tag);
	struct stat st;
	if (fstatat(ckfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    mtime_ns(&st) < since_ns)
		return -1;
	return model_ckpt_tag_step(tag);
}

/* The newest complete tag of g not yet uploaded, by the job's marker;
 * false when none. */
static bool newest_tag(struct taskgroup *g, char *tag, size_t n, int64_t *step)
{
	int ckfd = open(g->ckpt.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ckfd < 0)
		return false;
	bool found = false;
	*step = g->ckpt.done_step;
	if (g->ckpt.marker == CKPT_DEEPSPEED || g->ckpt.marker == CKPT_MEGATRON) {
		bool ds = g->ckpt.marker == CKPT_DEEPSPEED;
		char *p = pointer_read(ckfd, ds ? "latest" : "latest_checkpointed_iteration.txt",
				       g->ckpt.since_ns);
		char name[MODEL_CKPT_TAG_MAX] = "";
		int64_t s = -1;
		if (p && ds) {
			snprintf(name, sizeof(name), "%.127s", p);
			s = model_ckpt_tag_step(name);
		} else if (p && tk_parse_int64(p, 0, INT64_MAX / 2, &s) == 0) {
			snprintf(name, sizeof(name), "iter_%07lld", (long long)s);
		}
		free(p);
		if (s > *step && tag_here(ckfd, name)) {
			*step = s;
			snprintf(tag, n, "%s", name);
			found = true;
		}
		close(ckfd);
		return found;
	}
	/* DCP: what the server says another node uploaded is complete here too */
	for (int i = 0; g->ckpt.marker == CKPT_DCP && i < g->ckpt.nmarked; i++)
		if (g->ckpt.marked_step[i] > *step && tag_here(ckfd, g->ckpt.marked[i])) {
			*step = g->ckpt.marked_step[i];
			snprintf(tag, n, "%s", g->ckpt.marked[i]);
			found = true;
		}
	DIR *d = dir_of(ckfd);
	struct dirent *de;
	int seen = 0;
	while (d && (de = readdir(d)) && seen++ < 4096) {
		if (!model_ckpt_tag_valid(de->d_name) || de->d_type == DT_LNK)
			continue;
		int64_t s = g->ckpt.marker == CKPT_DCP
				    ? dcp_step(ckfd, de->d_name, g->ckpt.since_ns)
				    : marker_step(ckfd, de->d_name, g->ckpt.since_ns);
		if (s > *step) {
			*step = s;
			snprintf(tag, n, "%.127s", de->d_name);
			found = true;
		}
	}
	if (d)
		closedir(d);
	close(ckfd);
	return found;
}

/* Starts the next checkpoint work of the agent's, if it has none running:
 * a restore first (a start waits on it), else the newest tag to upload. */
static void ckpt_kick(struct agent *a)
{
	if (a->ckpt_busy || a->stopping)
		return;
	size_t pos = 0;
	void *v;
	struct ckjob *k = NULL;
	while (!k && tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		/* (a group whose start waits: one stopped meanwhile restores nothing) */
		if (g->ckpt.store && g->ckpt.hold_restore && g->state < GROUP_STARTING &&
		    g->ckpt.restore_tag[0] && !g->ckpt.restore_running &&
		    strcmp(g->ckpt.restored_tag, g->ckpt.restore_tag) != 0) {
			k = ckjob_new(g, g->ckpt.restore_tag, g->ckpt.restore_step,
				      g->ckpt.restore_attempt, g->ckpt.restore_node);
			k->restore = true;
			k->ckptdir = xstrdup(g->ckpt.dir);
			k->chown = g->ckpt.chown;
			k->uid = g->ckpt.uid;
			k->gid = g->ckpt.gid;
			k->marker = g->ckpt.marker;
			k->nnodes = g->nnodes;
			g->ckpt.restore_running = true;
		}
	}
	pos = 0;
	while (!k && tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		char tag[MODEL_CKPT_TAG_MAX];
		int64_t step;
		if (!g->ckpt.store || !group_started(g) || !g->ckpt.dir ||
		    !newest_tag(g, tag, sizeof(tag), &step))
			continue;
		k = ckjob_new(g, tag, step, g->attempt, -1);
		k->rate = a->cfg.ckpt_upload_mib_s * 1024 * 1024;
		g->ckpt.uploading = true;
		if (!g->ckpt.backlog_since_ms)
			g->ckpt.backlog_since_ms = tk_mono_ms();
		k->tagdir = xasprintf("%s/%s", g->ckpt.dir, tag);
		k->stage = xasprintf("%s/ckpt-stage/%lld.%d.%s", a->cfg.work_dir, (long long)g->job,
				     g->attempt, tag);
	}
	/* then, at most once a minute a job, node rank 0 tidies the store */
	pos = 0;
	int64_t now = tk_mono_ms();
	while (!k && tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		if (!g->ckpt.store || g->node_rank != 0 || !g->ckpt.nkeep || !g->listed ||
		    now - g->ckpt.swept_ms < CKPT_SWEEP_MS)
			continue;
		g->ckpt.swept_ms = now;
		k = ckjob_new(g, g->ckpt.keep_tag[0], 0, g->attempt, -1);
		k->sweep = true;
		k->jobdir = xasprintf("%s/%lld", g->ckpt.store, (long long)g->job);
		k->nkeep = g->ckpt.nkeep;
		k->keep_tag = xcalloc((size_t)g->ckpt.nkeep, sizeof(*k->keep_tag));
		k->keep_attempt = xcalloc((size_t)g->ckpt.nkeep, sizeof(*k->keep_attempt));
		k->oldest_kept = INT64_MAX;
		for (int i = 0; i < g->ckpt.nkeep; i++) {
			snprintf(k->keep_tag[i], sizeof(k->keep_tag[i]), "%s", g->ckpt.keep_tag[i]);
			k->keep_attempt[i] = g->ckpt.keep_attempt[i];
			k->oldest_kept = MIN(k->oldest_kept, g->ckpt.keep_step[i]);
		}
	}
	if (!k)
		return;
	a->ckpt_busy = true;
	int r = uv_queue_work(a->loop, &k->w,
			      k->sweep	   ? sweep_work
			      : k->restore ? restore_work
					   : upload_work,
			      after_cb);
	if (r < 0) {
		a->ckpt_busy = false;
		log_err("cannot start checkpoint work: %s", uv_strerror(r));
		ckjob_free(k);
	}
}

static void ckpt_timer_cb(uv_timer_t *t)
{
	struct agent *a = t->data;
	ckpt_kick(a);
	/* a drain ends at its deadline too, with no upload to say so */
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		if (((struct taskgroup *)v)->state == GROUP_UPLOADING)
			group_ckpt_news(v); /* may forget it: the map allows that */
}

void agent__ckpt_start(struct agent *a)
{
	uv_timer_start(&a->ckpt_timer, ckpt_timer_cb, CKPT_SCAN_MS, CKPT_SCAN_MS);
}

void agent__ckpt_item(struct taskgroup *g, const struct work_item *it)
{
	if (!it->ckpt_store[0])
		return;
	if (!g->ckpt.store)
		g->ckpt.store = xstrdup(it->ckpt_store);
	if (!g->ckpt.dir)
		g->ckpt.dir =
			xasprintf("%s/checkpoints/%lld", g->a->cfg.work_dir, (long long)g->job);
	g->ckpt.nmarked = 0;
	for (int i = 0; i < it->nmarked && i < MODEL_MAX_CKPT_PENDING; i++) {
		snprintf(g->ckpt.marked[i], sizeof(g->ckpt.marked[i]), "%s", it->marked[i].tag);
		g->ckpt.marked_step[i] = it->marked[i].step;
		g->ckpt.nmarked++;
	}
	if (g->ckpt.nkeep != it->nkeep ||
	    (it->nkeep &&
	     (strcmp(g->ckpt.keep_tag[g->ckpt.nkeep - 1], it->keep[it->nkeep - 1].tag) != 0 ||
	      g->ckpt.keep_attempt[g->ckpt.nkeep - 1] != it->keep[it->nkeep - 1].attempt)))
		g->ckpt.swept_ms = 0; /* a commit: sweep soon */
	g->ckpt.nkeep = 0;
	for (int i = 0; i < it->nkeep && i < MODEL_MAX_CKPTS; i++) {
		snprintf(g->ckpt.keep_tag[i], sizeof(g->ckpt.keep_tag[i]), "%s", it->keep[i].tag);
		g->ckpt.keep_attempt[i] = it->keep[i].attempt;
		g->ckpt.keep_step[i] = it->keep[i].step;
		g->ckpt.nkeep++;
	}
	if (!g->ckpt.hold_restore)
		return;
	if (it->restore_go) {
		group_restore_go(g);
		return;
	}
	if (strcmp(g->ckpt.restore_tag, it->restore_tag) != 0) {
		/* the first restore, or a fall back to the commit before */
		snprintf(g->ckpt.restore_tag, sizeof(g->ckpt.restore_tag), "%s", it->restore_tag);
		g->ckpt.restore_step = it->restore_step;
		g->ckpt.restore_attempt = it->restore_attempt;
		g->ckpt.restore_node = it->restore_from - 1;
		if (it->restore_from)
			log_info("job %lld.%d: %s has no part of node rank %d; restoring node rank "
				 "%d's",
				 (long long)g->job, g->attempt, it->restore_tag, g->node_rank,
				 it->restore_from - 1);
		ckpt_kick(g->a);
	}
}

bool agent__ckpt_draining(struct taskgroup *g)
{
	if (!g->ckpt.store || !g->ckpt.dir || g->a->stopping)
		return false;
	int64_t now = tk_mono_ms();
	if (!g->ckpt.drain_until_ms)
		g->ckpt.drain_until_ms = now + CKPT_DRAIN_MS;
	if (now >= g->ckpt.drain_until_ms)
		return false;
	char tag[MODEL_CKPT_TAG_MAX];
	int64_t step;
	return g->ckpt.uploading || newest_tag(g, tag, sizeof(tag), &step);
}

int64_t agent__ckpt_backlog_ms(struct taskgroup *g, int64_t now)
{
	if (!g->ckpt.store || !g->ckpt.dir)
		return -1;
	char tag[MODEL_CKPT_TAG_MAX];
	int64_t step;
	if (!g->ckpt.uploading && !(group_started(g) && newest_tag(g, tag, sizeof(tag), &step))) {
		g->ckpt.backlog_since_ms = 0;
		return 0;
	}
	if (!g->ckpt.backlog_since_ms)
		g->ckpt.backlog_since_ms = now;
	return now - g->ckpt.backlog_since_ms;
}

void agent__ckpt_group_release(struct taskgroup *g)
{
	free(g->ckpt.store);
	free(g->ckpt.dir);
	g->ckpt.store = g->ckpt.dir = NULL;
}
