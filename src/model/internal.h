/* Private to src/model: helpers shared between its files. */
#pragma once

#include "model.h"

/* Checks that v is a string of 1..max_len bytes with no NUL (and no control
 * characters when printable); `what` names it in the error. */
int mj_check_string_value(json_t *v, const char *what, size_t max_len, bool printable,
			  struct tk_error *err);
/* A number (integer or real) from obj[key] within [min, max]. */
int mj_num(json_t *obj, const char *key, bool required, double min, double max, double def,
	   double *ret, struct tk_error *err);
/* Prepends "PREFIX." to the error's text, to name a nested field. */
void mj_prefix(struct tk_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
