/*
 * Replays a fuzz target's corpus: every file in the folders (or the files)
 * given runs through LLVMFuzzerTestOneInput once. Built with any compiler,
 * so the corpora run in every `make check`, under the sanitizers too.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util/util.h"

/* (a target that does not say what an input came to leaves it so) */
__attribute__((weak)) int fuzz_decoded = -1;

static int run_file(const char *path, int *count)
{
	char *data;
	size_t len;
	int r = tk_read_file(path, 16 * 1024 * 1024, &data, &len);
	if (r < 0) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		return 1;
	}
	fuzz_decoded = -1;
	LLVMFuzzerTestOneInput((const uint8_t *)data, len);
	free(data);
	(*count)++;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (strncmp(base, "v1-", 3) == 0 && fuzz_decoded == 0) {
		fprintf(stderr,
			"replay: %s: a message as protocol 1 sends it no longer decodes: a "
			"server must serve the agents of the version before its own\n",
			path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0, bad = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: no such corpus %s\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			bad |= run_file(argv[i], &count);
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, alphasort);
		for (int k = 0; k < n; k++) {
			if (names[k]->d_name[0] != '.') {
				char *p = xasprintf("%s/%s", argv[i], names[k]->d_name);
				bad |= run_file(p, &count);
				free(p);
			}
			free(names[k]);
		}
		free(names);
	}
	printf("replayed %d inputs\n", count);
	return bad || count == 0;
}
