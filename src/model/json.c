/*
 * Strict JSON field access. jansson's json_unpack names no field in a type
 * error and silently narrows a 64-bit integer into an int, so every decoder in
 * tenk reads its fields through these helpers instead: each checks presence,
 * type and range and writes an error that starts with the field's name.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number with a fraction";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "something else";
}

/* Writes "path.key" or "key" into buf. */
static const char *field_name(char *buf, size_t n, const char *path, const char *key)
{
	if (path && *path)
		snprintf(buf, n, "%s.%s", path, key);
	else
		snprintf(buf, n, "%s", key);
	return buf;
}

int mj_link_keys(json_t *obj, const char *path, const char *const *known, struct tk_error *err)
{
	(void)known; /* what this version reads: the rest is a newer peer's, ignored */
	if (!obj)
		return tk_errorf(err, -EINVAL, "%s: required object is missing",
				 path && *path ? path : "body");
	if (!json_is_object(obj))
		return tk_errorf(err, -EINVAL, "%s: must be an object, got %s",
				 path && *path ? path : "body", type_name(obj));
	return 0;
}

int mj_check_keys(json_t *obj, const char *path, const char *const *allowed, struct tk_error *err)
{
	int r = mj_link_keys(obj, path, allowed, err);
	if (r < 0)
		return r;
	const char *key;
	json_t *v;
	json_object_foreach (obj, key, v) {
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0) {
				ok = true;
				break;
			}
		if (!ok) {
			char f[128];
			/* quote at most 64 bytes of an unknown key */
			char shown[65];
			snprintf(shown, sizeof(shown), "%s", key);
			return tk_errorf(err, -EINVAL, "%s: unknown field",
					 field_name(f, sizeof(f), path, shown));
		}
	}
	return 0;
}

int mj_int(json_t *obj, const char *key, bool required, int64_t min, int64_t max, int64_t def,
	   int64_t *ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		*ret = def;
		return 0;
	}
	if (!json_is_integer(v))
		return tk_errorf(err, -EINVAL, "%s: must be an integer from %lld to %lld, got %s",
				 key, (long long)min, (long long)max, type_name(v));
	json_int_t x = json_integer_value(v);
	if (x < min || x > max)
		return tk_errorf(err, -ERANGE, "%s: must be an integer from %lld to %lld, got %lld",
				 key, (long long)min, (long long)max, (long long)x);
	*ret = x;
	return 0;
}

int mj_bool(json_t *obj, const char *key, bool required, bool def, bool *ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		*ret = def;
		return 0;
	}
	if (!json_is_boolean(v))
		return tk_errorf(err, -EINVAL, "%s: must be true or false, got %s", key,
				 type_name(v));
	*ret = json_is_true(v);
	return 0;
}

/* Checks a decoded string: no NUL inside, length, printable. */
static int check_str(json_t *v, const char *what, size_t min_len, size_t max_len, bool printable,
		     struct tk_error *err)
{
	if (!json_is_string(v))
		return tk_errorf(err, -EINVAL, "%s: must be a string, got %s", what, type_name(v));
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (strlen(s) != len)
		return tk_errorf(err, -EINVAL, "%s: must not contain a NUL character", what);
	if (len < min_len)
		return tk_errorf(err, -EINVAL, "%s: must not be empty", what);
	if (len > max_len)
		return tk_errorf(err, -E2BIG, "%s: must be at most %zu bytes, got %zu", what,
				 max_len, len);
	if (printable)
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return tk_errorf(err, -EINVAL,
						 "%s: must not contain control characters", what);
	return 0;
}

int mj_str(json_t *obj, const char *key, bool required, size_t max_len, bool printable,
	   const char *def, char **ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		*ret = def ? xstrdup(def) : NULL;
		return 0;
	}
	int r = check_str(v, key, 1, max_len, printable, err);
	if (r < 0)
		return r;
	*ret = xstrdup(json_string_value(v));
	return 0;
}

int mj_strbuf(json_t *obj, const char *key, bool required, bool printable, char *buf, size_t n,
	      struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		return 0;
	}
	int r = check_str(v, key, 0, n - 1, printable, err);
	if (r < 0)
		return r;
	memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int mj_enum(json_t *obj, const char *key, bool required, const char *const *names, int n, int def,
	    int *ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		*ret = def;
		return 0;
	}
	const char *s = json_string_value(v);
	for (int i = 0; s && i < n; i++)
		if (names[i] && strcmp(s, names[i]) == 0) {
			*ret = i;
			return 0;
		}
	struct strbuf sb;
	strbuf_init(&sb);
	for (int i = 0; i < n; i++)
		if (names[i])
			strbuf_addf(&sb, "%s\"%s\"", sb.len ? ", " : "", names[i]);
	int r = tk_errorf(err, -EINVAL, "%s: must be one of %s, got %s%.40s%s", key, sb.buf,
			  s ? "\"" : "", s ? s : "a non-string", s ? "\"" : "");
	strbuf_release(&sb);
	return r;
}

/* Used by the array decoders in job.c and node.c. */
int mj_check_string_value(json_t *v, const char *what, size_t max_len, bool printable,
			  struct tk_error *err)
{
	return check_str(v, what, 1, max_len, printable, err);
}

bool model_unix_user_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > 32 || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

bool model_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= MODEL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int mj_num(json_t *obj, const char *key, bool required, double min, double max, double def,
	   double *ret, struct tk_error *err)
{
	json_t *v = json_object_get(obj, key);
	if (!v) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		*ret = def;
		return 0;
	}
	if (!json_is_number(v))
		return tk_errorf(err, -EINVAL, "%s: must be a number from %g to %g, got %s", key,
				 min, max, type_name(v));
	double x = json_number_value(v);
	if (!(x >= min && x <= max))
		return tk_errorf(err, -ERANGE, "%s: must be a number from %g to %g, got %g", key,
				 min, max, x);
	*ret = x;
	return 0;
}

void mj_prefix(struct tk_error *err, const char *fmt, ...)
{
	if (!err)
		return;
	struct strbuf sb;
	strbuf_init(&sb);
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_addf(&sb, ".%s", err->text);
	snprintf(err->text, sizeof(err->text), "%s", sb.buf);
	strbuf_release(&sb);
}

/* ---- arrays of strings and environments ------------------------------------- */

void mj_strv_free(char **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

json_t *mj_strv_pack(char *const *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

json_t *mj_env_pack(char *const *env, int n)
{
	json_t *o = json_object();
	for (int i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		_cleanup_free_ char *k = xstrndup(env[i], (size_t)(eq - env[i]));
		json_object_set_new(o, k, json_string(eq + 1));
	}
	return o;
}

int mj_strv_unpack(json_t *obj, const char *key, bool required, int max_n, size_t max_bytes,
		   size_t max_item, char ***ret, int *ret_n, struct tk_error *err)
{
	json_t *a = json_object_get(obj, key);
	*ret = NULL;
	*ret_n = 0;
	if (!a) {
		if (required)
			return tk_errorf(err, -EINVAL, "%s: required field is missing", key);
		return 0;
	}
	if (!json_is_array(a))
		return tk_errorf(err, -EINVAL, "%s: must be an array of strings", key);
	size_t n = json_array_size(a);
	if (required && n == 0)
		return tk_errorf(err, -EINVAL, "%s: must not be empty", key);
	if (n > (size_t)max_n)
		return tk_errorf(err, -E2BIG, "%s: at most %d items, got %zu", key, max_n, n);
	size_t total = 0;
	size_t i;
	json_t *v;
	json_array_foreach (a, i, v) {
		char what[80];
		snprintf(what, sizeof(what), "%s[%zu]", key, i);
		int r = mj_check_string_value(v, what, max_item, false, err);
		if (r < 0)
			return r;
		total += json_string_length(v) + 1;
		if (total > max_bytes)
			return tk_errorf(err, -E2BIG, "%s: at most %zu bytes in all", key,
					 max_bytes);
	}
	char **out = xcalloc(n, sizeof(char *));
	json_array_foreach (a, i, v)
		out[i] = xstrdup(json_string_value(v));
	*ret = out;
	*ret_n = (int)n;
	return 0;
}

int mj_env_unpack(json_t *obj, const char *key, char ***ret, int *ret_n, struct tk_error *err)
{
	json_t *e = json_object_get(obj, key);
	*ret = NULL;
	*ret_n = 0;
	if (!e)
		return 0;
	if (!json_is_object(e))
		return tk_errorf(err, -EINVAL, "env: must be an object of strings");
	size_t n = json_object_size(e);
	if (n > MODEL_MAX_ENV)
		return tk_errorf(err, -E2BIG, "env: at most %d variables, got %zu", MODEL_MAX_ENV,
				 n);
	size_t total = 0;
	const char *k;
	json_t *v;
	json_object_foreach (e, k, v) {
		if (!*k || strchr(k, '='))
			return tk_errorf(err, -EINVAL,
					 "env: variable name \"%.64s\" must be non-empty and "
					 "without '='",
					 k);
		char what[96];
		snprintf(what, sizeof(what), "env.%.64s", k);
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return tk_errorf(err, -EINVAL, "%s: must be a string without NUL", what);
		total += strlen(k) + json_string_length(v) + 2;
		if (total > MODEL_MAX_ENV_BYTES)
			return tk_errorf(err, -E2BIG, "env: at most %d bytes in all",
					 MODEL_MAX_ENV_BYTES);
	}
	char **out = xcalloc(n ? n : 1, sizeof(char *));
	int count = 0;
	json_object_foreach (e, k, v)
		out[count++] = xasprintf("%s=%s", k, json_string_value(v));
	*ret = out;
	*ret_n = count;
	return 0;
}
