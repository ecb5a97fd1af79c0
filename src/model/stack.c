/*
 * A node's software stack (model.h, struct node_stack): its fields by
 * name, in JSON, and what changed between two.
 */
#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const names[NODE_STACK_FIELDS] = {"kernel", "os",	"driver", "cuda",
						     "nccl",   "vbios", "nic_fw", "tenk"};

const char *node_stack_field_name(int k)
{
	return k >= 0 && k < NODE_STACK_FIELDS ? names[k] : "?";
}

/* field k's buffer and its size */
static char *field(struct node_stack *s, int k, size_t *n)
{
	switch (k) {
	case 0:
		return *n = sizeof(s->kernel), s->kernel;
	case 1:
		return *n = sizeof(s->os), s->os;
	case 2:
		return *n = sizeof(s->driver), s->driver;
	case 3:
		return *n = sizeof(s->cuda), s->cuda;
	case 4:
		return *n = sizeof(s->nccl), s->nccl;
	case 5:
		return *n = sizeof(s->vbios), s->vbios;
	case 6:
		return *n = sizeof(s->nic_fw), s->nic_fw;
	default:
		return *n = sizeof(s->tenk), s->tenk;
	}
}

const char *node_stack_field(const struct node_stack *s, int k)
{
	size_t n;
	return field((struct node_stack *)s, k, &n);
}

void node_stack_set(struct node_stack *s, int k, const char *v)
{
	size_t n;
	char *buf = field(s, k, &n);
	snprintf(buf, n, "%s", v);
}

bool node_stack_same(const struct node_stack *a, const struct node_stack *b)
{
	for (int k = 0; k < NODE_STACK_FIELDS; k++)
		if (strcmp(node_stack_field(a, k), node_stack_field(b, k)) != 0)
			return false;
	return true;
}

json_t *node_stack_pack(const struct node_stack *s)
{
	json_t *o = json_object();
	for (int k = 0; k < NODE_STACK_FIELDS; k++)
		if (node_stack_field(s, k)[0])
			json_object_set_new(o, names[k], json_string(node_stack_field(s, k)));
	return o;
}

int node_stack_unpack(json_t *j, const char *path, struct node_stack *ret, struct tk_error *err)
{
	static const char *const keys[NODE_STACK_FIELDS + 1] = {
		"kernel", "os", "driver", "cuda", "nccl", "vbios", "nic_fw", "tenk", NULL};
	memset(ret, 0, sizeof(*ret));
	if (!json_is_object(j))
		return tk_errorf(err, -EINVAL, "%s%smust be an object of strings", path ? path : "",
				 path ? ": " : "");
	int r = mj_link_keys(j, path, keys, err);
	if (r < 0)
		return r;
	for (int k = 0; k < NODE_STACK_FIELDS; k++) {
		size_t n;
		char *buf = field(ret, k, &n);
		if ((r = mj_strbuf(j, names[k], false, true, buf, n, err)) < 0) {
			if (path)
				mj_prefix(err, "%s", path);
			return r;
		}
	}
	return 0;
}

bool node_stack_diff(const struct node_stack *a, const struct node_stack *b, char *out, size_t n)
{
	size_t used = 0;
	bool any = false;
	if (n)
		out[0] = 0;
	for (int k = 0; k < NODE_STACK_FIELDS; k++) {
		const char *x = node_stack_field(a, k), *y = node_stack_field(b, k);
		if (!x[0] || strcmp(x, y) == 0)
			continue;
		if (used < n)
			used += (size_t)snprintf(out + used, n - used, "%s%s %s -> %s",
						 any ? "; " : "", names[k], x,
						 y[0] ? y : "(unsaid)");
		any = true;
	}
	return any;
}

void node_stack_line(const struct node_stack *s, char *out, size_t n)
{
	size_t used = 0;
	if (n)
		out[0] = 0;
	for (int k = 0; k < NODE_STACK_FIELDS && used < n; k++)
		used += (size_t)snprintf(out + used, n - used, "%s%s %s", k ? ", " : "", names[k],
					 node_stack_field(s, k)[0] ? node_stack_field(s, k) : "?");
}

int node_stack_label_parse(const char *label, struct node_stack *ret, struct tk_error *err)
{
	memset(ret, 0, sizeof(*ret));
	_cleanup_free_ char *copy = xstrdup(label);
	char *save = NULL;
	int n = 0;
	for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save), n++) {
		char *eq = strchr(kv, '=');
		if (!eq || eq == kv || !eq[1])
			return tk_errorf(err, -EINVAL,
					 "stack: \"%s\" is not FIELD=VALUE (e.g. driver=560.28)",
					 kv);
		*eq = '\0';
		int k = 0;
		while (k < NODE_STACK_FIELDS && strcmp(names[k], kv) != 0)
			k++;
		if (k == NODE_STACK_FIELDS)
			return tk_errorf(
				err, -EINVAL,
				"stack: no field \"%s\"; fields: kernel, os, driver, cuda, "
				"nccl, vbios, nic_fw, tenk",
				kv);
		size_t len;
		char *buf = field(ret, k, &len);
		if (strlen(eq + 1) >= len)
			return tk_errorf(err, -EINVAL, "stack: %s: at most %zu characters", kv,
					 len - 1);
		snprintf(buf, len, "%s", eq + 1);
	}
	return n ? 0 : tk_errorf(err, -EINVAL, "stack: give FIELD=VALUE[,FIELD=VALUE...]");
}

bool node_stack_has(const struct node_stack *s, const struct node_stack *want)
{
	for (int k = 0; k < NODE_STACK_FIELDS; k++) {
		const char *w = node_stack_field(want, k);
		if (w[0] && strcmp(w, node_stack_field(s, k)) != 0)
			return false;
	}
	return true;
}
