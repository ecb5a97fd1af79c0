/*
 * Private to src/cli: what every command's file shares. A command is one
 * exported function (cli.h) that hands its own option table and argument
 * counts (struct cli_spec) to cli_main, which parses them, answers --help,
 * connects the client and runs it.
 */
#pragma once

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

#include "cli.h"
#include "model/model.h"

#define CALL_TIMEOUT_MS 30000L

/* Every command's first options, in this order. */
enum { O_SERVER, O_TOKEN, O_TOKEN_FILE, O_CA, O_INSECURE, O_JSON, O_HELP, O_FIRST_OWN };
#define COMMON_OPTS                                                                                \
	{"server", 0, "URL", "the tenk server (default: $TENK_SERVER)"},                           \
		{"token", 0, "TOKEN", "the API token (default: $TENK_TOKEN)"},                     \
		{"token-file", 0, "FILE", "read the API token from FILE"},                         \
		{"ca-file", 0, "FILE",                                                             \
		 "verify the server's HTTPS against this CA (default $TENK_CA)"},                  \
		{"insecure-http", 0, NULL,                                                         \
		 "send the token over plain HTTP to another machine "                              \
		 "($TENK_INSECURE_HTTP=1)"},                                                       \
		{"json", 0, NULL, "print the API's JSON objects"},                                 \
	{                                                                                          \
		"help", 'h', NULL, "show this help"                                                \
	}

/* The options of a command that has none of its own. */
extern const struct tk_option cli_plain_opts[O_FIRST_OWN];

/* One run of a command. */
struct ctx {
	const struct tk_command *cmd; /* its row of the program's table */
	const char *v[80];	      /* each option's value, in its table's order */
	char **pos;		      /* the positional arguments */
	int npos;
	struct client client;
	bool json;
	int argc; /* the command line as typed (argv[0] the command's name) */
	char **argv;
};

/* How a command reads its command line, and what it runs. */
struct cli_spec {
	const struct tk_option *opts;
	size_t nopts;
	bool stop_at_positional; /* the first positional argument ends the options */
	int min_args;
	int max_args; /* -1: any number */
	int (*run)(struct ctx *c);
};

/* Parses argv by spec, answers --help and usage errors (exit 2), connects
 * the client, runs spec->run and returns its exit status. */
int cli_main(const struct tk_command *cmd, const struct cli_spec *spec, int argc, char **argv);

/* Defines the exported command function NAME for spec. */
#define CLI_COMMAND(name, ...)                                                                     \
	int name(const struct tk_command *cmd, int argc, char **argv)                              \
	{                                                                                          \
		static const struct cli_spec spec = {__VA_ARGS__};                                 \
		return cli_main(cmd, &spec, argc, argv);                                           \
	}
#define CLI_OPTS(t) t, ARRAY_SIZE(t)

/* settings.c: tenk config's verbs of the cluster's configuration (show,
 * history, apply, set, unset, rollback), which the server keeps. */
bool cli__config_verb_is_server(const char *verb);
int cli__config_server(int argc, char **argv);

int cli__usage_error(const struct tk_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prints the server's refusal; returns CLI_EXIT_ERROR. */
int cli__api_error(const struct ctx *c, const struct tk_error *err);
/* One call of the API (body taken; NULL: none): 0 with *ret its answer (the
 * caller's), or the exit status, the refusal printed. */
int cli__call(struct ctx *c, const char *method, const char *path, json_t *body, json_t **ret);
void cli__print_json(json_t *j);
/* "2026-12-01 08:00:00" in local time, or "-" for 0. */
void cli__fmt_time(int64_t ms, char *buf, size_t n);
int64_t cli__jint(json_t *o, const char *k);
/* obj[k] as a string; "" when absent. */
const char *cli__jstr(json_t *o, const char *k);
/* The jobs in state (a list; NULL: any), oldest first, max of them at most,
 * page after page; *total: how many match in all. < 0 with err. */
/* tenk queue -o with squeue's format letters (qformat.c). A row: a job as
 * the server lists it, and its id as the queue writes it (16_[3-9]). */
struct qrow {
	json_t *job;
	const char *id;
};
bool cli__qformat_is(const char *fmt);
/* 0, or -1 with why: the field it does not know and the ones it does */
int cli__qformat_check(const char *fmt, char *why, size_t n);
/* One line: fmt with row's values, or the headers where row is NULL. */
void cli__qformat_print(const char *fmt, const struct qrow *row, int64_t now);

int cli__fetch_jobs(struct ctx *c, const char *state, int64_t max, json_t **ret, int64_t *total,
		    struct tk_error *err);
/* The same, of one user's jobs only (user NULL: everyone's). */
int cli__fetch_jobs_of(struct ctx *c, const char *user, const char *state, int64_t max,
		       json_t **ret, int64_t *total, struct tk_error *err);
/* The exit status `tenk wait` (and `tenk run`) gives for a job that ended:
 * 0 COMPLETED, its code FAILED, 124 TIMEOUT, 130 CANCELLED. */
int cli__job_exit_status(json_t *j);

/* logs.c: prints a job's output as it is written until the job ends,
 * across requeues. task: a rank, or -1 for every task; label: each line
 * after its task's rank; run: also say why it waits, and Ctrl-C cancels
 * it (a second one stops following). Returns the job's exit status
 * (cli__job_exit_status), or CLI_EXIT_ERROR. */
struct follow {
	const char *job;
	int task;
	int attempt; /* 0: the newest, then those after it */
	int tail;    /* start with the last lines of each (0: the beginning) */
	bool label;
	bool run;
	bool error; /* the error files (-e) instead */
	bool once;  /* print what is there and stop */
	bool keep;  /* tenk run --keep: a hang-up leaves the job */
};
int cli__follow_job(struct ctx *c, const struct follow *f);

/* tenk run's hang-up: SIGHUP or SIGTERM while it waits on its job. Caught
 * (on) or back to their defaults; cli__hangup is the signal caught, 0
 * before. cli__hung_up ends the job unless keep, says so where it still
 * can, and returns the exit status (128 + the signal). */
extern volatile sig_atomic_t cli__hangup;
void cli__catch_hangup(bool on);
int cli__hung_up(struct ctx *c, const char *id, bool keep);
/* POST /v1/jobs/ID/cancel: 0, or < 0 with err. */
int cli__cancel_job(struct ctx *c, const char *id, struct tk_error *err);

/* pty.c: tenk run --pty's part once job id is submitted: waits until it
 * runs, joins this terminal to its task's, then waits for its end;
 * returns its exit status. */
int cli__run_pty(struct ctx *c, const char *id, bool keep);

/* A job id given on the command line. */
int cli__parse_id(struct ctx *c, const char *s, int64_t *ret);
/* A job named on the command line as the server takes it: 12, or 12_7
 * for an array's element. Non-zero (a usage error, said) when it is not. */
int cli__job_ref_check(struct ctx *c, const char *s);
