/* What an agent reports when it registers, and the node records stored. */
#include "fuzz.h"

#include <string.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
	if (!j)
		return 0;
	struct node_inventory *inv = xmalloc(sizeof(*inv));
	struct node_record *rec = xmalloc(sizeof(*rec));
	struct tk_error err;
	if (node_inventory_unpack(j, inv, &err) == 0) {
		json_t *p = node_inventory_pack(inv);
		struct node_inventory *back = xmalloc(sizeof(*back));
		if (node_inventory_unpack(p, back, &err) != 0 || memcmp(inv, back, sizeof(*inv)))
			abort();
		free(back);
		json_decref(p);
	}
	if (node_record_unpack(j, rec, &err) == 0) {
		json_t *p = node_record_pack(rec);
		json_decref(p);
	}
	free(inv);
	free(rec);
	json_decref(j);
	return 0;
}
