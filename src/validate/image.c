/*
 * tenk validate --image REF on one node: the run, every layer, inside a
 * container of the image, so that a new CUDA or PyTorch image is proven on
 * the hardware before the cluster switches to it. Podman runs it as the
 * agent runs a job's task (host network and IPC, the node's GPUs by CDI
 * where it has a spec), with this tenk binary mounted read-only; the
 * system layer records the image and its digest.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv; its stdout (the first line, stripped) into out. Returns its
 * exit status, or -errno. */
static int capture(char *const *argv, char *out, size_t n)
{
	int p[2];
	if (pipe(p) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	for (;;) {
		ssize_t k = read(p[0], out + got, n - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || (got += (size_t)k) >= n - 1)
			break;
	}
	out[got] = '\0';
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	tk_strip(out);
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int validate_in_image(const char *ref, int argc, char **argv)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0) {
		fprintf(stderr, "tenk validate: cannot find this program: %s\n", strerror(errno));
		return 1;
	}
	self[len] = '\0';
	_cleanup_free_ char *dir = xstrndup(self, (size_t)(strrchr(self, '/') - self));
	/* the image's ID: in the node's store, or pulled */
	char id[256];
	char *inspect[] = {"podman", "image", "inspect", "--format", "{{.Id}}", (char *)ref, NULL};
	int rc = capture(inspect, id, sizeof(id));
	if (rc != 0) {
		char *pull[] = {"podman", "pull", "--quiet", (char *)ref, NULL};
		fprintf(stderr, "tenk validate: pulling %s\n", ref);
		rc = capture(pull, id, sizeof(id));
	}
	if (rc != 0 || strlen(id) != 64) {
		fprintf(stderr, "tenk validate: image %s: %s\n", ref,
			rc < 0 ? strerror(-rc) : "podman cannot find or pull it (see above)");
		return 1;
	}
	fprintf(stderr, "tenk validate: in image %s (sha256:%.12s)\n", ref, id);
	char **args = NULL;
	int n = 0;
	size_t alloc = 0;
#define ADD(s) (xgrow(&args, &alloc, (size_t)n + 1, sizeof(char *)), args[n++] = (s))
	ADD(xstrdup("podman"));
	ADD(xstrdup("--cgroup-manager"));
	ADD(xstrdup("cgroupfs"));
	static const char *const fixed[] = {"run",   "--rm",	     "--init", "--pull",
					    "never", "--network",    "host",   "--ipc",
					    "host",  "--log-driver", "none",   NULL};
	for (int i = 0; fixed[i]; i++)
		ADD(xstrdup(fixed[i]));
	ADD(xstrdup("--env"));
	ADD(xasprintf("TENK_IMAGE=%s", ref));
	ADD(xstrdup("--env"));
	ADD(xasprintf("TENK_IMAGE_DIGEST=sha256:%s", id));
	ADD(xstrdup("--volume"));
	ADD(xasprintf("%s:%s:ro", dir, dir));
	if (model_cdi_has_gpus("/etc/cdi") || model_cdi_has_gpus("/var/run/cdi")) {
		ADD(xstrdup("--device"));
		ADD(xstrdup("nvidia.com/gpu=all"));
	}
	ADD(xstrdup(id));
	ADD(xstrdup(self));
	ADD(xstrdup("validate"));
	static const char *const own[] = {"--image"};
	static const bool value[] = {true};
	json_t *rest = validate__vargs_without(argc, argv, own, value, 1);
	size_t i;
	json_t *a;
	json_array_foreach (rest, i, a)
		ADD(xstrdup(json_string_value(a)));
	json_decref(rest);
	ADD(NULL);
#undef ADD
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execvp(args[0], args);
		fprintf(stderr, "tenk validate: cannot run podman: %s\n", strerror(errno));
		_exit(127);
	}
	for (int k = 0; args[k]; k++)
		free(args[k]);
	free(args);
	if (pid < 0) {
		fprintf(stderr, "tenk validate: cannot start podman: %s\n", strerror(errno));
		return 1;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
