/*
 * The catalogue of accelerator models: memory, peak dense bf16 rate and an
 * hourly price for each. Jobs that ask by capability (--gpu-mem 80G), the
 * validator's expected compute rate, and accounting's cost all read it.
 *
 * Rates are vendors' peak dense (non-sparse) bf16 tensor figures for the
 * usual SXM/PCIe part; cards without bf16 (T4, V100, P100) give fp16. Prices
 * are indicative on-demand hourly rates; operators override them.
 */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <errno.h>
#include <stdio.h>
#include <strings.h>

static const struct catalogue_entry builtin[] = {
	{"B200", 183359, 2250.0, 6.00, 0},    {"H200", 143771, 989.4, 4.00, 0},
	{"H100", 81559, 989.4, 3.00, 0},      {"H800", 81559, 989.4, 2.80, 0},
	{"H20", 97871, 148.0, 1.50, 0},	      {"A100-80GB", 81920, 312.0, 1.80, 0},
	{"A100-40GB", 40960, 312.0, 1.30, 0}, {"A800", 81920, 312.0, 1.60, 0},
	{"L40S", 46068, 362.0, 1.00, 0},      {"L4", 23034, 121.0, 0.50, 0},
	{"A40", 46068, 149.7, 0.80, 0},	      {"A30", 24576, 165.0, 0.70, 0},
	{"A10", 23028, 125.0, 0.75, 0},	      {"T4", 15360, 65.0, 0.35, 0},
	{"V100", 32768, 125.0, 0.80, 0},      {"P100", 16384, 18.7, 0.40, 0},
	{"RTX4090", 24564, 165.2, 0.45, 0},   {"MI300X", 196592, 1307.4, 3.50, 0},
};

void catalogue_init(struct catalogue *c)
{
	c->entries = NULL;
	c->n = c->alloc = 0;
	for (size_t i = 0; i < ARRAY_SIZE(builtin); i++)
		catalogue_set(c, &builtin[i]);
}

void catalogue_release(struct catalogue *c)
{
	free(c->entries);
	c->entries = NULL;
	c->n = c->alloc = 0;
}

const struct catalogue_entry *catalogue_find(const struct catalogue *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcasecmp(c->entries[i].name, name) == 0)
			return &c->entries[i];
	return NULL;
}

void catalogue_set(struct catalogue *c, const struct catalogue_entry *e)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcasecmp(c->entries[i].name, e->name) == 0) {
			c->entries[i] = *e;
			return;
		}
	xgrow(&c->entries, &c->alloc, c->n + 1, sizeof(*c->entries));
	c->entries[c->n++] = *e;
}

void catalogue_names(const struct catalogue *c, struct strbuf *sb)
{
	for (size_t i = 0; i < c->n; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", c->entries[i].name);
}

int catalogue_load_json(struct catalogue *c, const char *text, struct tk_error *err)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return tk_errorf(err, -EINVAL, "line %d column %d: %s", jerr.line, jerr.column,
				 jerr.text);
	static const char *const top_keys[] = {"models", NULL};
	static const char *const model_keys[] = {"name",	   "mem_mib", "tflops",
						 "price_per_hour", "weight",  NULL};
	struct catalogue next = {0};
	int r = mj_check_keys(root, NULL, top_keys, err);
	if (r < 0)
		goto out;
	json_t *models = json_object_get(root, "models");
	if (!json_is_array(models)) {
		r = tk_errorf(err, -EINVAL, "models: must be an array of objects");
		goto out;
	}
	/* work on a copy so that an error changes nothing */
	next.entries = xmalloc(sizeof(*c->entries) * (c->n ? c->n : 1));
	next.alloc = c->n ? c->n : 1;
	next.n = c->n;
	if (c->n)
		memcpy(next.entries, c->entries, sizeof(*c->entries) * c->n);
	size_t i;
	json_t *m;
	json_array_foreach (models, i, m) {
		struct catalogue_entry e = {0};
		if ((r = mj_check_keys(m, NULL, model_keys, err)) < 0 ||
		    (r = mj_strbuf(m, "name", true, true, e.name, sizeof(e.name), err)) < 0)
			goto fail;
		if (!model_name_valid(e.name)) {
			r = tk_errorf(err, -EINVAL, "name: \"%s\" is not a valid model name",
				      e.name);
			goto fail;
		}
		const struct catalogue_entry *old = catalogue_find(&next, e.name);
		if (old)
			e = *old;
		double mem = (double)e.mem_mib;
		if ((r = mj_num(m, "mem_mib", false, 0, (double)MODEL_MAX_MEM_MIB, mem, &mem,
				err)) < 0 ||
		    (r = mj_num(m, "tflops", false, 0, 1e6, e.tflops, &e.tflops, err)) < 0 ||
		    (r = mj_num(m, "price_per_hour", false, 0, 1e6, e.price_per_hour,
				&e.price_per_hour, err)) < 0 ||
		    (r = mj_num(m, "weight", false, 0.001, 1e6, e.weight > 0 ? e.weight : 1,
				&e.weight, err)) < 0)
			goto fail;
		if (!json_object_get(m, "weight") && !(old && old->weight > 0))
			e.weight = 0;
		e.mem_mib = (int64_t)mem;
		catalogue_set(&next, &e);
	}
	free(c->entries);
	*c = next;
	next.entries = NULL;
	r = 0;
	goto out;
fail:
	mj_prefix(err, "models[%zu]", i);
out:
	free(next.entries);
	json_decref(root);
	return r;
}

json_t *catalogue_pack(const struct catalogue *c)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < c->n; i++) {
		const struct catalogue_entry *e = &c->entries[i];
		json_array_append_new(arr, json_pack("{s:s, s:I, s:f, s:f, s:f}", "name", e->name,
						     "mem_mib", (json_int_t)e->mem_mib, "tflops",
						     e->tflops, "price_per_hour", e->price_per_hour,
						     "weight", catalogue_weight(e)));
	}
	return arr;
}

double catalogue_weight(const struct catalogue_entry *e)
{
	if (e->weight > 0)
		return e->weight;
	return e->tflops > 0 ? e->tflops / CATALOGUE_UNIT_TFLOPS : 1;
}

/* Letters and digits only, upper-cased: "A100-SXM4-80GB" -> "A100SXM480GB". */
static void squash(const char *in, char *out, size_t n)
{
	size_t k = 0;
	for (; *in && k + 1 < n; in++)
		if (isalnum((unsigned char)*in))
			out[k++] = (char)toupper((unsigned char)*in);
	out[k] = '\0';
}

const struct catalogue_entry *catalogue_match(const struct catalogue *c, const char *device_name,
					      int64_t mem_mib)
{
	const struct catalogue_entry *exact = catalogue_find(c, device_name);
	if (exact)
		return exact;
	char dev[128];
	squash(device_name, dev, sizeof(dev));
	if (mem_mib <= 0) {
		/* no size given: take it from the name ("...-80GB") when there */
		const char *gb = strstr(dev, "GB");
		if (gb) {
			const char *p = gb;
			while (p > dev && isdigit((unsigned char)p[-1]))
				p--;
			if (p < gb)
				mem_mib = strtoll(p, NULL, 10) * 1024;
		}
	}
	const struct catalogue_entry *best = NULL;
	size_t best_len = 0;
	int64_t best_diff = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct catalogue_entry *e = &c->entries[i];
		char base[MODEL_NAME_MAX];
		snprintf(base, sizeof(base), "%s", e->name);
		char *dash = strchr(base, '-');
		if (dash)
			*dash = '\0';
		char sq[MODEL_NAME_MAX];
		squash(base, sq, sizeof(sq));
		size_t len = strlen(sq);
		if (!len || !strstr(dev, sq))
			continue;
		int64_t diff = e->mem_mib > mem_mib ? e->mem_mib - mem_mib : mem_mib - e->mem_mib;
		if (!best || len > best_len || (len == best_len && diff < best_diff)) {
			best = e;
			best_len = len;
			best_diff = diff;
		}
	}
	return best;
}

void model_name_sanitize(const char *in, char *out, size_t n)
{
	size_t k = 0;
	for (; *in && k + 1 < n; in++) {
		char ch = *in;
		out[k++] = (isalnum((unsigned char)ch) || ch == '.' || ch == '_' || ch == '-')
				   ? ch
				   : '-';
	}
	if (k == 0 && n > 3) {
		memcpy(out, "GPU", 3);
		k = 3;
	}
	out[k] = '\0';
}
