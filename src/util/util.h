/*
 * util: the small helpers every part of tenk shares, and nothing else.
 *
 * Memory: x*alloc abort on exhaustion, so callers never test for NULL.
 * Errors: functions return >= 0 on success and -errno on failure; text for a
 * person goes into a caller's struct tk_error. Cleanup: _cleanup_free_ and
 * TAKE_PTR() let a function free its locals on every path exactly once.
 */
#pragma once

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- memory ---------------------------------------------------------- */

/* Each returns memory the caller frees with free(); none returns NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
/* Grows *p (holding *alloc elements of size `size`) to hold at least `need`. */
void xgrow(void *p, size_t *alloc, size_t need, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define _cleanup_(f) __attribute__((cleanup(f)))
static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)
/* Hands the pointer's ownership on and leaves NULL behind. */
#define TAKE_PTR(p)                                                                                \
	__extension__({                                                                            \
		__typeof__(p) _ptr_ = (p);                                                         \
		(p) = NULL;                                                                        \
		_ptr_;                                                                             \
	})
/* tenk's version, as `tenk version` prints it and validation compares it */
#define TENK_VERSION "0.2.0"
/* the build: `git describe` of its tree (version.c.in) */
extern const char tk_build[];
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* Copies src into dst of size n, always NUL-terminated; returns -ENAMETOOLONG
 * (and copies nothing) when src does not fit. */
int tk_strlcpy(char *dst, const char *src, size_t n);

/* ---- errors ---------------------------------------------------------- */

/* Room for a message naming two paths and saying what to do (a path under
 * a test's or an operator's deep folder passes 200 characters). */
struct tk_error {
	char text[1024];
};

/* Writes the message into err (which may be NULL) and returns code, so that
 * `return tk_errorf(err, -EINVAL, "...")` reads as one step. */
int tk_errorf(struct tk_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- growing string ---------------------------------------------------- */

/* A NUL-terminated byte buffer that grows. buf is never NULL after init. */
struct strbuf {
	char *buf;
	size_t len;
	size_t alloc;
};

void strbuf_init(struct strbuf *sb);
void strbuf_release(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb);
void strbuf_add(struct strbuf *sb, const void *data, size_t n);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
/* Returns the buffer for the caller to free and leaves sb empty. */
char *strbuf_detach(struct strbuf *sb);

/* ---- string map ------------------------------------------------------- */

/* Open-addressing hash map from NUL-terminated string keys to pointers. Keys
 * are borrowed: they must live as long as their entry (store them in the
 * value). */
struct tk_map {
	struct tk_map_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
	size_t used; /* live + deleted slots */
};

void tk_map_init(struct tk_map *m);
void tk_map_release(struct tk_map *m);
void *tk_map_get(const struct tk_map *m, const char *key);
/* Inserts or replaces; returns the previous value or NULL. */
void *tk_map_put(struct tk_map *m, const char *key, void *value);
/* Removes and returns the value, or NULL when absent. */
void *tk_map_del(struct tk_map *m, const char *key);
/* Visits every entry; `pos` starts at 0. Returns false when done. */
bool tk_map_next(const struct tk_map *m, size_t *pos, const char **ret_key, void **ret_value);

/* ---- parsing of user input -------------------------------------------- */

/* Whole-string decimal integer within [min, max]. */
int tk_parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret);
/* A size with an optional binary suffix K, M, G, T (KiB..TiB, "B" or "iB"
 * allowed after it); a bare number means MiB. Result in MiB, rounded up. */
int tk_parse_size_mib(const char *s, int64_t *ret_mib);
/* A duration: seconds ("90"), with units ("90s", "10m", "2h", "1d",
 * "1h30m"), or clock form ("MM:SS", "HH:MM:SS", "D-HH:MM:SS"). */
int tk_parse_duration(const char *s, int64_t *ret_seconds);
/* A job's time limit as Slurm reads it: a bare number is minutes; else as
 * tk_parse_duration (90m, 2h, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS). */
int tk_parse_time_limit(const char *s, int64_t *ret_seconds);
/* "D-HH:MM:SS" or "HH:MM:SS", Slurm's way to print a time. */
void tk_format_clock(int64_t seconds, char *buf, size_t n);
/* A start time as Slurm's --begin reads it, in local time: now+DURATION
 * (now+1h, now+90), HH:MM[:SS] (today, or tomorrow once past),
 * YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight. *ret: seconds since
 * the epoch. now: the current one. */
int tk_parse_begin(const char *s, int64_t now, int64_t *ret);
/* A signal by name (USR1, SIGUSR1) or number (1-64); its number. */
int tk_parse_signal(const char *s, int *ret);
/* Is url plain HTTP to a host other than this machine's loopback
 * ("localhost", 127.0.0.0/8, ::1)? A token must not travel so unless the
 * user said --insecure-http. */
bool tk_url_plain_remote(const char *url);
/* A list of servers' URLs, "URL[,URL...]" (standby servers), each without
 * its trailing slashes: *ret (n of them, at most TK_URLS_MAX) the
 * caller's to free, each and all; -EINVAL for an empty entry or too many. */
#define TK_URLS_MAX 16
int tk_url_list(const char *text, char ***ret, int *ret_n);
/* Formats seconds as "1d2h3m4s"-style text into buf. */
void tk_format_duration(int64_t seconds, char *buf, size_t n);

/* ---- time ------------------------------------------------------------- */

int64_t tk_wall_ms(void); /* milliseconds since the epoch */
int64_t tk_mono_ms(void); /* monotonic milliseconds */
int64_t tk_mono_us(void); /* monotonic microseconds */

/* ---- randomness -------------------------------------------------------- */

/* Fills buf with 2*nbytes hex digits of kernel randomness and a NUL; buf must
 * hold 2*nbytes+1. */
int tk_random_hex(char *buf, size_t nbytes);

/* Base64 with padding (RFC 4648): a new string; and back, into a new
 * buffer (*ret_len bytes; -EINVAL for text that is not base64). */
char *tk_base64_encode(const void *data, size_t len);
int tk_base64_decode(const char *text, void **ret, size_t *ret_len);
/* SHA-256 of data as 64 hex digits and a NUL. */
void tk_sha256_hex(const void *data, size_t len, char out[65]);
/* HMAC-SHA-256 (RFC 2104) of data under key, as 64 hex digits and a NUL. */
void tk_hmac_sha256_hex(const void *key, size_t klen, const void *data, size_t len, char out[65]);

/* ---- files ------------------------------------------------------------ */

/* Creates path and its parents with mode. */
int tk_mkdir_p(const char *path, mode_t mode);
/* A pidfd naming process pid (Linux 5.3), or -1 with errno (ENOSYS:
 * none on this kernel). */
int tk_pidfd_open(pid_t pid);
/* Makes path (its parent exists) with mode unless it is there, and says
 * whether it is a folder of this user's own that no one else may write to
 * (0), where a shared parent (a sticky /dev/shm) lets anyone create a name
 * first: not a folder (-ENOTDIR), a link (-ELOOP), another's or writable
 * by others (-EPERM); with tmpfs, one in memory (-EXDEV if not). */
int tk_private_dir(const char *path, mode_t mode, bool tmpfs);
/* Removes dir, a folder of files (no folders in it): its entries, then
 * itself. Quietly: what cannot go stays. */
void tk_rmdir_files(const char *dir);
/* The program `name` as $PATH finds it (an executable file in one of its
 * folders, def_path where PATH is unset or empty; NULL: none): a path to
 * free, or NULL. */
char *tk_which(const char *name, const char *def_path);
/* Writes all of buf to fd (a pipe, socket or terminal), going on after
 * short writes and interruptions: 0, or -errno. */
int tk_write_all(int fd, const void *buf, size_t n);
/* Writes data to path atomically (temporary file, fsync, rename) with mode. */
int tk_write_file(const char *path, const void *data, size_t len, mode_t mode);
/* The same without the fsync: a reader sees the old file or the new one,
 * whole, while the machine stays up (what a process crash must not tear;
 * a reboot loses the processes the file speaks of anyway). */
int tk_replace_file(const char *path, const void *data, size_t len, mode_t mode);
/* Reads a whole file of at most `limit` bytes; *ret is NUL-terminated and the
 * caller frees it. -EFBIG when the file is larger than limit. */
int tk_read_file(const char *path, size_t limit, char **ret, size_t *ret_len);
/* Strips trailing whitespace in place. */
void tk_strip(char *s);

/* ---- logging ---------------------------------------------------------- */

enum tk_log_level { TK_LOG_ERR, TK_LOG_WARN, TK_LOG_INFO, TK_LOG_DEBUG, TK_LOG_MAX };

void tk_log_set_level(enum tk_log_level level);
/* Sets a prefix ("server", "agent") shown on every line; borrowed. */
void tk_log_set_prefix(const char *prefix);
void tk_log(enum tk_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) tk_log(TK_LOG_ERR, __VA_ARGS__)
#define log_warn(...) tk_log(TK_LOG_WARN, __VA_ARGS__)
#define log_info(...) tk_log(TK_LOG_INFO, __VA_ARGS__)
#define log_debug(...) tk_log(TK_LOG_DEBUG, __VA_ARGS__)

/* ---- command-line options --------------------------------------------- */

/* One option of a command; tables of these drive parsing and help text. */
struct tk_option {
	const char *name; /* long name without "--" */
	char short_name;  /* or 0 */
	const char *arg;  /* placeholder such as "N", or NULL for a flag */
	const char *help;
};

/* A command of the tenk program: a row of the one table in src/main.c that
 * dispatches `tenk NAME ...`, generates `tenk help`, and is handed to the
 * command so that its usage lines and --help speak of it. */
struct tk_command {
	const char *name;
	const char *args;    /* what follows the options in its usage line */
	const char *summary; /* one line for `tenk help` and its --help */
	/* argv[0] is name; returns the process's exit status */
	int (*main)(const struct tk_command *cmd, int argc, char **argv);
};

/*
 * Parses argv[1..argc) against opts. "--name value", "--name=value",
 * "-N value" and "-Nvalue" are accepted; "--" ends the options. With
 * stop_at_positional the first positional argument also ends them (so a
 * command's own flags pass through untouched); otherwise options and
 * positional arguments may be mixed. values[i] gets the argument of opts[i]
 * ("" for a flag) or NULL when absent; the last occurrence wins. The
 * positional arguments are returned in *ret_pos (an array the caller frees;
 * the strings are argv's). Returns 0, or -EINVAL with a message naming the
 * offending option.
 */
int tk_opts_parse(const struct tk_option *opts, size_t n, int argc, char **argv,
		  bool stop_at_positional, const char **values, char ***ret_pos, int *ret_npos,
		  struct tk_error *err);
/* Appends one line per option ("  -N, --nodes N   help") to sb. */
void tk_opts_help(const struct tk_option *opts, size_t n, struct strbuf *sb);
/* Prints a command's --help on stdout: the text fmt makes, a blank line,
 * then "options:" and tk_opts_help's lines. */
void tk_opts_usage(const struct tk_option *opts, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Splits a listen address "HOST:PORT" ("[v6]:PORT" too) and resolves it
 * (sys.c); host gets HOST. */
int tk_parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, char *host,
		    size_t hostlen, struct tk_error *err);

/* ---- Prometheus' text exposition format (prom.c) ---- */

/* A histogram's counts for fixed bucket bounds (ascending, in base units;
 * +Inf is implied), at most TK_HIST_MAX of them. */
#define TK_HIST_MAX 24
struct tk_hist {
	uint64_t counts[TK_HIST_MAX]; /* observations <= bounds[i], not cumulative */
	uint64_t count;
	double sum;
};
void tk_hist_observe(struct tk_hist *h, const double *bounds, int nbounds, double v);

/* A label set being built: `a="x",b="y"`, values escaped. */
struct prom_labels {
	char text[768];
	size_t len;
};
void prom_labels_init(struct prom_labels *l);
void prom_label(struct prom_labels *l, const char *name, const char *value);
void prom_labelf(struct prom_labels *l, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "# HELP" and "# TYPE" of a family (type: counter, gauge, histogram). */
void prom_family(struct strbuf *b, const char *name, const char *type, const char *help);
/* One sample: name{labels} value (labels may be NULL). */
void prom_sample(struct strbuf *b, const char *name, const struct prom_labels *l, double v);
/* A histogram's _bucket, _sum and _count samples. */
void prom_hist(struct strbuf *b, const char *name, const struct prom_labels *l,
	       const struct tk_hist *h, const double *bounds, int nbounds);
