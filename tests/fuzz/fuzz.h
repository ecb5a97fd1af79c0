/* The entry point every fuzz target defines (libFuzzer's convention). */
#pragma once

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the last input came to in a target that says (1 decoded, 0
 * refused; -1: the target does not say): the replay holds the corpus'
 * v1-* files, messages as protocol 1's agents and servers send them
 * (packed by that version's code), to decoding. */
extern int fuzz_decoded;

/* The whole of a target for a message type of the agent protocol
 * (model/wire.h), T_pack/T_unpack: whatever the input, unpacking fails with
 * a message, or gives a message whose packed form unpacks to the same packed
 * form again. RELEASE(m) frees what an unpacked m owns. */
#define FUZZ_WIRE_ROUND_TRIP(T, RELEASE)                                                           \
	int fuzz_decoded = -1;                                                                     \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                               \
	{                                                                                          \
		json_t *j = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);            \
		if (!j)                                                                            \
			return 0;                                                                  \
		struct T *m = xmalloc(sizeof(*m)), *back = xmalloc(sizeof(*back));                 \
		struct tk_error err = {""};                                                        \
		fuzz_decoded = T##_unpack(j, m, &err) == 0;                                        \
		if (fuzz_decoded) {                                                                \
			json_t *p = T##_pack(m);                                                   \
			if (T##_unpack(p, back, &err) != 0) {                                      \
				fprintf(stderr, "%s\n", err.text);                                 \
				abort();                                                           \
			}                                                                          \
			json_t *again = T##_pack(back);                                            \
			if (!json_equal(p, again))                                                 \
				abort();                                                           \
			json_decref(again);                                                        \
			json_decref(p);                                                            \
			RELEASE(back);                                                             \
			RELEASE(m);                                                                \
		} else if (!err.text[0]) {                                                         \
			abort(); /* a refusal always says why */                                   \
		}                                                                                  \
		free(m);                                                                           \
		free(back);                                                                        \
		json_decref(j);                                                                    \
		return 0;                                                                          \
	}
