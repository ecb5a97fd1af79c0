/*
 * Checkpoints as the server records them (model.h): a tag, its step, the
 * attempt that wrote it and each node's manifest digest, in the form the
 * store and the API share.
 */
#include "model.h"

#include <errno.h>
#include <string.h>

static const char *const marker_names[CKPT_MARKER_MAX] = {
	[CKPT_TENK] = "tenk",
	[CKPT_DCP] = "dcp",
	[CKPT_DEEPSPEED] = "deepspeed",
	[CKPT_MEGATRON] = "megatron",
};

const char *ckpt_marker_name(enum ckpt_marker m)
{
	return m >= 0 && m < CKPT_MARKER_MAX ? marker_names[m] : "?";
}

int ckpt_marker_parse(const char *s, enum ckpt_marker *ret)
{
	for (int i = 0; i < CKPT_MARKER_MAX; i++)
		if (strcmp(s, marker_names[i]) == 0) {
			*ret = (enum ckpt_marker)i;
			return 0;
		}
	return -EINVAL;
}

int64_t model_ckpt_tag_step(const char *tag)
{
	size_t n = strlen(tag), end = n;
	while (end > 0 && !(tag[end - 1] >= '0' && tag[end - 1] <= '9'))
		end--;
	size_t start = end;
	while (start > 0 && tag[start - 1] >= '0' && tag[start - 1] <= '9')
		start--;
	if (start == end || end - start > 18)
		return -1;
	int64_t v = 0;
	for (size_t i = start; i < end; i++)
		v = v * 10 + (tag[i] - '0');
	return v;
}

bool model_digest_valid(const char *d)
{
	bool ok = strncmp(d, "sha256:", 7) == 0 && strlen(d) == 71;
	for (int i = 7; ok && i < 71; i++)
		ok = (d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f');
	return ok;
}

bool model_ckpt_tag_valid(const char *tag)
{
	size_t n = strlen(tag);
	if (n == 0 || n >= MODEL_CKPT_TAG_MAX || tag[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = tag[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

void ckpt_release(struct ckpt *c)
{
	free(c->digests);
	c->digests = NULL;
	c->nnodes = 0;
}

void ckpt_copy(struct ckpt *dst, const struct ckpt *src)
{
	*dst = *src;
	dst->digests = xcalloc((size_t)src->nnodes + 1, sizeof(*dst->digests));
	memcpy(dst->digests, src->digests, sizeof(*dst->digests) * (size_t)src->nnodes);
}

json_t *ckpt_pack(const struct ckpt *c)
{
	json_t *d = json_array();
	for (int i = 0; i < c->nnodes; i++)
		json_array_append_new(d, json_string(c->digests[i]));
	json_t *o = json_pack("{s:s, s:I, s:i, s:o, s:I, s:I, s:I}", "tag", c->tag, "step",
			      (json_int_t)c->step, "attempt", c->attempt, "manifests", d, "bytes",
			      (json_int_t)c->bytes, "upload_ms", (json_int_t)c->upload_ms, "at_ms",
			      (json_int_t)c->at_ms);
	if (c->write_ms)
		json_object_set_new(o, "write_ms", json_integer(c->write_ms));
	return o;
}

int ckpt_unpack(json_t *j, struct ckpt *ret, struct tk_error *err)
{
	static const char *const keys[] = {"tag",	"step",	 "attempt",  "manifests", "bytes",
					   "upload_ms", "at_ms", "write_ms", NULL};
	struct ckpt c;
	memset(&c, 0, sizeof(c));
	int64_t attempt;
	int r;
	if ((r = mj_check_keys(j, NULL, keys, err)) < 0 ||
	    (r = mj_strbuf(j, "tag", true, true, c.tag, sizeof(c.tag), err)) < 0 ||
	    (r = mj_int(j, "step", true, 0, INT64_MAX, 0, &c.step, err)) < 0 ||
	    (r = mj_int(j, "attempt", true, 1, MODEL_MAX_ATTEMPTS, 1, &attempt, err)) < 0 ||
	    (r = mj_int(j, "bytes", true, 0, INT64_MAX, 0, &c.bytes, err)) < 0 ||
	    (r = mj_int(j, "upload_ms", true, 0, INT64_MAX, 0, &c.upload_ms, err)) < 0 ||
	    (r = mj_int(j, "at_ms", true, 0, INT64_MAX, 0, &c.at_ms, err)) < 0 ||
	    (r = mj_int(j, "write_ms", false, 0, INT64_MAX, 0, &c.write_ms, err)) < 0)
		return r;
	if (!model_ckpt_tag_valid(c.tag))
		return tk_errorf(err, -EINVAL, "tag: \"%.64s\" is not a checkpoint tag", c.tag);
	c.attempt = (int)attempt;
	json_t *d = json_object_get(j, "manifests");
	if (!json_is_array(d) || json_array_size(d) < 1 || json_array_size(d) > MODEL_MAX_NODES)
		return tk_errorf(err, -EINVAL, "manifests: must be an array of 1 to %d digests",
				 MODEL_MAX_NODES);
	c.nnodes = (int)json_array_size(d);
	c.digests = xcalloc((size_t)c.nnodes + 1, sizeof(*c.digests));
	size_t i;
	json_t *v;
	json_array_foreach (d, i, v) {
		const char *s = json_string_value(v);
		if (!s || (s[0] && !model_digest_valid(s))) {
			ckpt_release(&c);
			return tk_errorf(err, -EINVAL,
					 "manifests[%zu]: must be \"sha256:HEX\" or \"\"", i);
		}
		snprintf(c.digests[i], sizeof(c.digests[i]), "%s", s);
	}
	*ret = c;
	return 0;
}
