/*
 * tenk logs: a job's output, read by the agents of its nodes and sent
 * through the server (GET /v1/jobs/ID/logs), so no shared filesystem is
 * needed; -f follows it as it is written, across requeues. The same loop
 * streams `tenk run`'s output.
 */
#include "internal.h"
#include "model/wire.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FOLLOW_POLL_MS 250
#define LOGS_MAX_TASKS 4096 /* tasks followed at once */

/* One file followed: where reading goes on, and a line not yet ended. */
struct followed {
	int task;
	int64_t offset;
	bool read; /* offset is known: data came (else the server says where to start) */
	struct strbuf partial;
	bool said; /* its error was said once */
};

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig)
{
	(void)sig;
	interrupts++;
}

volatile sig_atomic_t cli__hangup;

static void on_hangup(int sig)
{
	cli__hangup = sig;
}

void cli__catch_hangup(bool on)
{
	struct sigaction sa = {.sa_handler = on ? on_hangup : SIG_DFL};
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int cli__cancel_job(struct ctx *c, const char *id, struct tk_error *err)
{
	_cleanup_free_ char *cp = xasprintf("/v1/jobs/%s/cancel", id);
	json_t *x;
	int r = client_call(&c->client, "POST", cp, NULL, CALL_TIMEOUT_MS, &x, NULL, err);
	if (r == 0)
		json_decref(x);
	return r;
}

int cli__hung_up(struct ctx *c, const char *id, bool keep)
{
	int sig = cli__hangup;
	struct tk_error err;
	if (!keep && cli__cancel_job(c, id, &err) < 0)
		fprintf(stderr, "tenk run: cannot cancel job %s: %s\n", id, err.text);
	/* (a terminal that hung up reads none of this; a log may) */
	fprintf(stderr, "tenk run: %s: %s job %s\n", sig == SIGHUP ? "hung up" : "terminated",
		keep ? "leaving (--keep)" : "cancelled", id);
	return 128 + sig;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL); /* a signal ends it early: so much the better */
}

static struct followed *followed_of(struct followed *fs, int *n, int task)
{
	for (int i = 0; i < *n; i++)
		if (fs[i].task == task)
			return &fs[i];
	if (*n == LOGS_MAX_TASKS)
		return NULL;
	struct followed *f = &fs[(*n)++];
	memset(f, 0, sizeof(*f));
	f->task = task;
	strbuf_init(&f->partial);
	return f;
}

/* Writes data of task f; with label, line by line after the rank. */
static void emit(struct followed *f, const char *data, size_t len, bool label, bool flush)
{
	if (!label) {
		fwrite(data, 1, len, stdout);
		return;
	}
	strbuf_add(&f->partial, data, len);
	size_t start = 0;
	for (size_t i = 0; i < f->partial.len; i++)
		if (f->partial.buf[i] == '\n') {
			printf("%d: %.*s\n", f->task, (int)(i - start), f->partial.buf + start);
			start = i + 1;
		}
	if (flush && start < f->partial.len) {
		printf("%d: %.*s\n", f->task, (int)(f->partial.len - start),
		       f->partial.buf + start);
		start = f->partial.len;
	}
	memmove(f->partial.buf, f->partial.buf + start, f->partial.len - start);
	f->partial.len -= start;
	f->partial.buf[f->partial.len] = '\0';
}

/* One read of every followed file of the attempt: how many bytes came
 * (< 0 on an error, said), and whether the attempt had ended then. */
static int64_t read_once(struct ctx *c, const struct follow *o, int attempt, struct followed *fs,
			 int *nfs, bool *ended, bool first)
{
	struct strbuf path;
	strbuf_init(&path);
	strbuf_addf(&path, "/v1/jobs/%s/logs?attempt=%d", o->job, attempt);
	if (o->task >= 0)
		strbuf_addf(&path, "&task=%d", o->task);
	else
		strbuf_addstr(&path, "&task=all");
	if (o->error)
		strbuf_addstr(&path, "&stream=error");
	if (first && o->tail)
		strbuf_addf(&path, "&tail=%d", o->tail);
	/* where each read went on to; a task not read yet starts where its
	 * attempt began in its file, which the server knows */
	bool any = false;
	for (int i = 0; i < *nfs; i++)
		if (fs[i].read) {
			strbuf_addf(&path, "%s%d:%lld", any ? "," : "&from=", fs[i].task,
				    (long long)fs[i].offset);
			any = true;
		}
	json_t *ans;
	struct tk_error err;
	int r = client_call(&c->client, "GET", path.buf, NULL, CALL_TIMEOUT_MS, &ans, NULL, &err);
	strbuf_release(&path);
	if (r < 0) {
		cli__api_error(c, &err);
		return -1;
	}
	*ended = json_is_true(json_object_get(ans, "ended"));
	int64_t got = 0;
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(ans, "tasks"), i, e) {
		struct followed *f = followed_of(fs, nfs, (int)cli__jint(e, "task"));
		if (!f)
			continue;
		const char *why = cli__jstr(e, "error");
		if (*why) {
			/* no output yet is no news while it runs */
			if (!f->said && (o->once || strcmp(cli__jstr(e, "status"),
							   log_status_name(LOG_NOT_YET)) != 0))
				fprintf(stderr, "tenk logs: task %d: %s\n", f->task, why);
			f->said = true;
			continue;
		}
		void *data;
		size_t len;
		if (tk_base64_decode(cli__jstr(e, "data"), &data, &len) < 0)
			continue;
		emit(f, data, len, o->label, false);
		free(data);
		f->offset = cli__jint(e, "offset") + (int64_t)len;
		f->read = true;
		got += (int64_t)len;
	}
	json_decref(ans);
	fflush(stdout);
	return got;
}

int cli__follow_job(struct ctx *c, const struct follow *o)
{
	struct sigaction sa = {.sa_handler = on_sigint}, old;
	if (o->run)
		sigaction(SIGINT, &sa, &old);
	struct followed *fs = xcalloc(LOGS_MAX_TASKS, sizeof(*fs));
	int nfs = 0, attempt = o->attempt, rc = CLI_EXIT_OK, said_interrupts = 0;
	char reason[512] = "";
	bool first = true;
	_cleanup_free_ char *path = xasprintf("/v1/jobs/%s", o->job);
	for (;;) {
		if (o->run && cli__hangup) {
			rc = cli__hung_up(c, o->job, o->keep);
			break;
		}
		if (o->run && interrupts > said_interrupts) {
			said_interrupts = interrupts;
			if (interrupts >= 2) {
				fprintf(stderr, "tenk run: no longer waiting for job %s\n", o->job);
				rc = 130;
				break;
			}
			struct tk_error err;
			cli__cancel_job(c, o->job, &err); /* (its state says what came of it) */
			fprintf(stderr,
				"tenk run: cancelling job %s (Ctrl-C again to stop waiting)\n",
				o->job);
		}
		json_t *j;
		struct tk_error err;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &j, NULL, &err) <
		    0) {
			rc = cli__api_error(c, &err);
			break;
		}
		int natt = (int)json_array_size(json_object_get(j, "attempts"));
		const char *st = cli__jstr(j, "state");
		bool final =
			strcmp(st, "PENDING") && strcmp(st, "STARTING") && strcmp(st, "RUNNING");
		if (o->run && !strcmp(st, "PENDING") &&
		    strcmp(reason, cli__jstr(j, "reason")) != 0) {
			snprintf(reason, sizeof(reason), "%s", cli__jstr(j, "reason"));
			if (*reason)
				fprintf(stderr, "tenk run: job %s waits: %s\n", o->job, reason);
		}
		if (!attempt && natt)
			attempt = natt;
		if (o->attempt && attempt > natt && (final || o->once)) {
			/* none to come (or not waited for): not one of its attempts */
			fprintf(stderr,
				"tenk logs: job %s has %d attempt%s; there is no attempt %d\n",
				o->job, natt, natt == 1 ? "" : "s", o->attempt);
			json_decref(j);
			rc = CLI_EXIT_ERROR;
			break;
		}
		if (!attempt || (o->attempt && attempt > natt)) {
			bool stop = final || o->once;
			rc = final ? cli__job_exit_status(j) : CLI_EXIT_OK;
			json_decref(j);
			if (stop)
				break;
			sleep_ms(FOLLOW_POLL_MS);
			continue;
		}
		bool ended = false;
		int64_t got = read_once(c, o, attempt, fs, &nfs, &ended, first);
		first = false;
		if (got < 0) {
			json_decref(j);
			rc = CLI_EXIT_ERROR;
			break;
		}
		if (got > 0) {
			json_decref(j);
			continue; /* there may be more already */
		}
		if (o->once) {
			json_decref(j);
			break;
		}
		if (ended && attempt < natt && !o->attempt) {
			/* requeued: the next attempt's output, from its start */
			for (int i = 0; i < nfs; i++) {
				emit(&fs[i], "", 0, o->label, true);
				strbuf_release(&fs[i].partial);
			}
			nfs = 0;
			attempt++;
			fprintf(stderr, "tenk logs: job %s: attempt %d\n", o->job, attempt);
		} else if (ended && (final || o->attempt)) {
			rc = final ? cli__job_exit_status(j) : CLI_EXIT_OK;
			json_decref(j);
			break;
		} else {
			sleep_ms(FOLLOW_POLL_MS);
		}
		json_decref(j);
	}
	for (int i = 0; i < nfs; i++) {
		emit(&fs[i], "", 0, o->label, true);
		strbuf_release(&fs[i].partial);
	}
	fflush(stdout);
	free(fs);
	if (o->run)
		sigaction(SIGINT, &old, NULL);
	return rc;
}

/* ---- tenk logs ---------------------------------------------------------------------- */

enum { L_FOLLOW = O_FIRST_OWN, L_TASK, L_ATTEMPT, L_TAIL, L_LABEL, L_ERROR };
static const struct tk_option logs_opts[] = {
	COMMON_OPTS,
	{"follow", 'f', NULL, "go on printing as it is written, across requeues, until it ends"},
	{"task", 0, "N|all", "the task whose output (default all)"},
	{"attempt", 0, "N", "this attempt's output (default the newest)"},
	{"tail", 0, "N", "start with the last N lines"},
	{"label", 'l', NULL, "each line after its task's rank"},
	{"error", 'e', NULL, "the error files (a job submitted with -e)"},
};

static int run_logs(struct ctx *c)
{
	if (cli__job_ref_check(c, c->pos[0]))
		return CLI_EXIT_USAGE;
	struct follow o = {.job = c->pos[0],
			   .task = -1,
			   .label = !!c->v[L_LABEL],
			   .error = !!c->v[L_ERROR],
			   .once = !c->v[L_FOLLOW]};
	int64_t x;
	if (c->v[L_TASK] && strcmp(c->v[L_TASK], "all") != 0) {
		if (tk_parse_int64(c->v[L_TASK], 0, INT32_MAX, &x) < 0)
			return cli__usage_error(c->cmd, "--task: a rank or all, got \"%s\"",
						c->v[L_TASK]);
		o.task = (int)x;
	}
	if (c->v[L_ATTEMPT]) {
		if (tk_parse_int64(c->v[L_ATTEMPT], 1, MODEL_MAX_ATTEMPTS, &x) < 0)
			return cli__usage_error(c->cmd, "--attempt: from 1 to %d, got \"%s\"",
						MODEL_MAX_ATTEMPTS, c->v[L_ATTEMPT]);
		o.attempt = (int)x;
	}
	if (c->v[L_TAIL]) {
		if (tk_parse_int64(c->v[L_TAIL], 1, 1 << 20, &x) < 0)
			return cli__usage_error(c->cmd,
						"--tail: lines, from 1 to 1048576, got \"%s\"",
						c->v[L_TAIL]);
		o.tail = (int)x;
	}
	int rc = cli__follow_job(c, &o);
	/* without -f, printing it is the whole of it */
	return o.once && rc != CLI_EXIT_ERROR ? CLI_EXIT_OK : rc;
}

CLI_COMMAND(cli_logs, CLI_OPTS(logs_opts), false, 1, 1, run_logs)
