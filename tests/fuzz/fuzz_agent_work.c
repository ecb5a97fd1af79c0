/* The server's answer to a work long-poll, as an agent reads it. Whatever it holds, unpacking
 * either fails with a message or gives a message whose packed form unpacks
 * to the same packed form again. */
#include "fuzz.h"

#include <stdio.h>

#include "model/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
	if (!j)
		return 0;
	struct wire_work mm, bb, *m = &mm, *back = &bb;
	struct tk_error err = {""};
	if (wire_work_unpack(j, m, &err) == 0) {
		json_t *p = wire_work_pack(m);
		if (wire_work_unpack(p, back, &err) != 0) {
			fprintf(stderr, "%s\n", err.text);
			abort();
		}
		json_t *again = wire_work_pack(back);
		if (!json_equal(p, again))
			abort();
		json_decref(again);
		json_decref(p);
		wire_work_release(back);
		wire_work_release(m);
	} else if (!err.text[0]) {
		abort(); /* a refusal always says why */
	}
	json_decref(j);
	return 0;
}
