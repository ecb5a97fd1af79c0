/* A job document from the store (or a hostile file in its place). */
#include "fuzz.h"

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
	if (!j)
		return 0;
	struct job job;
	struct tk_error err;
	if (job_unpack(j, &job, &err) == 0) {
		json_t *p1 = job_pack(&job);
		struct job back;
		if (job_unpack(p1, &back, &err) != 0)
			abort();
		json_t *p2 = job_pack(&back);
		if (!json_equal(p1, p2))
			abort();
		json_decref(p1);
		json_decref(p2);
		job_release(&back);
		job_release(&job);
	}
	json_decref(j);
	return 0;
}
