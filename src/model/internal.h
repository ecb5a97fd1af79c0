/* Private to src/model: helpers shared between its files. */
#pragma once

#include "model.h"

/* Checks that v is a string of 1..max_len bytes with no NUL (and no control
 * characters when printable); `what` names it in the error. */
int mj_check_string_value(json_t *v, const char *what, size_t max_len, bool printable,
			  struct tk_error *err);
/* An array of n strings, and an environment of "KEY=VALUE" strings as an
 * object {"KEY": "VALUE"}: new JSON (caller owns it). */
json_t *mj_strv_pack(char *const *v, int n);
/* Frees n strings and the array (which may be NULL). */
void mj_strv_free(char **v, int n);
json_t *mj_env_pack(char *const *env, int n);
/* Decodes obj[key], an array of at most max_n strings of at most max_item
 * bytes each and max_bytes in all (with NULs), into strings the caller frees
 * (*ret itself too); required: present and not empty. */
int mj_strv_unpack(json_t *obj, const char *key, bool required, int max_n, size_t max_bytes,
		   size_t max_item, char ***ret, int *ret_n, struct tk_error *err);
/* Decodes obj[key], an object of strings, into "KEY=VALUE" strings (at most
 * MODEL_MAX_ENV of them, MODEL_MAX_ENV_BYTES in all); absent: none. */
int mj_env_unpack(json_t *obj, const char *key, char ***ret, int *ret_n, struct tk_error *err);
