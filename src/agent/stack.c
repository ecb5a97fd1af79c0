/*
 * The node's software stack (model.h, struct node_stack): the kernel and
 * the OS release, NVIDIA's driver, the CUDA it serves and the devices'
 * VBIOS (through the agent's NVML), the NCCL its loader finds, the RDMA
 * devices' firmware (sysfs) and tenk's own version. Read at the start and
 * at every heartbeat (a uname, a small file and sysfs; the GPU libraries
 * once a minute); a change goes to the server with the next beat, which
 * drops the node's validation.
 *
 * --fake-stack FILE is the stand-in of tests: a JSON object whose fields
 * replace what was read, read again each time, so that a test upgrades a
 * node's kernel or driver by writing a file.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#define STACK_GPU_EVERY_MS 60000

/* /etc/os-release's PRETTY_NAME (TENK_OS_RELEASE: another file) */
static void os_release(char *out, size_t n)
{
	const char *path =
		getenv("TENK_OS_RELEASE") ? getenv("TENK_OS_RELEASE") : "/etc/os-release";
	snprintf(out, n, "unknown");
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "PRETTY_NAME=", 12) != 0)
			continue;
		char *v = line + 12;
		v[strcspn(v, "\n")] = 0;
		size_t len = strlen(v);
		if (len >= 2 && (v[0] == '"' || v[0] == '\'') && v[len - 1] == v[0]) {
			v[len - 1] = 0;
			v++;
		}
		tk_strlcpy(out, v, n);
		break;
	}
	fclose(f);
}

/* The NCCL the loader finds, by its own word. */
static void nccl_version(char *out, size_t n)
{
	snprintf(out, n, "none");
	void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return;
	int (*ver)(int *);
	*(void **)&ver = dlsym(lib, "ncclGetVersion");
	int v = 0;
	if (ver && ver(&v) == 0 && v > 0)
		snprintf(out, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	dlclose(lib);
}

/* The RDMA devices' firmware: "mlx5_0 28.39.1002, mlx5_1 ..."; "none". */
static void nic_firmware(char *out, size_t n)
{
	const char *sys =
		getenv("TENK_SYSFS") && *getenv("TENK_SYSFS") ? getenv("TENK_SYSFS") : "/sys";
	_cleanup_free_ char *dir = xasprintf("%s/class/infiniband", sys);
	size_t count = 0, used = 0;
	char **names = model_sysfs_list(dir, &count);
	snprintf(out, n, "none");
	for (size_t i = 0; i < count && used < n; i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s/fw_ver", dir, names[i]);
		char fw[64];
		if (!model_sysfs_line(p, fw, sizeof(fw)))
			snprintf(fw, sizeof(fw), "unreadable");
		used += (size_t)snprintf(out + used, n - used, "%s%s %s", used ? ", " : "",
					 names[i], fw);
	}
	model_sysfs_list_free(names, count);
}

/* --fake-stack's fields over st; a file gone wrong (said once) leaves its
 * last good fields standing */
static void fake(struct agent *a, struct node_stack *st)
{
	json_error_t je;
	json_t *j = json_load_file(a->cfg.fake_stack, 0, &je);
	struct node_stack over;
	struct tk_error err;
	if (!j || node_stack_unpack(j, NULL, &over, &err) < 0) {
		if (!a->stack_fake_bad)
			log_warn("--fake-stack %s: %s; its last good fields stand",
				 a->cfg.fake_stack, j ? err.text : je.text);
		a->stack_fake_bad = true;
	} else {
		a->stack_fake = over;
		a->stack_fake_bad = false;
	}
	json_decref(j);
	for (int k = 0; k < NODE_STACK_FIELDS; k++)
		if (node_stack_field(&a->stack_fake, k)[0])
			node_stack_set(st, k, node_stack_field(&a->stack_fake, k));
}

void agent__stack_read(struct agent *a, bool gpu)
{
	int64_t now = tk_mono_ms();
	if (gpu || now >= a->stack_gpu_next_ms) {
		struct node_stack *g = &a->stack_gpu;
		memset(g, 0, sizeof(*g));
		snprintf(g->driver, sizeof(g->driver), "none");
		snprintf(g->cuda, sizeof(g->cuda), "none");
		snprintf(g->vbios, sizeof(g->vbios), "none");
		agent__nvml_versions(a->nvml, g);
		nccl_version(g->nccl, sizeof(g->nccl));
		a->stack_gpu_next_ms = now + STACK_GPU_EVERY_MS;
	}
	struct node_stack st = a->stack_gpu;
	struct utsname u;
	tk_strlcpy(st.kernel, uname(&u) == 0 ? u.release : "unknown", sizeof(st.kernel));
	os_release(st.os, sizeof(st.os));
	nic_firmware(st.nic_fw, sizeof(st.nic_fw));
	snprintf(st.tenk, sizeof(st.tenk), "%s", TENK_VERSION);
	if (a->cfg.fake_stack)
		fake(a, &st);
	if (a->inv.has_stack && node_stack_same(&st, &a->inv.stack))
		return;
	char what[256];
	if (a->inv.has_stack && node_stack_diff(&a->inv.stack, &st, what, sizeof(what)))
		log_info("this node's software stack changed: %s", what);
	a->inv.stack = st;
	a->inv.has_stack = true;
	a->stack_gen++;
}
