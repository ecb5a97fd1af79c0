/* A user's job request, as the API receives it: whatever decodes must survive
 * a round trip through its JSON form unchanged. */
#include "fuzz.h"

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j =
		json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	if (!j)
		return 0;
	struct job_request r;
	struct tk_error err;
	if (job_request_unpack(j, &r, &err) == 0) {
		json_t *p1 = job_request_pack(&r);
		struct job_request r2;
		if (job_request_unpack(p1, &r2, &err) != 0)
			abort();
		json_t *p2 = job_request_pack(&r2);
		if (!json_equal(p1, p2))
			abort();
		json_decref(p1);
		json_decref(p2);
		job_request_release(&r2);
		job_request_release(&r);
	} else if (!err.text[0]) {
		abort(); /* every refusal says why */
	}
	json_decref(j);
	return 0;
}
