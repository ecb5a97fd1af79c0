/*
 * Jobs: the request a user submits, the job the server keeps, and each
 * attempt to run it. job_request_unpack is the gate every submission passes;
 * job_pack/job_unpack give the one JSON form used by the API and the store.
 */
#include "internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const state_names[JOB_STATE_MAX] = {
	[JOB_PENDING] = "PENDING",     [JOB_STARTING] = "STARTING", [JOB_RUNNING] = "RUNNING",
	[JOB_COMPLETED] = "COMPLETED", [JOB_FAILED] = "FAILED",	    [JOB_CANCELLED] = "CANCELLED",
	[JOB_TIMEOUT] = "TIMEOUT",
};

static const char *const task_state_names[TASK_STATE_MAX] = {
	[TASK_WAITING] = "WAITING",
	[TASK_RUNNING] = "RUNNING",
	[TASK_EXITED] = "EXITED",
	[TASK_LOST] = "LOST",
};

const char *job_state_name(enum job_state s)
{
	return s < JOB_STATE_MAX ? state_names[s] : "?";
}

int job_state_parse(const char *s, enum job_state *ret)
{
	for (int i = 0; i < JOB_STATE_MAX; i++)
		if (strcasecmp(s, state_names[i]) == 0) {
			*ret = (enum job_state)i;
			return 0;
		}
	return -EINVAL;
}

bool job_state_final(enum job_state s)
{
	return s >= JOB_COMPLETED;
}

const char *task_state_name(enum task_state s)
{
	return s < TASK_STATE_MAX ? task_state_names[s] : "?";
}

/* ---- the table of a request's fields (model.h) ------------------------------------ */

#define KEY(key, kind, m, n, up) key,
const char *const job_request_keys[] = {JOB_REQUEST_FIELDS(KEY) NULL};
#undef KEY

bool job_request_updatable(const char *key)
{
#define UPDATABLE(k, kind, m, n, up)                                                               \
	if ((up) && strcmp(key, k) == 0)                                                           \
		return true;
	JOB_REQUEST_FIELDS(UPDATABLE)
#undef UPDATABLE
	return false;
}

const char *job_request_updatable_list(void)
{
	/* made once from constants: the same on every call and every thread */
	static const char *const names[] = {
#define NAME(k, kind, m, n, up) (up) ? k : NULL,
		JOB_REQUEST_FIELDS(NAME)
#undef NAME
	};
	static char list[1024];
	if (!list[0]) {
		size_t at = 0;
		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (names[i])
				at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%s",
						       at ? ", " : "", names[i]);
	}
	return list;
}

static int64_t strv_bytes(char *const *v, int n)
{
	int64_t b = (int64_t)n * (int64_t)sizeof(char *);
	for (int i = 0; i < n; i++)
		b += (int64_t)strlen(v[i]) + 1;
	return b;
}

#define JR_STR_BYTES(r, m, n) ((r)->m ? (int64_t)strlen((r)->m) + 1 : 0)
#define JR_STRV_BYTES(r, m, n) strv_bytes((r)->m, (r)->n)
#define JR_DEPS_BYTES(r, m, n) ((int64_t)(r)->n * (int64_t)sizeof(*(r)->m))
#define JR_VALUE_BYTES(r, m, n) 0
#define JR_PTR_BYTES(r, m, n) ((r)->m ? (int64_t)sizeof(*(r)->m) : 0)

int64_t job_request_bytes(const struct job_request *r)
{
	int64_t b = sizeof(*r);
#define BYTES(k, kind, m, n, up) b += kind##_BYTES(r, m, n);
	JOB_REQUEST_FIELDS(BYTES)
#undef BYTES
	return b;
}

#define JR_STR_FREE(r, m, n) free((r)->m)
#define JR_STRV_FREE(r, m, n) mj_strv_free((r)->m, (r)->n)
#define JR_DEPS_FREE(r, m, n) free((r)->m)
#define JR_VALUE_FREE(r, m, n) (void)0
#define JR_PTR_FREE(r, m, n) free((r)->m)

void job_request_release(struct job_request *r)
{
#define FREE(k, kind, m, n, up) kind##_FREE(r, m, n);
	JOB_REQUEST_FIELDS(FREE)
#undef FREE
	memset(r, 0, sizeof(*r));
}

char *model_output_path(const char *pattern, const char *cwd, const struct output_names *v)
{
	struct strbuf sb;
	strbuf_init(&sb);
	if (pattern[0] != '/')
		strbuf_addf(&sb, "%s/", cwd);
	for (const char *p = pattern; *p; p++) {
		if (*p != '%' || !p[1]) {
			strbuf_addch(&sb, *p);
			continue;
		}
		switch (*++p) {
		case 'j':
			strbuf_addf(&sb, "%lld", (long long)v->job);
			break;
		case 'A':
			strbuf_addf(&sb, "%lld", (long long)(v->array_job ? v->array_job : v->job));
			break;
		case 'a':
			strbuf_addf(&sb, "%d", v->array_index);
			break;
		case 'r':
			strbuf_addf(&sb, "%d", v->attempt);
			break;
		case 't':
			strbuf_addf(&sb, "%d", v->rank);
			break;
		case 'n':
			strbuf_addf(&sb, "%d", v->node_rank);
			break;
		case 'N':
			strbuf_addstr(&sb, v->node ? v->node : "");
			break;
		case 'u':
			strbuf_addstr(&sb, v->owner ? v->owner : "");
			break;
		case 'x':
			strbuf_addstr(&sb, v->name ? v->name : "");
			break;
		case '%':
			strbuf_addch(&sb, '%');
			break;
		default:
			strbuf_addch(&sb, '%');
			strbuf_addch(&sb, *p);
		}
	}
	return strbuf_detach(&sb);
}

static const char *const dep_when_names[DEP_WHEN_MAX] = {"start", "ok", "fail", "any"};

const char *dep_when_name(enum dep_when w)
{
	return w >= 0 && w < DEP_WHEN_MAX ? dep_when_names[w] : "?";
}

int dep_when_parse(const char *s, enum dep_when *ret)
{
	for (int i = 0; i < DEP_WHEN_MAX; i++)
		if (strcmp(s, dep_when_names[i]) == 0) {
			*ret = (enum dep_when)i;
			return 0;
		}
	return -EINVAL;
}

static int int_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* One piece of an array's indices: N, N-M or N-M:STEP. */
static int array_range(const char *t, int *lo, int *hi, int *step, struct tk_error *err)
{
	int64_t a, b = -1, st = 1;
	_cleanup_free_ char *copy = xstrdup(t);
	char *colon = strchr(copy, ':');
	if (colon) {
		*colon = '\0';
		if (tk_parse_int64(colon + 1, 1, MODEL_MAX_ARRAY_INDEX, &st) < 0)
			return tk_errorf(err, -EINVAL,
					 "array: \"%s\": the step must be a positive "
					 "integer",
					 t);
	}
	char *dash = strchr(copy, '-');
	if (dash)
		*dash = '\0';
	if (tk_parse_int64(copy, 0, MODEL_MAX_ARRAY_INDEX, &a) < 0 ||
	    (dash && tk_parse_int64(dash + 1, 0, MODEL_MAX_ARRAY_INDEX, &b) < 0))
		return tk_errorf(err, -EINVAL,
				 "array: \"%s\" is not N, N-M or N-M:STEP with indices from 0 to "
				 "%d",
				 t, MODEL_MAX_ARRAY_INDEX);
	if (colon && !dash)
		return tk_errorf(err, -EINVAL, "array: \"%s\": a step needs a range (N-M:STEP)", t);
	if (dash && b < a)
		return tk_errorf(err, -EINVAL, "array: \"%s\": the range ends before it starts", t);
	*lo = (int)a;
	*hi = dash ? (int)b : (int)a;
	*step = (int)st;
	return 0;
}

int model_array_parse(const char *spec, int **ret, int *ret_n, int *ret_cap, struct tk_error *err)
{
	*ret = NULL;
	*ret_n = *ret_cap = 0;
	_cleanup_free_ char *copy = xstrdup(spec);
	char *pct = strchr(copy, '%');
	int64_t cap = 0;
	if (pct) {
		*pct = '\0';
		if (tk_parse_int64(pct + 1, 1, MODEL_MAX_ARRAY, &cap) < 0)
			return tk_errorf(err, -EINVAL,
					 "array: after %% comes how many may run at once, from 1 "
					 "to %d; got \"%s\"",
					 MODEL_MAX_ARRAY, pct + 1);
	}
	if (!copy[0] || copy[0] == ',' || copy[strlen(copy) - 1] == ',' || strstr(copy, ",,"))
		return tk_errorf(err, -EINVAL,
				 "array: \"%.64s\" is not a list of indices such as "
				 "0-999%%50 or 1,3,5-9",
				 spec);
	int *idx = NULL;
	size_t n = 0, alloc = 0;
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int lo = 0, hi = -1, step = 1, r;
		if ((r = array_range(t, &lo, &hi, &step, err)) < 0) {
			free(idx);
			return r;
		}
		for (int64_t i = lo; i <= hi; i += step) {
			if (n == MODEL_MAX_ARRAY) {
				free(idx);
				return tk_errorf(err, -E2BIG, "array: more than %d elements",
						 MODEL_MAX_ARRAY);
			}
			xgrow(&idx, &alloc, n + 1, sizeof(*idx));
			idx[n++] = (int)i;
		}
	}
	int *sorted = xcalloc(n, sizeof(*sorted));
	memcpy(sorted, idx, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), int_cmp);
	for (size_t k = 1; k < n; k++)
		if (sorted[k] == sorted[k - 1]) {
			int dup = sorted[k];
			free(sorted);
			free(idx);
			return tk_errorf(err, -EINVAL, "array: index %d is listed twice", dup);
		}
	free(sorted);
	*ret = idx;
	*ret_n = (int)n;
	*ret_cap = (int)cap;
	return 0;
}

/* ---- node lists ------------------------------------------------------------ */

struct hostlist {
	const char *spec;
	int max;
	char **names;
	int n;
	size_t alloc;
};

/* One bracket's ranges, "1,3-5" or "0000-0031", each value appended to
 * prefix (zero-padded as its range's first bound is), then the rest. */
static int hostlist_item(struct hostlist *h, const char *prefix, const char *s, size_t len,
			 struct tk_error *err);

static int hostlist_bracket(struct hostlist *h, const char *prefix, const char *in, size_t inlen,
			    const char *rest, size_t restlen, struct tk_error *err)
{
	_cleanup_free_ char *copy = xstrndup(in, inlen);
	char *save = NULL;
	if (!*copy)
		return tk_errorf(err, -EINVAL, "\"%.64s\": an empty [] range", h->spec);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(t, '-');
		if (dash)
			*dash = '\0';
		int64_t a, b;
		if (tk_parse_int64(t, 0, 999999999, &a) < 0 ||
		    (dash && tk_parse_int64(dash + 1, 0, 999999999, &b) < 0))
			return tk_errorf(err, -EINVAL,
					 "\"%.64s\": [%.*s] holds something other than numbers "
					 "and ranges N-M",
					 h->spec, (int)inlen, in);
		if (!dash)
			b = a;
		if (b < a)
			return tk_errorf(err, -EINVAL,
					 "\"%.64s\": the range %s-%s ends before it starts",
					 h->spec, t, dash + 1);
		int width = t[0] == '0' ? (int)strlen(t) : 0;
		for (int64_t v = a; v <= b; v++) {
			if (h->n >= h->max)
				return tk_errorf(err, -E2BIG, "\"%.64s\" names more than %d nodes",
						 h->spec, h->max);
			char name[MODEL_NAME_MAX];
			int k = snprintf(name, sizeof(name), "%s%0*lld", prefix, width,
					 (long long)v);
			if (k < 0 || (size_t)k >= sizeof(name))
				return tk_errorf(err, -EINVAL, "\"%.64s\": a node name is too long",
						 h->spec);
			int rc = hostlist_item(h, name, rest, restlen, err);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int hostlist_item(struct hostlist *h, const char *prefix, const char *s, size_t len,
			 struct tk_error *err)
{
	const char *open = memchr(s, '[', len);
	size_t head = open ? (size_t)(open - s) : len;
	char name[MODEL_NAME_MAX];
	int k = snprintf(name, sizeof(name), "%s%.*s", prefix, (int)head, s);
	if (k < 0 || (size_t)k >= sizeof(name))
		return tk_errorf(err, -EINVAL, "\"%.64s\": a node name is too long", h->spec);
	if (open) {
		const char *close = memchr(open, ']', len - head);
		if (!close)
			return tk_errorf(err, -EINVAL, "\"%.64s\": a '[' without its ']'", h->spec);
		return hostlist_bracket(h, name, open + 1, (size_t)(close - open - 1), close + 1,
					len - (size_t)(close + 1 - s), err);
	}
	if (!model_name_valid(name))
		return tk_errorf(err, -EINVAL, "\"%.64s\": \"%s\" is not a node name", h->spec,
				 name);
	for (int i = 0; i < h->n; i++)
		if (strcmp(h->names[i], name) == 0)
			return tk_errorf(err, -EINVAL, "\"%.64s\" names %s twice", h->spec, name);
	if (h->n >= h->max)
		return tk_errorf(err, -E2BIG, "\"%.64s\" names more than %d nodes", h->spec,
				 h->max);
	xgrow(&h->names, &h->alloc, (size_t)h->n + 1, sizeof(*h->names));
	h->names[h->n++] = xstrdup(name);
	return 0;
}

int model_hostlist_parse(const char *spec, int max, char ***ret, int *ret_n, struct tk_error *err)
{
	struct hostlist h = {.spec = spec, .max = max};
	int rc = 0;
	const char *s = spec;
	while (rc == 0) {
		/* an item ends at a comma outside brackets */
		const char *e = s;
		int depth = 0;
		for (; *e && (*e != ',' || depth); e++)
			depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
		if (e == s) {
			rc = tk_errorf(err, -EINVAL, "\"%.64s\": an empty name in the list", spec);
			break;
		}
		rc = hostlist_item(&h, "", s, (size_t)(e - s), err);
		if (!*e)
			break;
		s = e + 1;
	}
	if (rc < 0) {
		mj_strv_free(h.names, h.n);
		return rc;
	}
	*ret = h.names;
	*ret_n = h.n;
	return 0;
}

void job_request_copy(const struct job_request *r, struct job_request *ret)
{
	json_t *o = job_request_pack(r);
	struct tk_error err;
	int rc = job_request_unpack(o, ret, &err);
	assert(rc == 0); /* what was unpacked packs and unpacks again */
	(void)rc;
	json_decref(o);
}

json_t *job_request_pack(const struct job_request *r)
{
	json_t *o = json_pack(
		"{s:s, s:o, s:s, s:o, s:s, s:i, s:i, s:o, s:o, s:i, s:I, s:I, s:I, s:i}", "name",
		r->name, "command", mj_strv_pack(r->argv, r->argc), "cwd", r->cwd, "env",
		mj_env_pack(r->env, r->nenv), "output",
		r->output ? r->output : MODEL_DEFAULT_OUTPUT, "nodes", r->nodes, "tasks_per_node",
		r->tasks_per_node, "gpus_per_task",
		r->gpu_milli % MODEL_MILLI == 0 ? json_integer(r->gpu_milli / MODEL_MILLI)
						: json_real(r->gpu_milli / (double)MODEL_MILLI),
		"gpu_types", mj_strv_pack(r->gpu_types, r->ngpu_types), "cpus_per_task",
		r->cpus_per_task, "mem_mib", (json_int_t)r->mem_mib, "time_limit_s",
		(json_int_t)r->time_limit_s, "grace_s", (json_int_t)r->grace_s, "requeue",
		r->requeue);
	if (r->cls)
		json_object_set_new(o, "class", json_string(r->cls));
	if (r->queue)
		json_object_set_new(o, "queue", json_string(r->queue));
	if (r->constraint)
		json_object_set_new(o, "constraint", json_string(r->constraint));
	if (r->tolerate)
		json_object_set_new(o, "tolerate", json_string(r->tolerate));
	if (r->pool)
		json_object_set_new(o, "pool", json_string(r->pool));
	if (r->spread)
		json_object_set_new(o, "spread", json_string(r->spread));
	if (r->within)
		json_object_set_new(o, "within", json_string(r->within));
	if (r->gpu_mem_mib)
		json_object_set_new(o, "gpu_mem_mib", json_integer(r->gpu_mem_mib));
	if (r->gpu_tflops > 0)
		json_object_set_new(o, "gpu_tflops", json_real(r->gpu_tflops));
	if (r->switches)
		json_object_set_new(o, "switches", json_integer(r->switches));
	if (r->mixed_types)
		json_object_set_new(o, "mixed_types", json_true());
	if (r->image)
		json_object_set_new(o, "image", json_string(r->image));
	if (r->ckpt_marker != CKPT_TENK)
		json_object_set_new(o, "ckpt_marker",
				    json_string(ckpt_marker_name(r->ckpt_marker)));
	if (r->nmounts)
		json_object_set_new(o, "mounts", mj_strv_pack(r->mounts, r->nmounts));
	if (r->nafter) {
		json_t *a = json_array();
		for (int i = 0; i < r->nafter; i++)
			json_array_append_new(a, json_pack("{s:I, s:s}", "job",
							   (json_int_t)r->after[i].job, "when",
							   dep_when_name(r->after[i].when)));
		json_object_set_new(o, "after", a);
	}
	if (r->begin_ms)
		json_object_set_new(o, "begin_ms", json_integer(r->begin_ms));
	if (r->comment)
		json_object_set_new(o, "comment", json_string(r->comment));
	if (r->error)
		json_object_set_new(o, "error", json_string(r->error));
	if (r->slurm_env)
		json_object_set_new(o, "slurm_env", json_true());
	if (r->nccl_check)
		json_object_set_new(o, "nccl_check", json_true());
	if (r->preemptible_any)
		json_object_set_new(o, "preemptible_any", json_true());
	if (r->signal)
		json_object_set_new(o, "signal",
				    json_pack("{s:i, s:I}", "number", r->signal, "before_s",
					      (json_int_t)r->signal_before_s));
	if (r->array)
		json_object_set_new(o, "array", json_string(r->array));
	if (r->nnodelist)
		json_object_set_new(o, "nodelist", mj_strv_pack(r->nodelist, r->nnodelist));
	if (r->nexclude)
		json_object_set_new(o, "exclude", mj_strv_pack(r->exclude, r->nexclude));
	if (r->exclusive)
		json_object_set_new(o, "exclusive", json_true());
	if (r->pty)
		json_object_set_new(o, "pty", json_true());
	if (r->no_attempt_marks)
		json_object_set_new(o, "attempt_marks", json_false());
	if (r->stall_after_s)
		json_object_set_new(o, "stall_after_s", json_integer(r->stall_after_s));
	if (r->on_stall != STALL_NOTIFY)
		json_object_set_new(o, "on_stall", json_string(stall_action_name(r->on_stall)));
	if (r->restart != RESTART_AUTO)
		json_object_set_new(o, "restart", json_string(restart_mode_name(r->restart)));
	if (r->spares)
		json_object_set_new(o, "spares", json_integer(r->spares));
	if (r->nodes_max)
		json_object_set_new(o, "nodes_max", json_integer(r->nodes_max));
	if (r->ckpt_signal)
		json_object_set_new(o, "ckpt_signal",
				    json_pack("{s:i, s:I}", "number", r->ckpt_signal, "wait_s",
					      (json_int_t)r->ckpt_signal_s));
	if (r->service)
		json_object_set_new(o, "service", json_string(r->service));
	if (r->probe)
		json_object_set_new(o, "probe", job_probe_pack(r->probe));
	return o;
}

/* ---- health probes ---------------------------------------------------------------- */

static json_t *seconds(int64_t ms)
{
	return ms % 1000 ? json_real((double)ms / 1000.0) : json_integer(ms / 1000);
}

json_t *job_probe_pack(const struct job_probe *p)
{
	return json_pack("{s:s, s:o, s:o, s:i, s:o}", "path", p->path, "interval_s",
			 seconds(p->interval_ms), "timeout_s", seconds(p->timeout_ms), "threshold",
			 p->threshold, "start_s", seconds(p->start_ms));
}

int job_probe_unpack(json_t *j, struct job_probe *ret, struct tk_error *err)
{
	static const char *const keys[] = {"path",	"interval_s", "timeout_s",
					   "threshold", "start_s",    NULL};
	struct job_probe p = {0};
	double interval, timeout, start;
	int64_t threshold;
	int rc;
	if ((rc = mj_check_keys(j, "probe", keys, err)) < 0 ||
	    (rc = mj_strbuf(j, "path", false, true, p.path, sizeof(p.path), err)) < 0 ||
	    (rc = mj_num(j, "interval_s", false, 1, 3600, 5, &interval, err)) < 0 ||
	    (rc = mj_num(j, "timeout_s", false, 0.001, 3600, 0, &timeout, err)) < 0 ||
	    (rc = mj_int(j, "threshold", false, 1, 100, 3, &threshold, err)) < 0 ||
	    (rc = mj_num(j, "start_s", false, 1, 3600, 300, &start, err)) < 0) {
		mj_prefix(err, "probe");
		return rc;
	}
	if (!p.path[0])
		snprintf(p.path, sizeof(p.path), "/");
	if (p.path[0] != '/' || strcspn(p.path, " \t\r\n") != strlen(p.path))
		return tk_errorf(err, -EINVAL,
				 "probe.path: must start with '/' and hold no spaces or line ends, "
				 "got \"%.64s\"",
				 p.path);
	p.interval_ms = (int64_t)llround(interval * 1000);
	p.timeout_ms = timeout > 0 ? (int64_t)llround(timeout * 1000)
				   : MIN((int64_t)2000, p.interval_ms / 2);
	if (p.timeout_ms >= p.interval_ms)
		return tk_errorf(err, -EINVAL,
				 "probe.timeout_s: %g must be under interval_s (%g): one probe "
				 "ends before the next",
				 timeout, interval);
	p.threshold = (int)threshold;
	p.start_ms = (int64_t)llround(start * 1000);
	*ret = p;
	return 0;
}

static const char *const restart_modes[RESTART_MODE_MAX] = {
	[RESTART_AUTO] = "auto", [RESTART_IN_PLACE] = "in-place", [RESTART_REQUEUE] = "requeue"};

const char *restart_mode_name(enum restart_mode m)
{
	return m < RESTART_MODE_MAX ? restart_modes[m] : "?";
}

int restart_mode_parse(const char *s, enum restart_mode *ret)
{
	for (int i = 0; i < RESTART_MODE_MAX; i++)
		if (strcmp(s, restart_modes[i]) == 0) {
			*ret = (enum restart_mode)i;
			return 0;
		}
	return -EINVAL;
}

static const char *const stall_actions[STALL_ACTION_MAX] = {
	[STALL_NOTIFY] = "notify", [STALL_REQUEUE] = "requeue", [STALL_CANCEL] = "cancel"};

const char *stall_action_name(enum stall_action a)
{
	return a < STALL_ACTION_MAX ? stall_actions[a] : "?";
}

int stall_action_parse(const char *s, enum stall_action *ret)
{
	for (int i = 0; i < STALL_ACTION_MAX; i++)
		if (strcmp(s, stall_actions[i]) == 0) {
			*ret = (enum stall_action)i;
			return 0;
		}
	return -EINVAL;
}

static int deps_unpack(json_t *j, struct job_request *r, struct tk_error *err)
{
	json_t *a = json_object_get(j, "after");
	if (!a)
		return 0;
	if (!json_is_array(a) || json_array_size(a) > MODEL_MAX_AFTER)
		return tk_errorf(err, -EINVAL,
				 "after: must be an array of at most %d {\"job\", \"when\"}",
				 MODEL_MAX_AFTER);
	r->after = xcalloc(json_array_size(a) + 1, sizeof(*r->after));
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		static const char *const keys[] = {"job", "when", NULL};
		char when[16] = "";
		int rc;
		if ((rc = mj_check_keys(v, NULL, keys, err)) < 0 ||
		    (rc = mj_int(v, "job", true, 1, INT64_MAX, 0, &r->after[i].job, err)) < 0 ||
		    (rc = mj_strbuf(v, "when", false, true, when, sizeof(when), err)) < 0) {
			mj_prefix(err, "after[%zu]", i);
			return rc;
		}
		r->after[i].when = DEP_OK;
		if (when[0] && dep_when_parse(when, &r->after[i].when) < 0)
			return tk_errorf(err, -EINVAL,
					 "after[%zu].when: must be start, ok, fail or any, got "
					 "\"%s\"",
					 i, when);
		r->nafter = (int)i + 1;
	}
	return 0;
}

static int signal_unpack(json_t *j, struct job_request *r, struct tk_error *err)
{
	json_t *sg = json_object_get(j, "signal");
	if (!sg)
		return 0;
	static const char *const keys[] = {"number", "before_s", NULL};
	int64_t num, before;
	int rc;
	if ((rc = mj_check_keys(sg, "signal", keys, err)) < 0 ||
	    (rc = mj_int(sg, "number", true, 1, 64, 0, &num, err)) < 0 ||
	    (rc = mj_int(sg, "before_s", false, 0, 65535, 60, &before, err)) < 0) {
		mj_prefix(err, "signal");
		return rc;
	}
	r->signal = (int)num;
	r->signal_before_s = before;
	return 0;
}

static int ckpt_signal_unpack(json_t *j, struct job_request *r, struct tk_error *err)
{
	json_t *sg = json_object_get(j, "ckpt_signal");
	if (!sg)
		return 0;
	static const char *const keys[] = {"number", "wait_s", NULL};
	int64_t num, wait;
	int rc;
	if ((rc = mj_check_keys(sg, "ckpt_signal", keys, err)) < 0 ||
	    (rc = mj_int(sg, "number", true, 1, 64, 0, &num, err)) < 0 ||
	    (rc = mj_int(sg, "wait_s", false, 1, MODEL_MAX_CKPT_SIGNAL_S, 30, &wait, err)) < 0) {
		mj_prefix(err, "ckpt_signal");
		return rc;
	}
	if (num == SIGKILL || num == SIGSTOP)
		return tk_errorf(err, -EINVAL,
				 "ckpt_signal.number: %d cannot be caught; a job checkpoints on a "
				 "signal it handles, such as USR1 (10) or USR2 (12)",
				 (int)num);
	r->ckpt_signal = (int)num;
	r->ckpt_signal_s = wait;
	return 0;
}

/* The node list and the excluded nodes: names, each once, none in both,
 * and at least as many listed as the job has nodes. */
static int node_lists_check(const struct job_request *r, int64_t nodes, struct tk_error *err)
{
	for (int w = 0; w < 2; w++) {
		char *const *v = w ? r->exclude : r->nodelist;
		int n = w ? r->nexclude : r->nnodelist;
		const char *key = w ? "exclude" : "nodelist";
		for (int i = 0; i < n; i++) {
			if (!model_name_valid(v[i]))
				return tk_errorf(err, -EINVAL,
						 "%s[%d]: \"%.64s\" is not a node name", key, i,
						 v[i]);
			for (int k = 0; k < i; k++)
				if (strcmp(v[k], v[i]) == 0)
					return tk_errorf(err, -EINVAL, "%s: names %s twice", key,
							 v[i]);
		}
	}
	for (int i = 0; i < r->nnodelist; i++)
		for (int k = 0; k < r->nexclude; k++)
			if (strcmp(r->nodelist[i], r->exclude[k]) == 0)
				return tk_errorf(err, -EINVAL, "nodelist and exclude both name %s",
						 r->nodelist[i]);
	if (r->nnodelist && r->nnodelist < nodes)
		return tk_errorf(err, -EINVAL,
				 "nodelist: names %d node%s, but the job asks for %lld nodes",
				 r->nnodelist, r->nnodelist == 1 ? "" : "s", (long long)nodes);
	return 0;
}

/* A list of names at key ("tolerate": "inference,dev"; "pool"), kept
 * canonical into *ret; an empty one is none. */
static int names_unpack(json_t *j, const char *key, char **ret, struct tk_error *err)
{
	char in[MODEL_LABELS_MAX], out[MODEL_LABELS_MAX];
	int rc;
	if (!json_object_get(j, key))
		return 0;
	if ((rc = mj_strbuf(j, key, false, true, in, sizeof(in), err)) < 0 ||
	    (rc = model_names_parse(key, in, out, sizeof(out), err)) < 0)
		return rc;
	if (out[0])
		*ret = xstrdup(out);
	return 0;
}

int job_request_unpack(json_t *j, struct job_request *ret, struct tk_error *err)
{
	struct job_request r = {0};
	int64_t nodes, tpn, cpus, mem, tl, grace, requeue, gmem, switches;
	double gpus, gtf;
	bool marks = true;
	int rc, cap;
	char level[MODEL_NAME_MAX];
	if ((rc = mj_check_keys(j, NULL, job_request_keys, err)) < 0)
		return rc;
	if ((rc = mj_strv_unpack(j, "command", true, MODEL_MAX_ARGS, MODEL_MAX_ARG_BYTES,
				 MODEL_MAX_ARG_BYTES, &r.argv, &r.argc, err)) < 0 ||
	    (rc = mj_str(j, "name", false, MODEL_NAME_MAX - 1, true, NULL, &r.name, err)) < 0 ||
	    (rc = mj_str(j, "cwd", true, MODEL_MAX_PATH, false, NULL, &r.cwd, err)) < 0 ||
	    (rc = mj_str(j, "output", false, MODEL_MAX_PATH, false, MODEL_DEFAULT_OUTPUT, &r.output,
			 err)) < 0 ||
	    (rc = mj_env_unpack(j, "env", &r.env, &r.nenv, err)) < 0 ||
	    (rc = mj_int(j, "nodes", false, 1, MODEL_MAX_NODES, 1, &nodes, err)) < 0 ||
	    (rc = mj_int(j, "tasks_per_node", false, 1, MODEL_MAX_TASKS_PER_NODE, 1, &tpn, err)) <
		    0 ||
	    (rc = mj_num(j, "gpus_per_task", false, 0, MODEL_MAX_GPUS_PER_TASK, 0, &gpus, err)) <
		    0 ||
	    (rc = mj_strv_unpack(j, "gpu_types", false, MODEL_MAX_GPU_TYPES, 4096,
				 MODEL_NAME_MAX - 1, &r.gpu_types, &r.ngpu_types, err)) < 0 ||
	    (rc = mj_int(j, "cpus_per_task", false, 0, MODEL_MAX_CPUS, 0, &cpus, err)) < 0 ||
	    (rc = mj_int(j, "mem_mib", false, 0, MODEL_MAX_MEM_MIB, 0, &mem, err)) < 0 ||
	    (rc = mj_int(j, "time_limit_s", false, 0, MODEL_MAX_TIME_LIMIT_S, 0, &tl, err)) < 0 ||
	    (rc = mj_int(j, "grace_s", false, 0, MODEL_MAX_GRACE_S, MODEL_DEFAULT_GRACE_S, &grace,
			 err)) < 0 ||
	    (rc = mj_int(j, "requeue", false, 0, MODEL_MAX_REQUEUE, 0, &requeue, err)) < 0 ||
	    (rc = mj_str(j, "class", false, MODEL_NAME_MAX - 1, true, NULL, &r.cls, err)) < 0 ||
	    (rc = mj_str(j, "queue", false, MODEL_NAME_MAX - 1, true, NULL, &r.queue, err)) < 0 ||
	    (rc = mj_str(j, "constraint", false, MODEL_CONSTRAINT_MAX - 1, true, NULL,
			 &r.constraint, err)) < 0 ||
	    (r.constraint && (rc = job_constraint_check(r.constraint, err)) < 0) ||
	    (rc = names_unpack(j, "tolerate", &r.tolerate, err)) < 0 ||
	    (rc = names_unpack(j, "pool", &r.pool, err)) < 0 ||
	    (rc = mj_str(j, "spread", false, MODEL_NAME_MAX + 8, true, NULL, &r.spread, err)) < 0 ||
	    (r.spread && (rc = job_spread_parse(r.spread, level, sizeof(level), &cap, err)) < 0) ||
	    (rc = mj_str(j, "within", false, MODEL_NAME_MAX, true, NULL, &r.within, err)) < 0 ||
	    (r.within && (rc = job_spread_parse(r.within, level, sizeof(level), NULL, err)) < 0) ||
	    (rc = mj_int(j, "gpu_mem_mib", false, 0, MODEL_MAX_MEM_MIB, 0, &gmem, err)) < 0 ||
	    (rc = mj_num(j, "gpu_tflops", false, 0, 1e6, 0, &gtf, err)) < 0 ||
	    (rc = mj_int(j, "switches", false, 0, MODEL_MAX_SWITCHES, 0, &switches, err)) < 0 ||
	    (rc = mj_bool(j, "mixed_types", false, false, &r.mixed_types, err)) < 0 ||
	    (rc = mj_str(j, "image", false, MODEL_IMAGE_MAX - 1, true, NULL, &r.image, err)) < 0 ||
	    (rc = mj_strv_unpack(j, "mounts", false, MODEL_MAX_MOUNTS,
				 (size_t)MODEL_MAX_MOUNTS * 2 * MODEL_MAX_PATH, 2 * MODEL_MAX_PATH,
				 &r.mounts, &r.nmounts, err)) < 0 ||
	    (rc = deps_unpack(j, &r, err)) < 0 || (rc = signal_unpack(j, &r, err)) < 0 ||
	    (rc = ckpt_signal_unpack(j, &r, err)) < 0 ||
	    (rc = mj_int(j, "begin_ms", false, 0, INT64_MAX, 0, &r.begin_ms, err)) < 0 ||
	    (rc = mj_str(j, "comment", false, MODEL_MAX_COMMENT, true, NULL, &r.comment, err)) <
		    0 ||
	    (rc = mj_str(j, "error", false, MODEL_MAX_PATH, false, NULL, &r.error, err)) < 0 ||
	    (rc = mj_bool(j, "slurm_env", false, false, &r.slurm_env, err)) < 0 ||
	    (rc = mj_bool(j, "nccl_check", false, false, &r.nccl_check, err)) < 0 ||
	    (rc = mj_bool(j, "preemptible_any", false, false, &r.preemptible_any, err)) < 0 ||
	    (rc = mj_str(j, "array", false, 4096, true, NULL, &r.array, err)) < 0 ||
	    (rc = mj_strv_unpack(j, "nodelist", false, MODEL_MAX_NODES,
				 (size_t)MODEL_MAX_NODES * MODEL_NAME_MAX, MODEL_NAME_MAX - 1,
				 &r.nodelist, &r.nnodelist, err)) < 0 ||
	    (rc = mj_strv_unpack(j, "exclude", false, MODEL_MAX_NODES,
				 (size_t)MODEL_MAX_NODES * MODEL_NAME_MAX, MODEL_NAME_MAX - 1,
				 &r.exclude, &r.nexclude, err)) < 0 ||
	    (rc = mj_bool(j, "exclusive", false, false, &r.exclusive, err)) < 0 ||
	    (rc = mj_bool(j, "pty", false, false, &r.pty, err)) < 0 ||
	    (rc = mj_bool(j, "attempt_marks", false, true, &marks, err)) < 0 ||
	    (rc = node_lists_check(&r, nodes, err)) < 0)
		goto fail;
	/* its characters only: the server expands it (model_array_parse) once,
	 * at submission, and each element keeps it as it was given */
	if (r.array && strspn(r.array, "0123456789,-:%") != strlen(r.array)) {
		rc = tk_errorf(err, -EINVAL,
			       "array: \"%.64s\" is not a list of indices such as 0-999%%50 or "
			       "1,3,5-9",
			       r.array);
		goto fail;
	}
	char marker[16] = "", on_stall[16] = "";
	if ((rc = mj_int(j, "stall_after_s", false, 0, MODEL_MAX_TIME_LIMIT_S, 0, &r.stall_after_s,
			 err)) < 0 ||
	    (rc = mj_strbuf(j, "on_stall", false, true, on_stall, sizeof(on_stall), err)) < 0)
		goto fail;
	if (on_stall[0] && stall_action_parse(on_stall, &r.on_stall) < 0) {
		rc = tk_errorf(err, -EINVAL,
			       "on_stall: must be notify, requeue or cancel, got \"%s\"", on_stall);
		goto fail;
	}
	char restart[16] = "";
	int64_t spares;
	if ((rc = mj_strbuf(j, "restart", false, true, restart, sizeof(restart), err)) < 0 ||
	    (rc = mj_int(j, "spares", false, 0, MODEL_MAX_NODES - 1, 0, &spares, err)) < 0)
		goto fail;
	r.spares = (int)spares;
	int64_t nmax;
	if ((rc = mj_int(j, "nodes_max", false, 0, MODEL_MAX_NODES, 0, &nmax, err)) < 0)
		goto fail;
	if (nmax && (nmax < nodes || r.pty)) {
		rc = r.pty ? tk_errorf(err, -EINVAL,
				       "nodes_max: a job under a terminal runs on one node")
			   : tk_errorf(err, -EINVAL,
				       "nodes_max: %lld is fewer than nodes (%lld): an elastic "
				       "gang runs on nodes up to nodes_max",
				       (long long)nmax, (long long)nodes);
		goto fail;
	}
	r.nodes_max = nmax > nodes ? (int)nmax : 0; /* MIN:MIN is no range */
	if (restart[0] && restart_mode_parse(restart, &r.restart) < 0) {
		rc = tk_errorf(err, -EINVAL,
			       "restart: must be auto, in-place or requeue, got \"%s\"", restart);
		goto fail;
	}
	if (r.spares && (r.restart == RESTART_REQUEUE || r.pty)) {
		rc = tk_errorf(err, -EINVAL,
			       "spares: a job's spares take a failed node's place when it restarts "
			       "in place; this one %s",
			       r.pty ? "runs under a terminal"
				     : "goes back to its queue (restart)");
		goto fail;
	}
	if ((rc = mj_strbuf(j, "ckpt_marker", false, true, marker, sizeof(marker), err)) < 0)
		goto fail;
	if (marker[0] && ckpt_marker_parse(marker, &r.ckpt_marker) < 0) {
		rc = tk_errorf(err, -EINVAL,
			       "ckpt_marker: must be tenk, dcp, deepspeed or megatron, got \"%s\"",
			       marker);
		goto fail;
	}
	if (r.image && !model_image_valid(r.image)) {
		rc = tk_errorf(err, -EINVAL,
			       "image: \"%.64s\" is not an image reference "
			       "([REGISTRY/]PATH[:TAG][@DIGEST])",
			       r.image);
		goto fail;
	}
	if (r.pty && (nodes != 1 || tpn != 1 || r.image)) {
		rc = tk_errorf(
			err, -EINVAL,
			r.image ? "pty: an interactive job runs on the host, not in an image "
				  "(yet)"
				: "pty: an interactive job is one task on one node; got %lld "
				  "node(s) x %lld task(s)",
			(long long)nodes, (long long)tpn);
		goto fail;
	}
	if (r.nmounts && !r.image) {
		rc = tk_errorf(err, -EINVAL, "mounts: are for a job in an image (add \"image\")");
		goto fail;
	}
	for (int i = 0; i < r.nmounts; i++) {
		struct mount_spec m;
		if ((rc = model_mount_parse(r.mounts[i], false, &m, err)) < 0) {
			mj_prefix(err, "mounts[%d]", i);
			goto fail;
		}
	}
	if ((r.cls && !model_name_valid(r.cls)) || (r.queue && !model_name_valid(r.queue))) {
		rc = tk_errorf(err, -EINVAL,
			       "%s: \"%s\" is not a valid name (letters, digits, '.', "
			       "'_', '-')",
			       r.cls && !model_name_valid(r.cls) ? "class" : "queue",
			       r.cls && !model_name_valid(r.cls) ? r.cls : r.queue);
		goto fail;
	}
	r.gpu_mem_mib = gmem;
	r.gpu_tflops = gtf;
	r.switches = (int)switches;
	if ((gmem || gtf > 0 || r.mixed_types) && gpus == 0) {
		rc = tk_errorf(err, -EINVAL, "%s: asks about accelerators, but gpus_per_task is 0",
			       gmem	 ? "gpu_mem_mib"
			       : gtf > 0 ? "gpu_tflops"
					 : "mixed_types");
		goto fail;
	}
	if (r.cwd[0] != '/') {
		rc = tk_errorf(err, -EINVAL, "cwd: must be an absolute path, got \"%.64s\"", r.cwd);
		goto fail;
	}
	for (int i = 0; i < r.ngpu_types; i++)
		if (!model_name_valid(r.gpu_types[i])) {
			rc = tk_errorf(err, -EINVAL, "gpu_types[%d]: \"%s\" is not a model name", i,
				       r.gpu_types[i]);
			goto fail;
		}
	double milli = gpus * MODEL_MILLI;
	if (fabs(milli - round(milli)) > 1e-6) {
		rc = tk_errorf(err, -EINVAL,
			       "gpus_per_task: must be a whole number or a fraction in steps of "
			       "0.001, got %g",
			       gpus);
		goto fail;
	}
	r.gpu_milli = (int)round(milli);
	if (r.gpu_milli % MODEL_MILLI != 0) {
		if (r.gpu_milli > MODEL_MILLI) {
			rc = tk_errorf(err, -EINVAL,
				       "gpus_per_task: a fraction must be below 1, got %g", gpus);
			goto fail;
		}
		if (nodes != 1 || tpn != 1) {
			rc = tk_errorf(err, -EINVAL,
				       "gpus_per_task: a fractional accelerator (%g) is for "
				       "single-node, single-task jobs; got %lld nodes x %lld tasks",
				       gpus, (long long)nodes, (long long)tpn);
			goto fail;
		}
	}
	if (r.gpu_milli > 0 && tpn * r.gpu_milli > (int64_t)MODEL_MAX_ACCELS * MODEL_MILLI) {
		rc = tk_errorf(err, -ERANGE,
			       "gpus_per_task: %lld tasks x %g accelerators exceeds %d per node",
			       (long long)tpn, gpus, MODEL_MAX_ACCELS);
		goto fail;
	}
	if ((rc = mj_str(j, "service", false, MODEL_NAME_MAX - 1, true, NULL, &r.service, err)) <
		    0 ||
	    (r.service && !model_name_valid(r.service) &&
	     (rc = tk_errorf(err, -EINVAL, "service: \"%s\" is not a valid name", r.service)) < 0))
		goto fail;
	json_t *probe = json_object_get(j, "probe");
	if (probe) {
		struct job_probe p;
		if ((rc = job_probe_unpack(probe, &p, err)) < 0)
			goto fail;
		if (nodes != 1 || tpn != 1) {
			rc = tk_errorf(err, -EINVAL,
				       "probe: a probed job is one task on one node (a service's "
				       "replica); got %lld node(s) x %lld task(s)",
				       (long long)nodes, (long long)tpn);
			goto fail;
		}
		r.probe = xmalloc(sizeof(*r.probe));
		*r.probe = p;
	}
	if (!r.name) {
		const char *base = strrchr(r.argv[0], '/');
		base = base ? base + 1 : r.argv[0];
		r.name = xstrndup(*base ? base : "job", MODEL_NAME_MAX - 1);
		for (char *p = r.name; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '_';
	}
	r.nodes = (int)nodes;
	r.tasks_per_node = (int)tpn;
	r.cpus_per_task = (int)cpus;
	r.no_attempt_marks = !marks;
	r.mem_mib = mem;
	r.time_limit_s = tl;
	r.grace_s = grace;
	r.requeue = (int)requeue;
	*ret = r;
	return 0;
fail:
	job_request_release(&r);
	return rc;
}

/* ---- images and mounts ----------------------------------------------------- */

bool model_image_valid(const char *ref)
{
	size_t n = strlen(ref);
	if (n == 0 || n >= MODEL_IMAGE_MAX || ref[0] == '-' || ref[0] == ':')
		return false;
	for (const char *p = ref; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._/:@-", *p))
			return false;
	return true;
}

bool model_image_allowed(const char *pattern, const char *ref)
{
	return fnmatch(pattern, ref, 0) == 0;
}

/* An absolute path with no ':' or ',' (Podman's separators) and no "..". */
static bool mount_path_valid(const char *p)
{
	if (p[0] != '/' || strpbrk(p, ":,") || strlen(p) >= MODEL_MAX_PATH)
		return false;
	for (const char *q = p; *q; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			return false;
	for (const char *q = strstr(p, ".."); q; q = strstr(q + 1, ".."))
		if (q[-1] == '/' && (q[2] == '/' || q[2] == '\0'))
			return false;
	return true;
}

/* Is p the folder f or under it? */
static bool path_under(const char *p, const char *f)
{
	size_t n = strlen(f);
	return strncmp(p, f, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int model_mount_parse(const char *text, bool dot, struct mount_spec *ret, struct tk_error *err)
{
	memset(ret, 0, sizeof(*ret));
	char buf[2 * MODEL_MAX_PATH + 8];
	if (strlen(text) >= sizeof(buf))
		return tk_errorf(err, -E2BIG, "\"%.32s...\" is too long", text);
	snprintf(buf, sizeof(buf), "%s", text);
	char *parts[4] = {0};
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ":", &save); t && n < 4;
	     t = strtok_r(NULL, ":", &save))
		parts[n++] = t;
	if (n == 3 && strcmp(parts[2], "ro") != 0 && strcmp(parts[2], "rw") != 0)
		return tk_errorf(err, -EINVAL,
				 "\"%.64s\": the third part must be ro or rw, got "
				 "\"%.16s\"",
				 text, parts[2]);
	if (n == 0 || n > 3 || text[0] == ':' || text[strlen(text) - 1] == ':' ||
	    strstr(text, "::"))
		return tk_errorf(err, -EINVAL, "\"%.64s\" is not SRC[:DST][:ro]", text);
	if (n == 2 && (strcmp(parts[1], "ro") == 0 || strcmp(parts[1], "rw") == 0)) {
		parts[2] = parts[1];
		parts[1] = NULL;
	}
	const char *src = parts[0], *dst = parts[1] ? parts[1] : parts[0];
	bool is_dot = dot && strcmp(src, ".") == 0;
	if (!is_dot && !mount_path_valid(src))
		return tk_errorf(err, -EINVAL,
				 "\"%.64s\": the host folder must be an absolute path without ':', "
				 "',' or \"..\"%s",
				 text, dot ? " (or \".\", the job's working folder)" : "");
	if (!(is_dot && !parts[1]) && !mount_path_valid(dst))
		return tk_errorf(err, -EINVAL,
				 "\"%.64s\": where it goes in the container must be an absolute "
				 "path without ':', ',' or \"..\"",
				 text);
	if (!(is_dot && !parts[1]) && (strcmp(dst, "/") == 0 || path_under(dst, "/proc") ||
				       path_under(dst, "/sys") || path_under(dst, "/dev")))
		return tk_errorf(err, -EINVAL,
				 "\"%.64s\": %s belongs to the container; mount elsewhere", text,
				 dst);
	snprintf(ret->src, sizeof(ret->src), "%s", src);
	snprintf(ret->dst, sizeof(ret->dst), "%s", dst);
	ret->ro = parts[2] && strcmp(parts[2], "ro") == 0;
	return 0;
}

bool model_cdi_has_gpus(const char *dir)
{
	DIR *d = opendir(dir);
	bool found = false;
	for (struct dirent *e; d && !found && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (e->d_name[0] == '.' || n <= 5 ||
		    (strcmp(e->d_name + n - 5, ".yaml") != 0 &&
		     strcmp(e->d_name + n - 5, ".json") != 0))
			continue;
		_cleanup_free_ char *path = xasprintf("%s/%s", dir, e->d_name);
		char *text = NULL;
		if (tk_read_file(path, 16 << 20, &text, NULL) == 0)
			found = strstr(text, "nvidia.com/gpu") != NULL;
		free(text);
	}
	if (d)
		closedir(d);
	return found;
}

/* ---- attempts and jobs ---------------------------------------------------- */

void attempt_release(struct attempt *a)
{
	for (int i = 0; i < a->npend; i++)
		ckpt_release(&a->pend[i]);
	free(a->pend);
	a->pend = NULL;
	a->npend = 0;
	free(a->train);
	a->train = NULL;
	free(a->nodes);
	free(a->tasks);
	a->nodes = NULL;
	a->tasks = NULL;
	a->nnodes = a->ntasks = 0;
}

void job_release(struct job *j)
{
	job_request_release(&j->req);
	for (int i = 0; i < j->nattempts; i++)
		attempt_release(&j->attempts[i]);
	free(j->attempts);
	j->attempts = NULL;
	j->nattempts = 0;
	for (int i = 0; i < j->nckpts; i++)
		ckpt_release(&j->ckpts[i]);
	free(j->ckpts);
	j->ckpts = NULL;
	j->nckpts = 0;
}

static const char *const attempt_end_names[ATTEMPT_END_MAX] = {
	[ATTEMPT_END_NONE] = "",
	[ATTEMPT_END_COMPLETED] = "completed",
	[ATTEMPT_END_FAILED] = "failed",
	[ATTEMPT_END_TIMEOUT] = "timeout",
	[ATTEMPT_END_CANCELLED] = "cancelled",
	[ATTEMPT_END_PREEMPTED] = "preempted",
	[ATTEMPT_END_NODE_LOST] = "node_lost",
	[ATTEMPT_END_REQUEUED] = "requeued",
	[ATTEMPT_END_RESIZED] = "resized",
};

const char *attempt_end_name(enum attempt_end e)
{
	return (unsigned)e < ATTEMPT_END_MAX ? attempt_end_names[e] : "?";
}

static const char *const restore_names[RESTORE_STATE_MAX] = {"waiting", "done", "failed"};

const char *restore_state_name(enum restore_state r)
{
	return r >= 0 && r < RESTORE_STATE_MAX ? restore_names[r] : "?";
}

/* Checkpoints as an array, and back (at most max). */
static json_t *ckpts_pack(const struct ckpt *c, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, ckpt_pack(&c[i]));
	return a;
}

static int ckpts_unpack(json_t *arr, const char *what, int max, struct ckpt **ret, int *ret_n,
			struct tk_error *err)
{
	*ret = NULL;
	*ret_n = 0;
	if (!arr)
		return 0;
	if (!json_is_array(arr) || json_array_size(arr) > (size_t)max)
		return tk_errorf(err, -EINVAL, "%s: must be an array of at most %d checkpoints",
				 what, max);
	*ret = xcalloc(json_array_size(arr) + 1, sizeof(**ret));
	size_t i;
	json_t *v;
	json_array_foreach (arr, i, v) {
		int r = ckpt_unpack(v, &(*ret)[i], err);
		if (r < 0) {
			mj_prefix(err, "%s[%zu]", what, i);
			return r;
		}
		*ret_n = (int)i + 1;
	}
	return 0;
}

struct attempt *job_current_attempt(const struct job *j)
{
	return j->nattempts ? &j->attempts[j->nattempts - 1] : NULL;
}

static json_t *attempt_pack(const struct attempt *a)
{
	json_t *nodes = json_array();
	for (int i = 0; i < a->nnodes; i++) {
		const struct attempt_node *n = &a->nodes[i];
		json_t *devs = json_array();
		for (int d = 0; d < n->ndev; d++)
			json_array_append_new(devs, json_integer(n->devs[d]));
		json_t *no = json_pack("{s:s, s:o, s:i}", "name", n->name, "devices", devs, "milli",
				       n->milli);
		if (n->cpu_ms || n->mem_peak_mib) {
			json_object_set_new(no, "cpu_ms", json_integer(n->cpu_ms));
			json_object_set_new(no, "mem_peak_mib", json_integer(n->mem_peak_mib));
		}
		if (n->model[0])
			json_object_set_new(no, "model", json_string(n->model));
		if (n->energy_mj >= 0)
			json_object_set_new(no, "energy_mj", json_integer(n->energy_mj));
		if (n->gpu_busy_ms)
			json_object_set_new(no, "gpu_busy_ms", json_integer(n->gpu_busy_ms));
		if (n->digest[0])
			json_object_set_new(no, "digest", json_string(n->digest));
		bool said = false;
		for (int t = 0; t < NCCL_TR_MAX; t++)
			said |= n->nccl[t] > 0;
		if (said) {
			json_t *c = json_object();
			for (int t = 0; t < NCCL_TR_MAX; t++)
				if (n->nccl[t])
					json_object_set_new(
						c,
						model_nccl_transport_name((enum nccl_transport)t),
						json_integer(n->nccl[t]));
			json_t *nc = json_pack("{s:o, s:b}", "connections", c, "fallback",
					       n->nccl_fallback);
			if (n->nccl_network[0])
				json_object_set_new(nc, "network", json_string(n->nccl_network));
			if (n->nccl_line[0])
				json_object_set_new(nc, "line", json_string(n->nccl_line));
			json_object_set_new(no, "nccl", nc);
		}
		if (n->ready_ms) {
			json_object_set_new(no, "ready", json_boolean(n->ready));
			json_object_set_new(no, "ready_ms", json_integer(n->ready_ms));
		}
		if (a->restore_tag[0]) {
			json_object_set_new(no, "restore",
					    json_string(restore_state_name(n->restore)));
			json_object_set_new(no, "restore_bytes", json_integer(n->restore_bytes));
			json_object_set_new(no, "restore_dur_ms", json_integer(n->restore_dur_ms));
		}
		json_array_append_new(nodes, no);
	}
	json_t *tasks = json_array();
	for (int i = 0; i < a->ntasks; i++) {
		const struct task_status *t = &a->tasks[i];
		json_t *to =
			json_pack("{s:s, s:i, s:i, s:I, s:I}", "state", task_state_name(t->state),
				  "exit_code", t->exit_code, "signal", t->signal, "start_ms",
				  (json_int_t)t->start_ms, "end_ms", (json_int_t)t->end_ms);
		if (t->out_from)
			json_object_set_new(to, "out_from", json_integer(t->out_from));
		if (t->err_from)
			json_object_set_new(to, "err_from", json_integer(t->err_from));
		json_array_append_new(tasks, to);
	}
	json_t *o = json_pack("{s:i, s:I, s:I, s:b, s:s, s:i, s:s, s:o, s:o}", "number", a->number,
			      "start_ms", (json_int_t)a->start_ms, "end_ms", (json_int_t)a->end_ms,
			      "ended", a->ended, "master_addr", a->master_addr, "master_port",
			      a->master_port, "reason", a->reason, "nodes", nodes, "tasks", tasks);
	if (a->end != ATTEMPT_END_NONE)
		json_object_set_new(o, "end", json_string(attempt_end_name(a->end)));
	if (a->fail_ms)
		json_object_set_new(o, "fail_ms", json_integer(a->fail_ms));
	if (a->ckpt_ms)
		json_object_set_new(o, "checkpoint_write_ms", json_integer(a->ckpt_ms));
	if (a->in_place)
		json_object_set_new(o, "in_place", json_true());
	if (a->replaced[0])
		json_object_set_new(o, "replaced", json_string(a->replaced));
	if (a->spare_mdev_ms)
		json_object_set_new(o, "spare_mdev_ms", json_integer(a->spare_mdev_ms));
	if (a->spare_node_ms)
		json_object_set_new(o, "spare_node_ms", json_integer(a->spare_node_ms));
	if (a->digest[0])
		json_object_set_new(o, "digest", json_string(a->digest));
	if (a->restore_tag[0] || a->restore_go)
		json_object_set_new(o, "restore",
				    json_pack("{s:s, s:I, s:i, s:b, s:I}", "tag", a->restore_tag,
					      "step", (json_int_t)a->restore_step, "attempt",
					      a->restore_attempt, "go", a->restore_go, "ms",
					      (json_int_t)a->restore_ms));
	if (a->npend)
		json_object_set_new(o, "pending_checkpoints", ckpts_pack(a->pend, a->npend));
	if (a->train)
		json_object_set_new(o, "metrics", train_metrics_pack(a->train));
	return o;
}

json_t *job_pack(const struct job *j)
{
	json_t *attempts = json_array();
	for (int i = 0; i < j->nattempts; i++)
		json_array_append_new(attempts, attempt_pack(&j->attempts[i]));
	json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:s, s:o, s:o}", "id",
			      (json_int_t)j->id, "name", j->req.name, "owner", j->owner, "state",
			      job_state_name(j->state), "submit_ms", (json_int_t)j->submit_ms,
			      "end_ms", (json_int_t)j->end_ms, "exit_code", j->exit_code,
			      "failures", j->failures, "reason", j->reason, "request",
			      job_request_pack(&j->req), "attempts", attempts);
	if (j->system)
		json_object_set_new(o, "system", json_true());
	if (j->run_as[0])
		json_object_set_new(o, "run_as", json_string(j->run_as));
	if (j->nckpts)
		json_object_set_new(o, "checkpoints", ckpts_pack(j->ckpts, j->nckpts));
	if (j->held)
		json_object_set_new(o, "held", json_true());
	if (j->las_from)
		json_object_set_new(o, "las_from_attempt", json_integer(j->las_from));
	if (j->array_job)
		json_object_set_new(o, "array",
				    json_pack("{s:I, s:i, s:i, s:i}", "job",
					      (json_int_t)j->array_job, "index", j->array_index,
					      "cap", j->array_cap, "count", j->array_count));
	return o;
}

static int job_array_unpack(json_t *jj, struct job *j, struct tk_error *err)
{
	json_t *a = json_object_get(jj, "array");
	if (!a)
		return 0;
	static const char *const keys[] = {"job", "index", "cap", "count", NULL};
	int64_t index, cap, count;
	int r;
	if ((r = mj_check_keys(a, "array", keys, err)) < 0 ||
	    (r = mj_int(a, "job", true, 1, INT64_MAX, 0, &j->array_job, err)) < 0 ||
	    (r = mj_int(a, "index", true, 0, MODEL_MAX_ARRAY_INDEX, 0, &index, err)) < 0 ||
	    (r = mj_int(a, "cap", true, 0, MODEL_MAX_ARRAY, 0, &cap, err)) < 0 ||
	    (r = mj_int(a, "count", true, 1, MODEL_MAX_ARRAY, 1, &count, err)) < 0) {
		mj_prefix(err, "array");
		return r;
	}
	j->array_index = (int)index;
	j->array_cap = (int)cap;
	j->array_count = (int)count;
	return 0;
}

static int task_unpack(json_t *t, struct task_status *ts, struct tk_error *err)
{
	static const char *const keys[] = {"state",  "exit_code", "signal",   "start_ms",
					   "end_ms", "out_from",  "err_from", NULL};
	char state[16] = "";
	int64_t code, sig, start, end;
	int r;
	if ((r = mj_check_keys(t, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(t, "state", true, true, state, sizeof(state), err)) < 0 ||
	    (r = mj_int(t, "exit_code", true, -1, 255, 0, &code, err)) < 0 ||
	    (r = mj_int(t, "signal", true, 0, 128, 0, &sig, err)) < 0 ||
	    (r = mj_int(t, "start_ms", true, 0, INT64_MAX, 0, &start, err)) < 0 ||
	    (r = mj_int(t, "end_ms", true, 0, INT64_MAX, 0, &end, err)) < 0 ||
	    (r = mj_int(t, "out_from", false, 0, INT64_MAX, 0, &ts->out_from, err)) < 0 ||
	    (r = mj_int(t, "err_from", false, 0, INT64_MAX, 0, &ts->err_from, err)) < 0)
		return r;
	int s;
	for (s = 0; s < TASK_STATE_MAX; s++)
		if (strcmp(state, task_state_names[s]) == 0)
			break;
	if (s == TASK_STATE_MAX)
		return tk_errorf(err, -EINVAL, "state: unknown task state \"%s\"", state);
	ts->state = (enum task_state)s;
	ts->exit_code = (int)code;
	ts->signal = (int)sig;
	ts->start_ms = start;
	ts->end_ms = end;
	return 0;
}

static int attempt_node_unpack(json_t *nj, struct attempt_node *n, struct tk_error *err)
{
	static const char *const keys[] = {
		"name",		  "devices", "milli",	  "cpu_ms",
		"mem_peak_mib",	  "digest",  "restore",	  "restore_bytes",
		"restore_dur_ms", "model",   "energy_mj", "gpu_busy_ms",
		"nccl",		  "ready",   "ready_ms",  NULL};
	int64_t milli;
	char restore[16] = "";
	int r;
	if ((r = mj_check_keys(nj, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(nj, "name", true, true, n->name, sizeof(n->name), err)) < 0 ||
	    (r = mj_int(nj, "milli", true, 0, MODEL_MILLI, 0, &milli, err)) < 0 ||
	    (r = mj_int(nj, "cpu_ms", false, 0, INT64_MAX, 0, &n->cpu_ms, err)) < 0 ||
	    (r = mj_int(nj, "mem_peak_mib", false, 0, INT64_MAX, 0, &n->mem_peak_mib, err)) < 0 ||
	    (r = mj_strbuf(nj, "model", false, true, n->model, sizeof(n->model), err)) < 0 ||
	    (r = mj_int(nj, "energy_mj", false, 0, INT64_MAX, -1, &n->energy_mj, err)) < 0 ||
	    (r = mj_int(nj, "gpu_busy_ms", false, 0, INT64_MAX, 0, &n->gpu_busy_ms, err)) < 0 ||
	    (r = mj_strbuf(nj, "digest", false, true, n->digest, sizeof(n->digest), err)) < 0 ||
	    (r = mj_strbuf(nj, "restore", false, true, restore, sizeof(restore), err)) < 0 ||
	    (r = mj_int(nj, "restore_bytes", false, 0, INT64_MAX, 0, &n->restore_bytes, err)) < 0 ||
	    (r = mj_int(nj, "restore_dur_ms", false, 0, INT64_MAX, 0, &n->restore_dur_ms, err)) <
		    0 ||
	    (r = mj_bool(nj, "ready", false, false, &n->ready, err)) < 0 ||
	    (r = mj_int(nj, "ready_ms", false, 0, INT64_MAX, 0, &n->ready_ms, err)) < 0)
		return r;
	json_t *nc = json_object_get(nj, "nccl");
	if (nc) {
		static const char *const ckeys[] = {"connections", "fallback", "network", "line",
						    NULL};
		json_t *c = json_object_get(nc, "connections");
		if ((r = mj_check_keys(nc, "nccl", ckeys, err)) < 0 ||
		    (r = mj_bool(nc, "fallback", false, false, &n->nccl_fallback, err)) < 0 ||
		    (r = mj_strbuf(nc, "network", false, true, n->nccl_network,
				   sizeof(n->nccl_network), err)) < 0 ||
		    (r = mj_strbuf(nc, "line", false, true, n->nccl_line, sizeof(n->nccl_line),
				   err)) < 0)
			return r;
		if (!json_is_object(c))
			return tk_errorf(err, -EINVAL, "nccl.connections: must be an object");
		for (int t = 0; t < NCCL_TR_MAX; t++) {
			int64_t k;
			if ((r = mj_int(c, model_nccl_transport_name((enum nccl_transport)t), false,
					0, INT32_MAX, 0, &k, err)) < 0) {
				mj_prefix(err, "nccl.connections");
				return r;
			}
			n->nccl[t] = (int)k;
		}
	}
	n->restore = RESTORE_WAITING;
	for (int k = 0; restore[0] && k < (int)ARRAY_SIZE(restore_names); k++)
		if (strcmp(restore, restore_names[k]) == 0)
			n->restore = (enum restore_state)k;
	n->milli = (int)milli;
	json_t *devs = json_object_get(nj, "devices");
	if (!json_is_array(devs) || json_array_size(devs) > MODEL_MAX_ACCELS)
		return tk_errorf(err, -EINVAL, "devices: must be an array of at most %d indices",
				 MODEL_MAX_ACCELS);
	size_t d;
	json_t *dv;
	json_array_foreach (devs, d, dv) {
		if (!json_is_integer(dv) || json_integer_value(dv) < 0 ||
		    json_integer_value(dv) >= MODEL_MAX_ACCELS)
			return tk_errorf(err, -EINVAL, "devices[%zu]: must be a device index", d);
		n->devs[d] = (int)json_integer_value(dv);
	}
	n->ndev = (int)json_array_size(devs);
	return 0;
}

static int attempt_unpack(json_t *aj, struct attempt *a, struct tk_error *err)
{
	static const char *const keys[] = {
		"number",      "start_ms",    "end_ms",	       "ended",
		"master_addr", "master_port", "reason",	       "nodes",
		"tasks",       "digest",      "restore",       "pending_checkpoints",
		"metrics",     "end",	      "fail_ms",       "checkpoint_write_ms",
		"in_place",    "replaced",    "spare_mdev_ms", "spare_node_ms",
		NULL};
	int64_t number, start, end, port;
	int r, cause;
	memset(a, 0, sizeof(*a));
	json_t *rs = json_object_get(aj, "restore");
	if (rs) {
		static const char *const rkeys[] = {"tag", "step", "attempt", "go", "ms", NULL};
		int64_t ra;
		if ((r = mj_check_keys(rs, "restore", rkeys, err)) < 0 ||
		    (r = mj_strbuf(rs, "tag", true, true, a->restore_tag, sizeof(a->restore_tag),
				   err)) < 0 ||
		    (r = mj_int(rs, "step", true, 0, INT64_MAX, 0, &a->restore_step, err)) < 0 ||
		    (r = mj_int(rs, "attempt", true, 0, MODEL_MAX_ATTEMPTS, 0, &ra, err)) < 0 ||
		    (r = mj_bool(rs, "go", true, false, &a->restore_go, err)) < 0 ||
		    (r = mj_int(rs, "ms", true, 0, INT64_MAX, 0, &a->restore_ms, err)) < 0) {
			mj_prefix(err, "restore");
			return r;
		}
		a->restore_attempt = (int)ra;
	}
	if ((r = ckpts_unpack(json_object_get(aj, "pending_checkpoints"), "pending_checkpoints",
			      MODEL_MAX_CKPT_PENDING, &a->pend, &a->npend, err)) < 0)
		return r;
	json_t *tm = json_object_get(aj, "metrics");
	if (tm) {
		a->train = xcalloc(1, sizeof(*a->train));
		if ((r = train_metrics_unpack(tm, a->train, err)) < 0) {
			mj_prefix(err, "metrics");
			return r;
		}
	}
	if ((r = mj_check_keys(aj, NULL, keys, err)) < 0 ||
	    (r = mj_int(aj, "number", true, 1, MODEL_MAX_ATTEMPTS, 1, &number, err)) < 0 ||
	    (r = mj_int(aj, "start_ms", true, 0, INT64_MAX, 0, &start, err)) < 0 ||
	    (r = mj_int(aj, "end_ms", true, 0, INT64_MAX, 0, &end, err)) < 0 ||
	    (r = mj_bool(aj, "ended", true, false, &a->ended, err)) < 0 ||
	    (r = mj_strbuf(aj, "master_addr", true, true, a->master_addr, sizeof(a->master_addr),
			   err)) < 0 ||
	    (r = mj_int(aj, "master_port", true, 0, 65535, 0, &port, err)) < 0 ||
	    (r = mj_strbuf(aj, "reason", true, false, a->reason, sizeof(a->reason), err)) < 0 ||
	    /* absent: running, or from a store before causes were kept */
	    (r = mj_enum(aj, "end", false, attempt_end_names + 1, ATTEMPT_END_MAX - 1, -1, &cause,
			 err)) < 0 ||
	    (r = mj_strbuf(aj, "digest", false, true, a->digest, sizeof(a->digest), err)) < 0 ||
	    (r = mj_int(aj, "fail_ms", false, 0, INT64_MAX, 0, &a->fail_ms, err)) < 0 ||
	    (r = mj_int(aj, "checkpoint_write_ms", false, 0, INT64_MAX, 0, &a->ckpt_ms, err)) < 0 ||
	    (r = mj_bool(aj, "in_place", false, false, &a->in_place, err)) < 0 ||
	    (r = mj_strbuf(aj, "replaced", false, true, a->replaced, sizeof(a->replaced), err)) <
		    0 ||
	    (r = mj_int(aj, "spare_mdev_ms", false, 0, INT64_MAX, 0, &a->spare_mdev_ms, err)) < 0 ||
	    (r = mj_int(aj, "spare_node_ms", false, 0, INT64_MAX, 0, &a->spare_node_ms, err)) < 0)
		return r;
	a->end = (enum attempt_end)(cause + 1);
	a->number = (int)number;
	a->start_ms = start;
	a->end_ms = end;
	a->master_port = (int)port;
	json_t *nodes = json_object_get(aj, "nodes");
	json_t *tasks = json_object_get(aj, "tasks");
	if (!json_is_array(nodes) || json_array_size(nodes) < 1 ||
	    json_array_size(nodes) > MODEL_MAX_NODES)
		return tk_errorf(err, -EINVAL, "nodes: must be an array of 1 to %d nodes",
				 MODEL_MAX_NODES);
	if (!json_is_array(tasks) ||
	    json_array_size(tasks) > (size_t)MODEL_MAX_NODES * MODEL_MAX_TASKS_PER_NODE)
		return tk_errorf(err, -EINVAL, "tasks: must be an array");
	a->nnodes = (int)json_array_size(nodes);
	a->nodes = xcalloc((size_t)a->nnodes, sizeof(*a->nodes));
	a->ntasks = (int)json_array_size(tasks);
	a->tasks = xcalloc((size_t)a->ntasks ? (size_t)a->ntasks : 1, sizeof(*a->tasks));
	size_t i;
	json_t *v;
	json_array_foreach (nodes, i, v) {
		if ((r = attempt_node_unpack(v, &a->nodes[i], err)) < 0) {
			mj_prefix(err, "nodes[%zu]", i);
			return r;
		}
	}
	json_array_foreach (tasks, i, v) {
		if ((r = task_unpack(v, &a->tasks[i], err)) < 0) {
			mj_prefix(err, "tasks[%zu]", i);
			return r;
		}
	}
	return 0;
}

int job_unpack(json_t *jj, struct job *ret, struct tk_error *err)
{
	static const char *const keys[] = {
		"id",	     "name",	    "owner",  "state",	 "submit_ms",	     "end_ms",
		"exit_code", "failures",    "reason", "request", "attempts",	     "system",
		"run_as",    "checkpoints", "held",   "array",	 "las_from_attempt", NULL};
	struct job j;
	memset(&j, 0, sizeof(j));
	char state[16] = "", name[MODEL_NAME_MAX];
	int64_t id, submit, end, code, failures, las_from;
	int r;
	if ((r = mj_check_keys(jj, NULL, keys, err)) < 0 ||
	    (r = mj_int(jj, "id", true, 1, INT64_MAX, 0, &id, err)) < 0 ||
	    (r = mj_strbuf(jj, "name", true, true, name, sizeof(name), err)) < 0 ||
	    (r = mj_strbuf(jj, "owner", true, true, j.owner, sizeof(j.owner), err)) < 0 ||
	    (r = mj_strbuf(jj, "state", true, true, state, sizeof(state), err)) < 0 ||
	    (r = mj_int(jj, "submit_ms", true, 0, INT64_MAX, 0, &submit, err)) < 0 ||
	    (r = mj_int(jj, "end_ms", true, 0, INT64_MAX, 0, &end, err)) < 0 ||
	    (r = mj_int(jj, "exit_code", true, -1, 255, 0, &code, err)) < 0 ||
	    (r = mj_int(jj, "failures", true, 0, MODEL_MAX_ATTEMPTS, 0, &failures, err)) < 0 ||
	    (r = mj_strbuf(jj, "reason", true, false, j.reason, sizeof(j.reason), err)) < 0 ||
	    (r = mj_bool(jj, "system", false, false, &j.system, err)) < 0 ||
	    (r = mj_strbuf(jj, "run_as", false, true, j.run_as, sizeof(j.run_as), err)) < 0 ||
	    (r = mj_bool(jj, "held", false, false, &j.held, err)) < 0 ||
	    (r = mj_int(jj, "las_from_attempt", false, 0, MODEL_MAX_ATTEMPTS + 1, 0, &las_from,
			err)) < 0 ||
	    (r = job_array_unpack(jj, &j, err)) < 0)
		return r;
	if (j.run_as[0] && !model_unix_user_valid(j.run_as))
		return tk_errorf(err, -EINVAL, "run_as: \"%s\" is not a Unix account name",
				 j.run_as);
	if (job_state_parse(state, &j.state) < 0)
		return tk_errorf(err, -EINVAL, "state: unknown job state \"%s\"", state);
	if ((r = job_request_unpack(json_object_get(jj, "request"), &j.req, err)) < 0) {
		mj_prefix(err, "request");
		return r;
	}
	j.id = id;
	j.las_from = (int)las_from;
	j.submit_ms = submit;
	j.end_ms = end;
	j.exit_code = (int)code;
	j.failures = (int)failures;
	json_t *attempts = json_object_get(jj, "attempts");
	if (!json_is_array(attempts) || json_array_size(attempts) > MODEL_MAX_ATTEMPTS) {
		job_release(&j);
		return tk_errorf(err, -EINVAL, "attempts: must be an array of at most %d",
				 MODEL_MAX_ATTEMPTS);
	}
	size_t n = json_array_size(attempts);
	j.attempts = xcalloc(n ? n : 1, sizeof(*j.attempts));
	size_t i;
	json_t *v;
	json_array_foreach (attempts, i, v) {
		r = attempt_unpack(v, &j.attempts[i], err);
		j.nattempts = (int)i + 1;
		if (r < 0) {
			mj_prefix(err, "attempts[%zu]", i);
			job_release(&j);
			return r;
		}
	}
	if ((r = ckpts_unpack(json_object_get(jj, "checkpoints"), "checkpoints", MODEL_MAX_CKPTS,
			      &j.ckpts, &j.nckpts, err)) < 0) {
		job_release(&j);
		return r;
	}
	*ret = j;
	return 0;
}
