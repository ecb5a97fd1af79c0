/* An operator's catalogue file: a refused file must change nothing. */
#include "fuzz.h"

#include <string.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xstrndup((const char *)data, size);
	struct catalogue c;
	catalogue_init(&c);
	size_t n = c.n;
	struct catalogue_entry first = c.entries[0];
	struct tk_error err;
	if (catalogue_load_json(&c, s, &err) < 0) {
		if (c.n != n || memcmp(&first, &c.entries[0], sizeof(first)) != 0)
			abort();
	}
	catalogue_release(&c);
	free(s);
	return 0;
}
