/*
 * The reference (issue 44, point 3), after the layers (shown in the
 * workload layer) with
 * --reference (tenk's own: the workload's training on one rank) or
 * --reference-cmd CMD (a site's, run by sh -c on the node, inside the
 * image where the validation runs in one). Its record (the loss at every
 * step, the final parameters, the step time) is what a rollout compares
 * between the old stack and the new; the check's figure is its steps per
 * second.
 *
 * A site's command prints its record as the last line of its output:
 *     {"loss": [2.31, 2.12, ...], "params": [...], "step_s": [...]}
 * (model.h, reference_unpack); what it prints before is its own, and its
 * standard error goes where the validation's does.
 */
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define REF_CMD_TIMEOUT_MS (30 * 60 * 1000)
#define REF_OUT_KEEP (1u << 20) /* the tail of its output kept */

/* Runs cmd; its exit status (128 + signal; -errno where it could not),
 * its output's last non-empty line into *last (to free). */
static int run_cmd(const char *cmd, char **last, bool *timed_out)
{
	*last = NULL;
	*timed_out = false;
	int p[2];
	if (pipe(p) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char *buf = xmalloc(REF_OUT_KEEP + 1);
	size_t got = 0;
	int64_t deadline = tk_mono_ms() + REF_CMD_TIMEOUT_MS;
	for (;;) {
		int64_t left = deadline - tk_mono_ms();
		if (left <= 0) {
			*timed_out = true;
			kill(-pid, SIGKILL);
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int k = poll(&pf, 1, (int)MIN(left, 1000));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			continue;
		if (got == REF_OUT_KEEP) {
			/* the tail is what matters: keep its second half */
			memmove(buf, buf + REF_OUT_KEEP / 2, REF_OUT_KEEP / 2);
			got = REF_OUT_KEEP / 2;
		}
		ssize_t n = read(p[0], buf + got, REF_OUT_KEEP - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	buf[got] = '\0';
	/* the last line with something on it */
	char *end = buf + got;
	while (end > buf && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		*--end = '\0';
	char *line = end;
	while (line > buf && line[-1] != '\n')
		line--;
	*last = xstrdup(line);
	free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The site's command's record, or why there is none (in why). */
static int from_cmd(const char *cmd, struct reference *r, char *why, size_t wn)
{
	char *last;
	bool timed_out;
	int rc = run_cmd(cmd, &last, &timed_out);
	if (rc != 0) {
		if (timed_out)
			snprintf(why, wn,
				 "the reference command ran past %d minutes and was killed",
				 REF_CMD_TIMEOUT_MS / 60000);
		else if (rc < 0)
			snprintf(why, wn, "the reference command could not start: %s",
				 strerror(-rc));
		else
			snprintf(why, wn, "the reference command exited with %d%s%.120s", rc,
				 last && last[0] ? "; its last line: " : "", last ? last : "");
		free(last);
		return -1;
	}
	json_error_t je;
	json_t *j = json_loads(last, 0, &je);
	struct tk_error err;
	int u = j ? reference_unpack(j, r, &err) : -EINVAL;
	if (u < 0)
		snprintf(why, wn,
			 "the reference command's last line is not its record (%.160s): "
			 "print {\"loss\": [...], \"params\": [...], \"step_s\": [...]} last",
			 j ? err.text : je.text);
	json_decref(j);
	free(last);
	if (u < 0)
		return -1;
	r->source = REF_SOURCE_COMMAND;
	snprintf(r->command, sizeof(r->command), "%s", cmd);
	return 0;
}

int validate__check_reference(struct vcheck *c, const char *cmd, json_t **out)
{
	/* its speed is judged by a rollout against the old stack's, not held
	 * to the peers' (steps of microseconds, for tenk's own) */
	validate__vcheck_set(c, "workload", "reference", "steps/s", false);
	struct reference r;
	char why[300], where[128] = "the processor";
	int gpu = 0;
	if (!cmd && (gpu = validate__reference_gpu(&r, where, sizeof(where))) < 0) {
		snprintf(why, sizeof(why), "tenk's own reference: %s", where);
		c->verdict = V_FAIL;
		c->broken = true;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		if (out)
			*out = json_pack("{s:s}", "error", why);
		return 0;
	}
	if (!cmd && !gpu) {
		validate__reference_own(&r);
		snprintf(where, sizeof(where), "the processor");
	} else if (cmd && from_cmd(cmd, &r, why, sizeof(why)) < 0) {
		c->verdict = V_FAIL;
		c->broken = true;
		snprintf(c->detail, sizeof(c->detail), "%s", why);
		if (out)
			*out = json_pack("{s:s, s:s}", "error", why, "command", cmd);
		return 0;
	}
	char dig[17];
	reference_digest(&r, dig);
	c->figure = r.step_s > 0 ? 1 / r.step_s : 0;
	snprintf(c->detail, sizeof(c->detail),
		 "%s%s%.100s: %d steps, loss %.6g -> %.6g, %d parameters, digest %s",
		 cmd ? "the site's command" : "tenk's own", cmd ? "" : " on ", cmd ? "" : where,
		 r.nloss, r.loss[0], r.loss[r.nloss - 1], r.nparams, dig);
	if (out) {
		*out = reference_pack(&r);
		json_object_set_new(*out, "digest", json_string(dig));
		if (!cmd)
			json_object_set_new(*out, "device", json_string(gpu ? "gpu" : "cpu"));
	}
	reference_release(&r);
	return 0;
}
