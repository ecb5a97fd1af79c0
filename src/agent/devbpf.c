/*
 * cgroup v2's device rules. v1 has a devices controller with devices.deny;
 * v2 has none: a cgroup's device accesses are decided by eBPF programs of
 * type BPF_PROG_TYPE_CGROUP_DEVICE attached to it (and to its ancestors,
 * every one of which must allow). An attempt's program refuses the
 * devices of its limits (the node's GPUs that are not the attempt's) and
 * allows everything else, as devices.deny does on v1.
 *
 * The program is a few instructions per rule, written here as runc's
 * device filter writes its own, so no BPF library is needed:
 *
 *   r2 = ctx->access_type & 0xffff    (the device's type: char or block)
 *   r3 = ctx->major; r4 = ctx->minor
 *   for each rule: if r2 == type && r3 == major && r4 == minor: return 0
 *   return 1
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

/* "c 195:1 rwm": its type (BPF_DEVCG_DEV_*), major and minor. */
static int parse_rule(const char *rule, int *type, int64_t *maj, int64_t *min)
{
	if ((rule[0] != 'c' && rule[0] != 'b') || rule[1] != ' ')
		return -EINVAL;
	*type = rule[0] == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK;
	char num[16];
	const char *colon = strchr(rule + 2, ':');
	if (!colon || (size_t)(colon - rule - 2) >= sizeof(num))
		return -EINVAL;
	memcpy(num, rule + 2, (size_t)(colon - rule - 2));
	num[colon - rule - 2] = '\0';
	if (tk_parse_int64(num, 0, 0xfffff, maj) < 0)
		return -EINVAL;
	size_t k = strcspn(colon + 1, " ");
	if (k == 0 || k >= sizeof(num))
		return -EINVAL;
	memcpy(num, colon + 1, k);
	num[k] = '\0';
	return tk_parse_int64(num, 0, 0xfffff, min) < 0 ? -EINVAL : 0;
}

static int bpf_call(int cmd, union bpf_attr *attr)
{
	long r = syscall(SYS_bpf, cmd, attr, sizeof(*attr));
	return r < 0 ? -errno : (int)r;
}

int cg_v2_deny_devices(const char *dir, const struct cg_limits *lim, char *why, size_t n)
{
	int ninsn = 4 + 5 * lim->ndeny + 2;
	struct bpf_insn *p = xcalloc((size_t)ninsn, sizeof(*p));
	int k = 0;
	p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0); /* access_type */
	p[k++] = INSN(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_2, 0, 0, 0xffff);
	p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_3, BPF_REG_1, 4, 0); /* major */
	p[k++] = INSN(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 8, 0); /* minor */
	for (int i = 0; i < lim->ndeny; i++) {
		int type;
		int64_t maj, min;
		if (parse_rule(lim->deny[i], &type, &maj, &min) < 0) {
			snprintf(why, n, "device rule \"%s\" is not \"c|b MAJOR:MINOR ...\"",
				 lim->deny[i]);
			free(p);
			return -EINVAL;
		}
		p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_2, 0, 4, type);
		p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 3, (int32_t)maj);
		p[k++] = INSN(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 2, (int32_t)min);
		p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0); /* refused */
		p[k++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
	}
	p[k++] = INSN(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 1); /* allowed */
	p[k++] = INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);

	union bpf_attr load;
	memset(&load, 0, sizeof(load));
	load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
	load.insns = (uint64_t)(uintptr_t)p;
	load.insn_cnt = (uint32_t)k;
	load.license = (uint64_t)(uintptr_t) "Apache-2.0";
	int prog = bpf_call(BPF_PROG_LOAD, &load);
	_cleanup_free_ char *log = NULL;
	if (prog < 0 && prog != -EPERM) { /* again, for the verifier's words */
		log = xcalloc(1, 16384);
		load.log_buf = (uint64_t)(uintptr_t)log;
		load.log_size = 16384;
		load.log_level = 1;
		prog = bpf_call(BPF_PROG_LOAD, &load);
	}
	free(p);
	if (prog < 0) {
		if (!log)
			log = xstrdup("");
		tk_strip(log);
		snprintf(why, n, "cannot load a device program: %s%s%.200s", strerror(-prog),
			 log[0] ? ": " : "", log);
		return prog;
	}
	int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0) {
		int r = -errno;
		snprintf(why, n, "cannot open %s: %s", dir, strerror(-r));
		close(prog);
		return r;
	}
	union bpf_attr at;
	memset(&at, 0, sizeof(at));
	at.target_fd = (uint32_t)cg;
	at.attach_bpf_fd = (uint32_t)prog;
	at.attach_type = BPF_CGROUP_DEVICE;
	at.attach_flags = BPF_F_ALLOW_MULTI; /* beside what the parents attached */
	int r = bpf_call(BPF_PROG_ATTACH, &at);
	if (r < 0)
		snprintf(why, n, "cannot attach a device program to %s: %s", dir, strerror(-r));
	/* attached, the cgroup holds the program until it is removed */
	close(cg);
	close(prog);
	return r < 0 ? r : 0;
}
