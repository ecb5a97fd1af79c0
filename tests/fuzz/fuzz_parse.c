/* The command line's number parsers and the fake-device spec. */
#include "fuzz.h"

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *s = xstrndup((const char *)data, size);
	int64_t v;
	tk_parse_int64(s, INT64_MIN, INT64_MAX, &v);
	if (tk_parse_size_mib(s, &v) == 0 && v < 0)
		abort();
	if (tk_parse_duration(s, &v) == 0) {
		if (v < 0)
			abort();
		char buf[64];
		tk_format_duration(v, buf, sizeof(buf));
	}
	struct catalogue c;
	catalogue_init(&c);
	struct accel a[MODEL_MAX_ACCELS];
	int n;
	struct tk_error err;
	if (model_fake_accels(s, &c, "fuzz", a, MODEL_MAX_ACCELS, &n, &err) == 0 &&
	    (n < 1 || n > MODEL_MAX_ACCELS))
		abort();
	catalogue_release(&c);
	free(s);
	return 0;
}
