/*
 * A reference run (issue 44, point 3): a fixed-seed training of a small
 * model for a number of steps, run on a stack before a change and on the
 * new stack after it. Its record is the loss at every step, the final
 * parameters (or a summary of them a site's command chose), and its step
 * time; two records compare bit for bit, or within a stated tolerance.
 *
 * The record, as a reference command prints it on its last line, and as
 * validation reports it:
 *     {"loss": [2.31, 2.12, ...], "params": [0.5, -0.25, ...],
 *      "step_s": 0.012 | [0.012, 0.011, ...]}
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const source_names[] = {"tenk", "command"};

void reference_release(struct reference *r)
{
	free(r->loss);
	free(r->params);
	memset(r, 0, sizeof(*r));
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double reference_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), dcmp);
	return n > 0 ? v[n / 2] : 0;
}

/* An array of 1..max finite numbers. */
static int numbers(json_t *o, const char *key, int max, double **ret, int *ret_n,
		   struct tk_error *err)
{
	json_t *a = json_object_get(o, key);
	if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > (size_t)max)
		return tk_errorf(err, -EINVAL, "%s: must be an array of 1 to %d numbers%s", key,
				 max,
				 json_is_array(a) && json_array_size(a) > (size_t)max
					 ? " (give a summary: a sum and a norm per tensor)"
					 : "");
	double *v = xcalloc(json_array_size(a), sizeof(*v));
	size_t i;
	json_t *x;
	json_array_foreach (a, i, x) {
		if (!json_is_number(x) || !isfinite(json_number_value(x))) {
			free(v);
			return tk_errorf(err, -EINVAL, "%s[%zu]: must be a finite number", key, i);
		}
		v[i] = json_number_value(x);
	}
	*ret = v;
	*ret_n = (int)json_array_size(a);
	return 0;
}

int reference_unpack(json_t *j, struct reference *ret, struct tk_error *err)
{
	static const char *const keys[] = {"loss",    "params", "step_s", "source",
					   "command", "digest", "device", NULL};
	memset(ret, 0, sizeof(*ret));
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL,
				 "a reference's record must be a JSON object: {\"loss\": [...], "
				 "\"params\": [...], \"step_s\": ...}");
	int source = REF_SOURCE_COMMAND;
	int rc;
	if ((rc = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (rc = mj_enum(j, "source", false, source_names, 2, REF_SOURCE_COMMAND, &source, err)) <
		    0 ||
	    (rc = mj_strbuf(j, "command", false, true, ret->command, sizeof(ret->command), err)) <
		    0)
		return rc;
	ret->source = (enum ref_source)source;
	if ((rc = numbers(j, "loss", REF_MAX_STEPS, &ret->loss, &ret->nloss, err)) < 0 ||
	    (rc = numbers(j, "params", REF_MAX_PARAMS, &ret->params, &ret->nparams, err)) < 0) {
		reference_release(ret);
		return rc;
	}
	json_t *st = json_object_get(j, "step_s");
	if (json_is_array(st)) {
		double *v;
		int n;
		if ((rc = numbers(j, "step_s", REF_MAX_STEPS, &v, &n, err)) < 0) {
			reference_release(ret);
			return rc;
		}
		ret->step_s = reference_median(v, n);
		free(v);
	} else if ((rc = mj_num(j, "step_s", false, 0, 86400, 0, &ret->step_s, err)) < 0) {
		reference_release(ret);
		return rc;
	}
	if (ret->step_s < 0) {
		reference_release(ret);
		return tk_errorf(err, -EINVAL, "step_s: must not be negative");
	}
	return 0;
}

void reference_digest(const struct reference *r, char out[17])
{
	size_t n = (size_t)(r->nloss + r->nparams);
	double *all = xcalloc(n + 1, sizeof(*all));
	memcpy(all, r->loss, (size_t)r->nloss * sizeof(double));
	memcpy(all + r->nloss, r->params, (size_t)r->nparams * sizeof(double));
	char hex[65];
	tk_sha256_hex(all, n * sizeof(double), hex);
	free(all);
	snprintf(out, 17, "%.16s", hex);
}

json_t *reference_pack(const struct reference *r)
{
	json_t *loss = json_array(), *params = json_array();
	for (int i = 0; i < r->nloss; i++)
		json_array_append_new(loss, json_real(r->loss[i]));
	for (int i = 0; i < r->nparams; i++)
		json_array_append_new(params, json_real(r->params[i]));
	json_t *o = json_pack("{s:s, s:o, s:o, s:f}", "source", source_names[r->source], "loss",
			      loss, "params", params, "step_s", r->step_s);
	if (r->command[0])
		json_object_set_new(o, "command", json_string(r->command));
	return o;
}

/* The largest difference of b from a, over a's largest magnitude (the
 * difference itself where a is all zeros); *bits: every value the same
 * bits; *first: the first index that differs (-1: none). */
static double diff_of(const double *a, const double *b, int n, bool *bits, int *first)
{
	double scale = 0, worst = 0;
	for (int i = 0; i < n; i++)
		scale = fmax(scale, fabs(a[i]));
	*first = -1;
	for (int i = 0; i < n; i++) {
		if (memcmp(&a[i], &b[i], sizeof(double)) == 0)
			continue;
		*bits = false;
		if (*first < 0)
			*first = i;
		worst = fmax(worst, fabs(a[i] - b[i]));
	}
	return scale > 0 ? worst / scale : worst;
}

const char *reference_verdict_name(enum ref_verdict v)
{
	static const char *const names[REF_VERDICT_MAX] = {[REF_SAME] = "same",
							   [REF_WITHIN] = "within_tolerance",
							   [REF_DIFFERENT] = "different",
							   [REF_SLOWER] = "slower",
							   [REF_SHAPE] = "shape"};
	return v < REF_VERDICT_MAX ? names[v] : "?";
}

void reference_compare(const struct reference *before, const struct reference *after,
		       double tolerance, double step_slack, struct ref_compare *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->first_step = ret->first_param = -1;
	if (before->nloss != after->nloss || before->nparams != after->nparams) {
		ret->verdict = REF_SHAPE;
		snprintf(ret->text, sizeof(ret->text),
			 "the reference gave %d steps and %d parameters on the old stack, %d and "
			 "%d on the new: not the same run",
			 before->nloss, before->nparams, after->nloss, after->nparams);
		return;
	}
	ret->bitwise = true;
	ret->loss_diff =
		diff_of(before->loss, after->loss, before->nloss, &ret->bitwise, &ret->first_step);
	ret->param_diff = diff_of(before->params, after->params, before->nparams, &ret->bitwise,
				  &ret->first_param);
	if (before->step_s > 0 && after->step_s > 0)
		ret->step_ratio = after->step_s / before->step_s;
	char where[160] = "";
	if (ret->first_step >= 0)
		snprintf(where, sizeof(where),
			 "loss differs from step %d (%.17g before, %.17g after)",
			 ret->first_step + 1, before->loss[ret->first_step],
			 after->loss[ret->first_step]);
	else if (ret->first_param >= 0)
		snprintf(where, sizeof(where),
			 "the loss curve is the same, parameter %d differs (%.17g before, %.17g "
			 "after)",
			 ret->first_param, before->params[ret->first_param],
			 after->params[ret->first_param]);
	if (ret->bitwise) {
		ret->verdict = REF_SAME;
	} else if (tolerance > 0 && ret->loss_diff <= tolerance && ret->param_diff <= tolerance) {
		ret->verdict = REF_WITHIN;
	} else {
		ret->verdict = REF_DIFFERENT;
		if (tolerance > 0)
			snprintf(ret->text, sizeof(ret->text),
				 "%s; largest difference %.3g (loss), %.3g (parameters), over "
				 "the tolerance of %.3g",
				 where, ret->loss_diff, ret->param_diff, tolerance);
		else
			snprintf(ret->text, sizeof(ret->text),
				 "%s; largest difference %.3g (loss), %.3g (parameters); no "
				 "tolerance given",
				 where, ret->loss_diff, ret->param_diff);
		return;
	}
	/* steps too short to time well are not judged */
	if (step_slack > 0 && ret->step_ratio > 1 + step_slack &&
	    before->step_s >= REF_STEP_JUDGED_S) {
		ret->verdict = REF_SLOWER;
		snprintf(
			ret->text, sizeof(ret->text),
			"a step took %.4gs on the new stack, %.4gs on the old: %.0f%% slower, over "
			"the %.0f%% allowed",
			after->step_s, before->step_s, (ret->step_ratio - 1) * 100,
			step_slack * 100);
		return;
	}
	if (ret->verdict == REF_SAME)
		snprintf(ret->text, sizeof(ret->text),
			 "the same bit for bit: %d steps, %d parameters", before->nloss,
			 before->nparams);
	else
		snprintf(ret->text, sizeof(ret->text),
			 "within the tolerance of %.3g: %s; largest difference %.3g (loss), %.3g "
			 "(parameters)",
			 tolerance, where, ret->loss_diff, ret->param_diff);
}

json_t *reference_compare_pack(const struct ref_compare *c)
{
	json_t *o = json_pack("{s:s, s:b, s:f, s:f, s:i, s:i, s:s}", "verdict",
			      reference_verdict_name(c->verdict), "bitwise", c->bitwise,
			      "loss_diff", c->loss_diff, "param_diff", c->param_diff, "first_step",
			      c->first_step < 0 ? 0 : c->first_step + 1, "first_param",
			      c->first_param, "text", c->text);
	if (c->step_ratio > 0)
		json_object_set_new(o, "step_ratio", json_real(c->step_ratio));
	return o;
}
