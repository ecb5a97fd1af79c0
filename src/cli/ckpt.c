/*
 * tenk ckpt: a job's checkpoints. `commit` marks a tag of the running job's
 * TENK_CHECKPOINT_DIR complete (its TAG/.tenk-commit), for scripts, with no
 * server needed; `ls` lists a job's committed checkpoints.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- commit ------------------------------------------------------------------------ */

static int commit_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "tenk ckpt commit: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see tenk ckpt --help)\n");
	return CLI_EXIT_USAGE;
}

static int ckpt_commit(int argc, char **argv)
{
	static const struct tk_option opts[] = {
		{"step", 0, "N", "the training step the tag holds"},
		{"dir", 0, "DIR", "the checkpoint folder (default $TENK_CHECKPOINT_DIR)"},
		{"help", 'h', NULL, "show this help"},
	};
	const char *v[3];
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, 3, argc, argv, false, v, &pos, &npos, &err) < 0)
		return commit_usage("%s", err.text);
	int rc = CLI_EXIT_OK;
	if (v[2]) {
		tk_opts_usage(opts, 3,
			      "usage: tenk ckpt commit TAG --step N\nMarks DIR/TAG complete: the "
			      "agent freezes, uploads and commits it. Run it on each node after "
			      "every rank has written its part (local rank 0, after a barrier).");
		goto out;
	}
	int64_t step;
	const char *dir = v[1] ? v[1] : getenv("TENK_CHECKPOINT_DIR");
	if (npos != 1) {
		rc = commit_usage("%s", "give the tag, once (tenk ckpt commit TAG --step N)");
	} else if (!model_ckpt_tag_valid(pos[0])) {
		rc = commit_usage("\"%s\" is not a tag: 1 to 127 of A-Z a-z 0-9 . _ -, not "
				  "starting with '.'",
				  pos[0]);
	} else if (!v[0] || tk_parse_int64(v[0], 0, INT64_MAX, &step) < 0) {
		rc = commit_usage("--step: give the step, a whole number from 0%s", "");
	} else if (!dir || !*dir) {
		rc = commit_usage("%s", "no checkpoint folder: run it in a job, or give --dir");
	} else {
		_cleanup_free_ char *tag = xasprintf("%s/%s", dir, pos[0]);
		_cleanup_free_ char *marker = xasprintf("%s/.tenk-commit", tag);
		struct stat st;
		char text[64];
		int n = snprintf(text, sizeof(text), "{\"step\": %lld}\n", (long long)step);
		int r = lstat(tag, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
		const char *what = tag;
		if (r == 0) {
			r = tk_write_file(marker, text, (size_t)n, 0644);
			what = marker;
		}
		if (r < 0) {
			fprintf(stderr, "tenk ckpt commit: %s: %s\n", what, strerror(-r));
			rc = CLI_EXIT_ERROR;
		}
	}
out:
	free(pos);
	return rc;
}

/* ---- ls ---------------------------------------------------------------------------- */

static int run_ls(struct ctx *c)
{
	if (strcmp(c->pos[0], "ls") != 0)
		return cli__usage_error(
			c->cmd, "unknown action \"%s\" (tenk ckpt ls JOB | commit TAG)", c->pos[0]);
	if (c->npos != 2)
		return cli__usage_error(c->cmd, "give the job (tenk ckpt ls JOB)");
	int64_t id;
	if (cli__parse_id(c, c->pos[1], &id) < 0)
		return CLI_EXIT_USAGE;
	char path[64];
	snprintf(path, sizeof(path), "/v1/jobs/%lld/checkpoints", (long long)id);
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &res, NULL, &err) < 0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	json_t *list = json_object_get(res, "checkpoints");
	if (!json_array_size(list))
		printf("job %lld has no committed checkpoint%s\n", (long long)id,
		       cli__jstr(res, "store")[0] ? "" : " (the cluster has no checkpoint_store)");
	else
		printf("%-24s %10s %7s %12s %10s  %s\n", "TAG", "STEP", "ATTEMPT", "BYTES",
		       "UPLOAD_MS", "COMMITTED");
	size_t i;
	json_t *k;
	json_array_foreach (list, i, k) {
		char when[32];
		cli__fmt_time(cli__jint(k, "at_ms"), when, sizeof(when));
		printf("%-24s %10lld %7lld %12lld %10lld  %s\n", cli__jstr(k, "tag"),
		       (long long)cli__jint(k, "step"), (long long)cli__jint(k, "attempt"),
		       (long long)cli__jint(k, "bytes"), (long long)cli__jint(k, "upload_ms"),
		       when);
	}
	json_t *a = json_object_get(res, "attempt");
	if (a && cli__jstr(a, "restore_tag")[0])
		printf("attempt %lld restores %s (step %lld)%s\n",
		       (long long)cli__jint(a, "number"), cli__jstr(a, "restore_tag"),
		       (long long)cli__jint(a, "restore_step"),
		       json_is_true(json_object_get(a, "restore_go")) ? ", done" : "");
	json_decref(res);
	return CLI_EXIT_OK;
}

static const struct tk_option ls_opts[] = {COMMON_OPTS};

static int ckpt_ls(const struct tk_command *cmd, int argc, char **argv)
{
	static const struct cli_spec spec = {CLI_OPTS(ls_opts), false, 1, 2, run_ls};
	return cli_main(cmd, &spec, argc, argv);
}

int cli_ckpt(const struct tk_command *cmd, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "commit") == 0)
		return ckpt_commit(argc - 1, argv + 1);
	return ckpt_ls(cmd, argc, argv);
}
