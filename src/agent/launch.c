/*
 * Launching and supervising an attempt's part on this node (a group). The
 * agent prepares everything a task needs (the launch environment of
 * DESIGN.md section 3, its folder and output, the Unix account it runs as,
 * resolved here), writes it as the plan of a shim (shim.c), starts the shim
 * with the socket it listens on, and follows it: every status the shim
 * sends becomes the task events the server hears of. A stop is a command
 * to the shim, which sends SIGTERM, waits the grace period and kills.
 *
 * Tasks run as the job's owner's account: the shim's child takes its groups,
 * gid and uid and proves root cannot be had back before it opens its folder
 * and output, so permissions decide and no symlink turns a root write. A
 * node without the account, or a job that would run as root where root is
 * not allowed, fails to launch with that said. An agent that is not root
 * runs every task as itself; the server's own work (validation) runs as the
 * agent.
 *
 * When the group's shim starts, and when it is forgotten, is decided by its
 * state machine (group.c); this file is the machine's shim part (group_ops):
 * it writes the plan, starts the shim, talks to it, and forgets the group's
 * folder once the server has heard all of it.
 *
 * Shims outlive their agent. An agent that starts finds the shims of the
 * one before in WORK/shims, makes their groups again from their plans,
 * and connects to them; the statuses they kept become the events not yet
 * reported. Every shim holds its tasks on a lease the agent renews while
 * the server answers it (wire.h).
 */
#include "internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

static void release_cpus(struct taskgroup *g);

/* ---- freeing -------------------------------------------------------------------------- */

/* Removes a shim's folder WORK/shims/JOB.ATTEMPT and what a shim puts there
 * (its plan, its status, its socket, its tasks' environment files, the
 * places its containers' mounts were bound, unmounted first). */
static void remove_dir(const char *dir)
{
	ctr_unstage(dir, -1);
	tk_rmdir_files(dir);
}

/* Frees g's memory. */
static void free_group(struct taskgroup *g)
{
	if (g->plan) {
		shim_plan_release(g->plan);
		free(g->plan);
	}
	agent__ckpt_group_release(g);
	agent__train_release(g, false);
	agent__nccl_release(g, false);
	release_cpus(g);
	free(g->cpus);
	if (g->shim.dirfd >= 0)
		close(g->shim.dirfd);
	strbuf_release(&g->shim.in);
	free(g->shim.dir);
	free(g->tasks);
	free(g);
}

/* The group is gone (over: its attempt is done here, and the server has
 * heard all of it): its folder, its files, its memory. */
static void forget(struct taskgroup *g, bool over)
{
	if (!over) {
		free_group(g); /* the agent goes: the shim keeps its folder */
		return;
	}
	struct agent *a = g->a;
	remove_dir(g->shim.dir);
	agent__disk_remove(g);
	agent__train_release(g, true);
	agent__nccl_release(g, true);
	tk_map_del(&a->groups, g->key);
	/* the job's checkpoint folder goes with its last attempt here, if the
	 * job left nothing in it (what it left waits for its next attempt) */
	bool other = false;
	size_t pos = 0;
	void *v;
	while (!other && tk_map_next(&a->groups, &pos, NULL, &v))
		other = ((struct taskgroup *)v)->job == g->job;
	if (!other) {
		_cleanup_free_ char *ckpt =
			xasprintf("%s/checkpoints/%lld", a->cfg.work_dir, (long long)g->job);
		rmdir(ckpt);
	}
	free_group(g);
}

/* ---- talking to the shim --------------------------------------------------------------- */

static void conn_closed(uv_handle_t *h)
{
	struct taskgroup *g = h->data;
	g->shim.conn_open = false;
	group_unhold(g);
}

static void write_done(uv_write_t *w, int status)
{
	free(w->data);
	free(w);
}

static bool shim_send(struct taskgroup *g, const struct shim_cmd *c)
{
	if (!g->shim.conn_open || uv_is_closing((uv_handle_t *)&g->shim.conn))
		return false;
	json_t *j = shim_cmd_pack(c);
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	size_t n = strlen(text);
	text = xrealloc(text, n + 2);
	memcpy(text + n, "\n", 2);
	uv_write_t *w = xmalloc(sizeof(*w));
	w->data = text;
	uv_buf_t b = uv_buf_init(text, (unsigned)n + 1);
	if (uv_write(w, (uv_stream_t *)&g->shim.conn, &b, 1, write_done) < 0) {
		free(text);
		free(w);
	}
	return true;
}

void agent__group_kill(struct taskgroup *g)
{
	for (int i = 0; i < g->ntasks; i++)
		if (!g->tasks[i].exited && g->tasks[i].pid > 0)
			kill(-g->tasks[i].pid, SIGKILL);
}

static void status_line(void *arg, const char *line, size_t len)
{
	struct taskgroup *g = arg;
	json_error_t jerr;
	json_t *j = json_loadb(line, len, 0, &jerr);
	struct shim_status st;
	struct tk_error err;
	if (!j || shim_status_unpack(j, &st, &err) < 0) {
		log_warn("job %lld.%d: a malformed status from its shim, ignored: %s",
			 (long long)g->job, g->attempt, j ? err.text : jerr.text);
		json_decref(j);
		return;
	}
	json_decref(j);
	group_status(g, &st); /* g stays: its connection is open */
	shim_status_release(&st);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	*buf = uv_buf_init(xmalloc(65536), 65536);
}

/* Every process of g's attempt here ends: its cgroup and what is below it
 * are killed over and over until empty (or, with no cgroup, its tasks'
 * process groups). plan: the attempt's (NULL: read from its shim's
 * folder). Nothing of it may outlive its report: the server starts its
 * next attempt on the exits. Processes that cannot be killed are a fault
 * of the node, which the server drains. */
static void empty_attempt(struct taskgroup *g, const struct shim_plan *plan)
{
	struct shim_plan own = {0};
	struct tk_error err;
	if (!plan) {
		_cleanup_free_ char *path = xasprintf("%s/plan.json", g->shim.dir);
		char *text = NULL;
		json_t *j = NULL;
		int r = tk_read_file(path, 64 * 1024 * 1024, &text, NULL);
		if (r == 0 && (j = json_loads(text, 0, NULL)) &&
		    shim_plan_unpack(j, &own, &err) == 0)
			plan = &own;
		else
			log_warn("job %lld.%d: cannot read %s; killing its tasks by their process "
				 "groups only",
				 (long long)g->job, g->attempt, path);
		free(text);
		json_decref(j);
	}
	int left = 0;
	if (plan && plan->cgroup) {
		struct cgroup cg = {0};
		if (cg_create(&cg, "/proc/self/mountinfo", "/proc/self/cgroup", plan->node, g->key,
			      &plan->limits, &err) > 0)
			left = cg_kill(&cg);
		else
			log_warn("job %lld.%d: its cgroup: %s", (long long)g->job, g->attempt,
				 err.text);
		cg_destroy(&cg);
	} else {
		agent__group_kill(g);
	}
	shim_plan_release(&own);
	if (left) {
		char fault[WIRE_FAULT_MAX];
		snprintf(fault, sizeof(fault),
			 "%d process(es) of job %lld attempt %d outlived SIGKILL in its cgroup",
			 left, (long long)g->job, g->attempt);
		log_err("%s", fault);
		agent__health_fault(g->a, fault);
	}
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct taskgroup *g = s->data;
	if (n > 0 && shim_lines(&g->shim.in, buf->base, (size_t)n, status_line, g) < 0) {
		log_warn("job %lld.%d: its shim sent a line too long", (long long)g->job,
			 g->attempt);
		n = UV_EOF;
	}
	free(buf->base);
	if (n >= 0)
		return;
	if (group_running(g) && g->state != GROUP_DETACHED) {
		/* its tasks would run on unsupervised, unfenced, beside the next
		 * attempt: they end before their exits are told */
		log_warn("job %lld.%d: its shim ended; killing what is left of its attempt",
			 (long long)g->job, g->attempt);
		empty_attempt(g, NULL);
	}
	group_shim_gone(g, "its shim ended");
	if (!uv_is_closing((uv_handle_t *)&g->shim.conn))
		uv_close((uv_handle_t *)&g->shim.conn, conn_closed);
}

static void shim_closed(struct proc *p)
{
	group_unhold(p->data);
}

static void shim_exit_cb(struct proc *p, int64_t status, int sig)
{
	struct taskgroup *g = p->data;
	g->shim.running = false;
	if (status || sig)
		log_warn("job %lld.%d: its shim exited %lld%s%s", (long long)g->job, g->attempt,
			 (long long)status, sig ? ", signal " : "", sig ? strsignal(sig) : "");
	agent__proc_close(p, shim_closed);
}

/* The agent stops: the connection closes and the shim is no longer
 * watched; it keeps its tasks and their statuses for the next agent. */
static void shim_let_go(struct taskgroup *g)
{
	if (g->shim.conn_open && !uv_is_closing((uv_handle_t *)&g->shim.conn))
		uv_close((uv_handle_t *)&g->shim.conn, conn_closed);
	if (g->shim.running) {
		g->shim.running = false;
		agent__proc_close(&g->shim.proc, shim_closed);
	}
}

/* ---- preparing the plan ------------------------------------------------------------------ */

/* Where a container finds its metrics file and NCCL's log folder (the
 * host's are in the run folder, which may be under /dev/shm, a place of
 * the container's own). */
#define CTR_METRICS "/tenk/metrics"
#define CTR_NCCL "/tenk/nccl"

static void env_add(char ***env, int *n, size_t *alloc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void env_add(char ***env, int *n, size_t *alloc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	xgrow(env, alloc, (size_t)*n + 2, sizeof(char *));
	(*env)[(*n)++] = strbuf_detach(&sb);
	(*env)[*n] = NULL;
}

/* Names tenk sets itself: the job's environment cannot override them. */
static bool reserved(const char *key, size_t len, bool fraction)
{
	static const char *const names[] = {
		"MASTER_ADDR",
		"MASTER_PORT",
		"WORLD_SIZE",
		"RANK",
		"LOCAL_RANK",
		"LOCAL_WORLD_SIZE",
		"NODE_RANK",
		"GROUP_RANK",
		"NNODES",
		"CUDA_VISIBLE_DEVICES",
		"CUDA_DEVICE_ORDER",
		"HOME",
		"USER",
		"LOGNAME",
		"SHELL",
		NULL,
	};
	if ((len > 5 && strncmp(key, "TENK_", 5) == 0) || (len > 4 && strncmp(key, "PET_", 4) == 0))
		return true;
	/* a fraction's share of the device is tenk's to set */
	if (fraction && len > 9 && strncmp(key, "CUDA_MPS_", 9) == 0)
		return true;
	for (const char *const *p = names; *p; p++)
		if (strlen(*p) == len && strncmp(*p, key, len) == 0)
			return true;
	return false;
}

/* Whether this machine's own name resolves to a loopback address (Debian's
 * /etc/hosts maps it to 127.0.1.1): libraries that find their address by
 * the host name (gloo, NCCL) then offer peers a loopback address. */
static bool hostname_is_loopback(void)
{
	char name[256];
	if (gethostname(name, sizeof(name) - 1) < 0)
		return false;
	name[sizeof(name) - 1] = 0;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return false;
	bool loop = false;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET)
			loop |= (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >>
				 24) == 127;
		else if (ai->ai_family == AF_INET6)
			loop |= IN6_IS_ADDR_LOOPBACK(
				&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
	}
	freeaddrinfo(res);
	return loop;
}

/* The interface this machine reaches addr through ("" when it cannot
 * tell): a UDP socket connected there (which sends nothing) names the
 * local address, and the interface holding it is the one. */
static void iface_toward(const char *addr, char *out, size_t n)
{
	out[0] = 0;
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICHOST}, *res;
	if (getaddrinfo(addr, "9", &hints, &res) != 0)
		return;
	int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
		  getsockname(fd, (struct sockaddr *)&local, &len) == 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	struct ifaddrs *ifs;
	if (!ok || getifaddrs(&ifs) < 0)
		return;
	for (struct ifaddrs *i = ifs; i && !out[0]; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != local.ss_family)
			continue;
		bool same = local.ss_family == AF_INET
				    ? ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
					      ((struct sockaddr_in *)&local)->sin_addr.s_addr
				    : memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
					     &((struct sockaddr_in6 *)&local)->sin6_addr,
					     sizeof(struct in6_addr)) == 0;
		if (same)
			snprintf(out, n, "%s", i->ifa_name);
	}
	freeifaddrs(ifs);
}

static bool env_has(char **env, int n, const char *key)
{
	size_t k = strlen(key);
	for (int i = 0; i < n; i++)
		if (strncmp(env[i], key, k) == 0 && env[i][k] == '=')
			return true;
	return false;
}

/* Slurm's names for what tenk sets (--slurm-env), so that a script
 * written for Slurm runs unchanged. */
static void slurm_env(const struct taskgroup *g, const struct work_spec *spec, int local, int rank,
		      char ***env, int *n, size_t *alloc)
{
	env_add(env, n, alloc, "SLURM_JOB_ID=%lld", (long long)g->job);
	env_add(env, n, alloc, "SLURM_JOBID=%lld", (long long)g->job);
	env_add(env, n, alloc, "SLURM_JOB_NAME=%s", spec->name);
	env_add(env, n, alloc, "SLURM_JOB_USER=%s", spec->owner);
	env_add(env, n, alloc, "SLURM_JOB_NUM_NODES=%d", g->nnodes);
	env_add(env, n, alloc, "SLURM_NNODES=%d", g->nnodes);
	env_add(env, n, alloc, "SLURM_NTASKS=%d", g->world_size);
	env_add(env, n, alloc, "SLURM_NPROCS=%d", g->world_size);
	env_add(env, n, alloc, "SLURM_NTASKS_PER_NODE=%d", g->tpn);
	env_add(env, n, alloc, "SLURM_PROCID=%d", rank);
	env_add(env, n, alloc, "SLURM_LOCALID=%d", local);
	env_add(env, n, alloc, "SLURM_NODEID=%d", g->node_rank);
	env_add(env, n, alloc, "SLURM_SUBMIT_DIR=%s", spec->cwd);
	env_add(env, n, alloc, "SLURMD_NODENAME=%s", g->a->inv.name);
	env_add(env, n, alloc, "SLURM_RESTART_COUNT=%d", g->attempt - 1);
	if (spec->array_job) {
		env_add(env, n, alloc, "SLURM_ARRAY_JOB_ID=%lld", (long long)spec->array_job);
		env_add(env, n, alloc, "SLURM_ARRAY_TASK_ID=%d", spec->array_index);
		env_add(env, n, alloc, "SLURM_ARRAY_TASK_COUNT=%d", spec->array_count);
	}
}

/* A validation run checks the node as its agent sees it: with the agent's
 * environment, as the device check has it (where the node's libraries and
 * tools are: PATH, LD_LIBRARY_PATH; the sysfs and procfs the agent reads,
 * TENK_SYSFS and TENK_PROCFS, an agent in a container reading the host's
 * mounted elsewhere), less what tenk sets itself and NCCL's settings (the
 * network layer judges those jobs get, and jobs do not get the agent's);
 * the run's own variables first. Not in an image, whose are its own. */
static void agent_env_add(char ***env, int *n, size_t *alloc, bool *have_path, bool fraction)
{
	for (char **e = environ; *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		size_t klen = (size_t)(eq - *e);
		bool root = (klen == 10 && strncmp(*e, "TENK_SYSFS", 10) == 0) ||
			    (klen == 11 && strncmp(*e, "TENK_PROCFS", 11) == 0);
		if ((!root && reserved(*e, klen, fraction)) || strncmp(*e, "NCCL_", 5) == 0)
			continue;
		bool given = false;
		for (int i = 0; i < *n && !given; i++)
			given = strncmp((*env)[i], *e, klen + 1) == 0;
		if (given)
			continue;
		if (klen == 4 && strncmp(*e, "PATH", 4) == 0)
			*have_path = true;
		env_add(env, n, alloc, "%s", *e);
	}
}

/* The launch environment of local task `local` (rank `rank`), for the
 * account pw (its HOME, USER, LOGNAME, SHELL). */
static void build_env(struct taskgroup *g, const struct work_spec *spec, int local, int rank,
		      const char *ckpt, const char *metrics, const char *nccl,
		      const struct passwd *pw, struct shim_task *t)
{
	int milli = spec->milli;
	bool fraction = milli > 0 && milli < MODEL_MILLI;
	char **env = NULL;
	int n = 0;
	size_t alloc = 0;
	bool have_path = false;
	for (int i = 0; i < spec->nenv; i++) {
		const char *kv = spec->env[i];
		size_t klen = (size_t)(strchr(kv, '=') - kv);
		/* a validation run's token is the server's to give */
		bool token =
			spec->system && klen == 19 && strncmp(kv, "TENK_VALIDATE_TOKEN", 19) == 0;
		if (!token && reserved(kv, klen, fraction))
			continue;
		/* with --slurm-env, the SLURM_* variables are this job's */
		if (spec->slurm_env && klen > 6 && strncmp(kv, "SLURM", 5) == 0)
			continue;
		/* a service's replica serves where tenk says */
		if (spec->port && klen == 4 && strncmp(kv, "PORT", 4) == 0)
			continue;
		if (klen == 4 && strncmp(kv, "PATH", 4) == 0)
			have_path = true;
		env_add(&env, &n, &alloc, "%s", kv);
	}
	if (spec->system && !spec->image)
		agent_env_add(&env, &n, &alloc, &have_path, fraction);
	if (!have_path)
		env_add(&env, &n, &alloc, "PATH=/usr/local/bin:/usr/bin:/bin");
	if (pw) {
		env_add(&env, &n, &alloc, "HOME=%s", pw->pw_dir);
		env_add(&env, &n, &alloc, "USER=%s", pw->pw_name);
		env_add(&env, &n, &alloc, "LOGNAME=%s", pw->pw_name);
		env_add(&env, &n, &alloc, "SHELL=%s",
			pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh");
	}
	int ndevs;
	const int *devs = work_spec_devices(spec, local, &ndevs);
	struct strbuf cvd;
	strbuf_init(&cvd);
	for (int i = 0; i < ndevs; i++)
		strbuf_addf(&cvd, "%s%d", i ? "," : "", devs[i]);
	env_add(&env, &n, &alloc, "MASTER_ADDR=%s", spec->master_addr);
	env_add(&env, &n, &alloc, "MASTER_PORT=%d", spec->master_port);
	env_add(&env, &n, &alloc, "WORLD_SIZE=%d", g->world_size);
	env_add(&env, &n, &alloc, "RANK=%d", rank);
	env_add(&env, &n, &alloc, "LOCAL_RANK=%d", local);
	env_add(&env, &n, &alloc, "LOCAL_WORLD_SIZE=%d", g->tpn);
	env_add(&env, &n, &alloc, "NODE_RANK=%d", g->node_rank);
	env_add(&env, &n, &alloc, "GROUP_RANK=%d", g->node_rank);
	env_add(&env, &n, &alloc, "NNODES=%d", g->nnodes);
	/* torchrun's own: a plain `torchrun train.py` uses the job's rendezvous */
	env_add(&env, &n, &alloc, "PET_NNODES=%d", g->nnodes);
	env_add(&env, &n, &alloc, "PET_NODE_RANK=%d", g->node_rank);
	env_add(&env, &n, &alloc, "PET_NPROC_PER_NODE=%d", g->tpn == 1 && ndevs > 1 ? ndevs : 1);
	env_add(&env, &n, &alloc, "PET_MASTER_ADDR=%s", spec->master_addr);
	env_add(&env, &n, &alloc, "PET_MASTER_PORT=%d", spec->master_port);
	for (int k = 0; g->loop_ifname[0] && k < 2; k++) {
		const char *key = k ? "NCCL_SOCKET_IFNAME" : "GLOO_SOCKET_IFNAME";
		if (!env_has(env, n, key))
			env_add(&env, &n, &alloc, "%s=%s", key, g->loop_ifname);
	}
	/* its GPUs' nearest RDMA ports (the inventory's places), unless the
	 * job names its own */
	char hca[256];
	if (!env_has(env, n, "NCCL_IB_HCA") &&
	    node_hca_of(&g->a->inv, devs, ndevs, hca, sizeof(hca)))
		env_add(&env, &n, &alloc, "NCCL_IB_HCA=%s", hca);
	env_add(&env, &n, &alloc, "CUDA_DEVICE_ORDER=PCI_BUS_ID");
	env_add(&env, &n, &alloc, "CUDA_VISIBLE_DEVICES=%s", cvd.buf);
	env_add(&env, &n, &alloc, "TENK_JOB_ID=%lld", (long long)g->job);
	env_add(&env, &n, &alloc, "TENK_ATTEMPT=%d", g->attempt);
	env_add(&env, &n, &alloc, "TENK_JOB_NAME=%s", spec->name);
	if (spec->array_job) {
		env_add(&env, &n, &alloc, "TENK_ARRAY_JOB_ID=%lld", (long long)spec->array_job);
		env_add(&env, &n, &alloc, "TENK_ARRAY_INDEX=%d", spec->array_index);
		env_add(&env, &n, &alloc, "TENK_ARRAY_COUNT=%d", spec->array_count);
	}
	if (spec->slurm_env)
		slurm_env(g, spec, local, rank, &env, &n, &alloc);
	if (spec->port) {
		env_add(&env, &n, &alloc, "PORT=%d", spec->port);
		env_add(&env, &n, &alloc, "TENK_PORT=%d", spec->port);
	}
	env_add(&env, &n, &alloc, "TENK_NODE_NAME=%s", g->a->inv.name);
	env_add(&env, &n, &alloc, "TENK_CHECKPOINT_DIR=%s", ckpt);
	env_add(&env, &n, &alloc, "TENK_METRICS=%s", metrics);
	/* --nccl-check: NCCL's log where the agent reads it (the job's own
	 * NCCL_DEBUG or NCCL_DEBUG_FILE wins: then it reads what comes) */
	if (nccl) {
		if (!env_has(env, n, "NCCL_DEBUG"))
			env_add(&env, &n, &alloc, "NCCL_DEBUG=INFO");
		if (!env_has(env, n, "NCCL_DEBUG_SUBSYS"))
			env_add(&env, &n, &alloc, "NCCL_DEBUG_SUBSYS=INIT,NET");
		if (!env_has(env, n, "NCCL_DEBUG_FILE"))
			env_add(&env, &n, &alloc, "NCCL_DEBUG_FILE=%s/nccl.%%h.%%p", nccl);
	}
	env_add(&env, &n, &alloc, "TENK_SERVER=%s", g->a->cfg.server_url);
	if (g->a->cfg.ca_file)
		env_add(&env, &n, &alloc, "TENK_CA=%s", g->a->cfg.ca_file);
	if (g->a->cfg.insecure_http)
		env_add(&env, &n, &alloc, "TENK_INSECURE_HTTP=1");
	if (fraction) {
		env_add(&env, &n, &alloc, "TENK_GPU_FRACTION=%.3f", milli / (double)MODEL_MILLI);
		/* where CUDA MPS runs, hold the task to its share of the device */
		const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
		if (!pipe)
			pipe = "/tmp/nvidia-mps";
		_cleanup_free_ char *control = xasprintf("%s/control", pipe);
		int dev = ndevs > 0 ? devs[0] : -1;
		if (access(control, F_OK) == 0 && dev >= 0 && dev < g->a->inv.naccel) {
			env_add(&env, &n, &alloc, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
			env_add(&env, &n, &alloc, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d",
				(milli + 9) / 10);
			env_add(&env, &n, &alloc, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=%lldM",
				(long long)(g->a->inv.accel[dev].mem_mib * milli / MODEL_MILLI));
		}
	}
	strbuf_release(&cvd);
	t->env = env;
	t->nenv = n;
}

/* Task rank's output pattern, as a path. */
static char *output_path(const struct taskgroup *g, const struct work_spec *spec, int rank,
			 const char *pattern, const char *cwd)
{
	struct output_names v = {.job = g->job,
				 .array_job = spec->array_job,
				 .array_index = spec->array_index,
				 .attempt = g->attempt,
				 .rank = rank,
				 .node_rank = g->node_rank,
				 .node = g->a->inv.name,
				 .owner = spec->owner,
				 .name = spec->name};
	return model_output_path(pattern, cwd, &v);
}

/* Who the tasks run as: fills plan->user (and *ret_pw, borrowed till the
 * next lookup) or says why they cannot run here. */
static int resolve_user(struct agent *a, const struct work_spec *spec, struct shim_plan *plan,
			struct passwd **ret_pw, char *why, size_t n)
{
	*ret_pw = NULL;
	if (spec->system)
		return 0; /* the server's own work: as the agent */
	if (geteuid() != 0) {
		*ret_pw = getpwuid(geteuid()); /* a non-root agent runs all as itself */
		return 0;
	}
	struct passwd *pw = getpwnam(spec->run_as);
	if (!pw) {
		snprintf(why, n, "user %s has no account on %s", spec->run_as, a->inv.name);
		return -ENOENT;
	}
	if (pw->pw_uid == 0 && !spec->allow_root) {
		snprintf(why, n,
			 "user %s is root (uid 0) on %s, and this cluster runs no job as root",
			 spec->run_as, a->inv.name);
		return -EPERM;
	}
	struct shim_user *u = &plan->user;
	snprintf(u->name, sizeof(u->name), "%s", pw->pw_name);
	u->uid = pw->pw_uid;
	u->gid = pw->pw_gid;
	gid_t groups[SHIM_MAX_GROUPS];
	int ng = SHIM_MAX_GROUPS;
	if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &ng) < 0) {
		snprintf(why, n, "user %s is in more than %d groups on %s", spec->run_as,
			 SHIM_MAX_GROUPS, a->inv.name);
		return -E2BIG;
	}
	for (int i = 0; i < ng; i++)
		u->groups[i] = groups[i];
	u->ngroups = ng;
	plan->as_user = true;
	plan->allow_root = spec->allow_root;
	*ret_pw = pw;
	return 0;
}

/* The lowest slot no other attempt here holds (cg_create_on: the cgroup
 * folders an attempt leaves are the next one's in its slot). */
static int take_slot(struct taskgroup *g)
{
	struct agent *a = g->a;
	size_t n = a->groups.len + 1, pos = 0;
	_cleanup_free_ bool *held = xcalloc(n, sizeof(bool));
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		int s = ((struct taskgroup *)v)->cg_slot;
		if (s >= 0 && (size_t)s < n)
			held[s] = true;
	}
	int slot = 0;
	while (held[slot])
		slot++;
	return g->cg_slot = slot;
}

/* The attempt's checkpoint folder, the job's user's own. */
static char *checkpoint_dir(struct taskgroup *g, const struct shim_plan *plan)
{
	struct agent *a = g->a;
	_cleanup_free_ char *base = xasprintf("%s/checkpoints", a->cfg.work_dir);
	char *ckpt = xasprintf("%s/%lld", base, (long long)g->job);
	int r = tk_mkdir_p(ckpt, 0700);
	/* the user reaches its own folder through ours, without listing it */
	if (r == 0 && plan->as_user) {
		chmod(a->cfg.work_dir, 0711);
		chmod(base, 0711);
		if (chown(ckpt, (uid_t)plan->user.uid, (gid_t)plan->user.gid) < 0)
			r = -errno;
	}
	if (r < 0)
		log_warn("job %lld: cannot set up checkpoint folder %s: %s", (long long)g->job,
			 ckpt, strerror(-r));
	return ckpt;
}

/* Holds n of the agent's CPUs for g: free ones on the NUMA nodes of its
 * GPUs first (near: a mask of nodes; 0: none known), then free ones (the
 * server counts what is reserved, so there are enough unless a node was
 * told less than it has), shared ones if not. */
static void hold_cpus(struct taskgroup *g, int n, uint64_t near)
{
	struct agent *a = g->a;
	n = MIN(n, a->ncpus);
	g->cpus = xcalloc((size_t)n + 1, sizeof(int));
	for (int pass = near ? 0 : 1; pass < 3 && g->ncpus < n; pass++)
		for (int i = 0; i < a->ncpus && g->ncpus < n; i++) {
			bool mine = false;
			for (int k = 0; k < g->ncpus; k++)
				mine |= g->cpus[k] == i;
			bool far = a->cpu_numa[i] < 0 || !(near >> a->cpu_numa[i] & 1);
			if (mine || (pass < 2 && a->cpu_holder[i]) || (pass == 0 && far))
				continue;
			g->cpus[g->ncpus++] = i;
			if (!a->cpu_holder[i])
				a->cpu_holder[i] = g;
		}
}

static void release_cpus(struct taskgroup *g)
{
	for (int k = 0; k < g->ncpus; k++)
		if (g->a->cpu_holder[g->cpus[k]] == g)
			g->a->cpu_holder[g->cpus[k]] = NULL;
	g->ncpus = 0;
}

/* mine[d]: device d of this node is one of the attempt's (any task's). */
static void attempt_devices(const struct work_spec *spec, bool mine[MODEL_MAX_ACCELS])
{
	memset(mine, 0, sizeof(bool) * MODEL_MAX_ACCELS);
	for (int t = 0; t < spec->tasks_per_node; t++) {
		int nd;
		const int *d = work_spec_devices(spec, t, &nd);
		for (int k = 0; k < nd; k++)
			if (d[k] >= 0 && d[k] < MODEL_MAX_ACCELS)
				mine[d[k]] = true;
	}
}

/* What the attempt may use here: its memory, its CPUs, a number of
 * processes, and no NVIDIA device but its own. */
static void cgroup_limits(struct taskgroup *g, const struct work_spec *spec, struct cg_limits *l)
{
	struct agent *a = g->a;
	memset(l, 0, sizeof(*l));
	if (spec->system)
		return; /* the server's own work sees the whole node */
	l->mem_mib = spec->mem_mib;
	l->pids_max = (int64_t)g->tpn * CG_PIDS_PER_TASK;
	bool mine[MODEL_MAX_ACCELS];
	attempt_devices(spec, mine);
	if (spec->cpus > 0) {
		/* near its GPUs: their NUMA nodes, where the agent knows them */
		uint64_t near = 0;
		for (int i = 0; i < a->inv.ngpu_places; i++) {
			const struct gpu_place *p = &a->inv.gpu_places[i];
			if (p->index >= 0 && p->index < MODEL_MAX_ACCELS && mine[p->index] &&
			    p->numa >= 0 && p->numa < 64)
				near |= 1ull << p->numa;
		}
		hold_cpus(g, spec->cpus, near);
		struct strbuf sb;
		strbuf_init(&sb);
		for (int k = 0; k < g->ncpus; k++)
			strbuf_addf(&sb, "%s%d", k ? "," : "", a->cpu_id[g->cpus[k]]);
		snprintf(l->cpus, sizeof(l->cpus), "%s", sb.buf);
		strbuf_release(&sb);
	}
	/* the GPUs of the node that are not the attempt's */
	for (int d = 0; d < a->inv.naccel && l->ndeny < CG_MAX_DENY; d++) {
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/nvidia%d", a->inv.accel[d].index);
		struct stat st;
		if (mine[d] || stat(dev, &st) < 0 || !S_ISCHR(st.st_mode))
			continue;
		snprintf(l->deny[l->ndeny++], sizeof(l->deny[0]), "c %u:%u rwm", major(st.st_rdev),
			 minor(st.st_rdev));
	}
}

/* The attempt's GPUs here checked before its tasks start (agent.h's
 * device_check): this agent's own binary, `validate --device-check`, with
 * the agent's environment (where the node's libraries are) and
 * CUDA_VISIBLE_DEVICES the attempt's devices on this node. */
static void device_check_plan(struct taskgroup *g, const struct work_spec *spec,
			      struct shim_plan *plan)
{
	enum device_check_when when = g->a->cfg.device_check;
	if (spec->system || when == DEVICE_CHECK_NEVER ||
	    (when == DEVICE_CHECK_RESTARTS && g->attempt <= 1))
		return;
	bool mine[MODEL_MAX_ACCELS];
	attempt_devices(spec, mine);
	struct strbuf cvd;
	strbuf_init(&cvd);
	for (int d = 0; d < g->a->inv.naccel; d++)
		if (mine[d])
			strbuf_addf(&cvd, "%s%d", cvd.len ? "," : "", d);
	char self[MODEL_MAX_PATH] = "";
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (!cvd.len || len <= 0) {
		strbuf_release(&cvd);
		return;
	}
	self[len] = '\0';
	plan->check_argc = 3;
	plan->check_argv = xcalloc(4, sizeof(char *));
	plan->check_argv[0] = xstrdup(self);
	plan->check_argv[1] = xstrdup("validate");
	plan->check_argv[2] = xstrdup("--device-check");
	int n = 0;
	while (environ[n])
		n++;
	plan->check_env = xcalloc((size_t)n + 3, sizeof(char *));
	for (int i = 0; i < n; i++)
		if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
		    strncmp(environ[i], "CUDA_DEVICE_ORDER=", 18) != 0)
			plan->check_env[plan->check_nenv++] = xstrdup(environ[i]);
	plan->check_env[plan->check_nenv++] = xstrdup("CUDA_DEVICE_ORDER=PCI_BUS_ID");
	plan->check_env[plan->check_nenv++] = xasprintf("CUDA_VISIBLE_DEVICES=%s", cvd.buf);
	strbuf_release(&cvd);
}

/* An image job's container: podman, its store and configuration, the
 * job's mounts and its checkpoint folder. GPUs come through CDI, so a job
 * with GPUs needs the node's CDI spec. */
static int container_plan(struct taskgroup *g, const struct work_spec *spec, const char *ckpt,
			  const char *metrics, const char *nccl, struct shim_plan *plan, char *why,
			  size_t n)
{
	struct agent *a = g->a;
	if (geteuid() != 0) {
		snprintf(why, n, "image %s: the agent on %s is not root, and runs no container",
			 spec->image, a->inv.name);
		return -EPERM;
	}
	if (access(a->podman, X_OK) < 0) {
		snprintf(why, n, "image %s: no podman on %s (%.100s)", spec->image, a->inv.name,
			 a->podman);
		return -ENOENT;
	}
	bool gpus = false;
	for (int t = 0; t < spec->tasks_per_node; t++) {
		int nd;
		work_spec_devices(spec, t, &nd);
		gpus |= nd > 0;
	}
	const char *cdi = a->cfg.cdi_dir ? a->cfg.cdi_dir : "/etc/cdi";
	if (gpus && !model_cdi_has_gpus(cdi)) {
		snprintf(why, n,
			 "image %s: the job has GPUs, but %s has no CDI spec of them in %s "
			 "(nvidia-ctk cdi generate writes one)",
			 spec->image, a->inv.name, cdi);
		return -ENODEV;
	}
	struct shim_container *c = plan->ctr = xcalloc(1, sizeof(*plan->ctr));
	plan->limits.nest = true; /* podman's cgroups go inside the attempt's */
	snprintf(c->podman, sizeof(c->podman), "%s", a->podman);
	snprintf(c->conf, sizeof(c->conf), "%s",
		 a->cfg.containers_conf ? a->cfg.containers_conf : "");
	snprintf(c->root, sizeof(c->root), "%s", a->cfg.podman_root ? a->cfg.podman_root : "");
	snprintf(c->ref, sizeof(c->ref), "%s", spec->image);
	c->mounts = xcalloc((size_t)spec->nmounts + 6, sizeof(char *));
	for (int i = 0; i < spec->nmounts; i++)
		c->mounts[c->nmounts++] = xstrdup(spec->mounts[i]);
	c->mounts[c->nmounts++] = xasprintf("%s:%s", ckpt, ckpt);
	/* the run folder may be where a container has its own (/dev/shm) */
	c->mounts[c->nmounts++] = xasprintf("%s:%s", metrics, CTR_METRICS);
	if (nccl)
		c->mounts[c->nmounts++] = xasprintf("%s:%s", nccl, CTR_NCCL);
	if (spec->system) {
		/* a validation run in the image: this agent's binary, read-only,
		 * and its folder, where the run works */
		char self[MODEL_MAX_PATH];
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		char *slash = len > 0 ? memrchr(self, '/', (size_t)len) : NULL;
		if (slash) {
			*slash = '\0';
			c->mounts[c->nmounts++] = xasprintf("%s:%s:ro", self, self);
		}
		c->mounts[c->nmounts++] = xasprintf("%s:%s", a->cfg.work_dir, a->cfg.work_dir);
	}
	return 0;
}

/* Task i's devices by their CDI names. */
static void cdi_devices(struct taskgroup *g, const struct work_spec *spec, int i,
			struct shim_task *t)
{
	int nd;
	const int *d = work_spec_devices(spec, i, &nd);
	t->cdi = xcalloc((size_t)nd + 1, sizeof(char *));
	for (int k = 0; k < nd; k++)
		if (d[k] < g->a->inv.naccel)
			t->cdi[t->ncdi++] =
				xasprintf("nvidia.com/gpu=%s", g->a->inv.accel[d[k]].uuid);
}

/* The plan of every task of the group; or the code (126: no such user,
 * 127: the container cannot run) and why when they cannot run here. */
static int build_plan(struct taskgroup *g, const struct work_spec *spec, struct shim_plan *plan,
		      char *why, size_t wn)
{
	struct agent *a = g->a;
	struct passwd *pw;
	plan->job = g->job;
	plan->attempt = g->attempt;
	plan->grace_ms = g->grace_ms;
	plan->limit_ms = spec->time_limit_s * 1000;
	g->limit_ms = plan->limit_ms;
	plan->pty = spec->pty && spec->tasks_per_node == 1 && !spec->image;
	/* where an attempt after the first begins in its files (a terminal's
	 * output has none: it goes to the terminal) */
	plan->marks = g->attempt > 1 && !spec->no_marks && !plan->pty;
	if (spec->signal && spec->time_limit_s) {
		plan->signal_no = spec->signal;
		plan->signal_ms = MAX(0, (spec->time_limit_s - spec->signal_before_s) * 1000);
	}
	/* the first lease: as far as the last answer of the server reaches */
	plan->lease_ms = a->lease.lease_ms;
	plan->fence_grace_ms = a->lease.fence_grace_ms;
	plan->lease_until_ms = a->touch_ms + a->lease.lease_ms;
	if (resolve_user(a, spec, plan, &pw, why, wn) < 0) {
		log_info("job %lld.%d: %s", (long long)g->job, g->attempt, why);
		return 126;
	}
	_cleanup_free_ char *ckpt = checkpoint_dir(g, plan);
	_cleanup_free_ char *metrics =
		agent__train_setup(g, plan->as_user, plan->user.uid, plan->user.gid);
	_cleanup_free_ char *nccl =
		agent__nccl_setup(g, spec, plan->as_user, plan->user.uid, plan->user.gid);
	/* an agent that is root contains each attempt in a cgroup of its own */
	plan->cgroup = geteuid() == 0;
	plan->cg_slot = plan->cgroup ? take_slot(g) : -1;
	snprintf(plan->node, sizeof(plan->node), "%s", a->inv.name);
	if (plan->cgroup)
		cgroup_limits(g, spec, &plan->limits);
	/* the server's own work runs in the agent's folder, with this agent's binary */
	const char *cwd = spec->system ? a->cfg.work_dir : spec->cwd;
	char self[MODEL_MAX_PATH] = "";
	if (spec->system && strcmp(spec->argv[0], "tenk") == 0) {
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		self[len > 0 ? len : 0] = '\0';
	}
	if (spec->image && container_plan(g, spec, ckpt, metrics, nccl, plan, why, wn) < 0) {
		log_info("job %lld.%d: %s", (long long)g->job, g->attempt, why);
		return 127;
	}
	/* once for the attempt: gloo's and NCCL's interface where the host's
	 * name would give peers a loopback address */
	g->loop_ifname[0] = 0;
	if (g->nnodes > 1 && hostname_is_loopback())
		iface_toward(spec->master_addr, g->loop_ifname, sizeof(g->loop_ifname));
	plan->ntasks = g->ntasks;
	plan->tasks = xcalloc((size_t)g->ntasks, sizeof(*plan->tasks));
	for (int i = 0; i < g->ntasks; i++) {
		struct shim_task *t = &plan->tasks[i];
		t->rank = g->tasks[i].rank;
		t->argc = spec->argc;
		t->argv = xcalloc((size_t)spec->argc + 1, sizeof(char *));
		for (int k = 0; k < spec->argc; k++)
			t->argv[k] = xstrdup(k == 0 && self[0] ? self : spec->argv[k]);
		build_env(g, spec, i, t->rank, ckpt, spec->image ? CTR_METRICS : metrics,
			  spec->image && nccl ? CTR_NCCL : nccl, pw, t);
		t->cwd = xstrdup(cwd);
		t->output = output_path(g, spec, t->rank, spec->output, cwd);
		if (spec->error && !plan->ctr)
			t->error = output_path(g, spec, t->rank, spec->error, cwd);
		if (plan->ctr)
			cdi_devices(g, spec, i, t);
	}
	device_check_plan(g, spec, plan);
	return 0;
}

/* ---- starting the shim -------------------------------------------------------------------- */

/* A unix socket at DIR/shim.sock, named through /proc/self/fd so that a
 * deep folder does not pass the 108 bytes a socket's name may take. */
static int shim_socket(struct taskgroup *g, bool listen_it, struct tk_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/shim.sock", g->shim.dirfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tk_errorf(err, -errno, "socket: %s", strerror(errno));
	int r = listen_it ? bind(fd, (struct sockaddr *)&sa, sizeof(sa))
			  : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r == 0 && listen_it)
		r = listen(fd, 4);
	if (r < 0) {
		int e = errno;
		close(fd);
		return tk_errorf(err, -e, "%s/shim.sock: %s", g->shim.dir, strerror(e));
	}
	return fd;
}

/* Connects to the shim's socket and follows what it says. */
static int shim_connect(struct taskgroup *g, struct tk_error *err)
{
	int cfd = shim_socket(g, false, err);
	if (cfd < 0)
		return cfd;
	uv_pipe_init(g->a->loop, &g->shim.conn, 0);
	g->shim.conn.data = g;
	int r = uv_pipe_open(&g->shim.conn, cfd);
	if (r < 0) {
		close(cfd);
		uv_close((uv_handle_t *)&g->shim.conn, NULL);
		return tk_errorf(err, r, "cannot watch the shim's socket: %s", uv_strerror(r));
	}
	g->shim.conn_open = true;
	group_hold(g);
	uv_read_start((uv_stream_t *)&g->shim.conn, alloc_cb, read_cb);
	return 0;
}

/* What the tasks learn only as they start: what they resume from ("" when
 * nothing), and the image every node agreed on. */
static void plan_finish(struct taskgroup *g, struct shim_plan *plan)
{
	for (int i = 0; g->ckpt.store && i < plan->ntasks; i++) {
		struct shim_task *t = &plan->tasks[i];
		t->env = xrealloc(t->env, sizeof(char *) * (size_t)(t->nenv + 3));
		t->env[t->nenv++] = xasprintf("TENK_RESTORE_TAG=%s", g->ckpt.restored_tag);
		t->env[t->nenv++] = g->ckpt.restored_tag[0]
					    ? xasprintf("TENK_RESTORE_STEP=%lld",
							(long long)g->ckpt.restore_step)
					    : xstrdup("TENK_RESTORE_STEP=");
		t->env[t->nenv] = NULL;
	}
	if (!plan->ctr)
		return;
	snprintf(plan->ctr->image, sizeof(plan->ctr->image), "%s", g->img.digest + 7);
	for (int i = 0; i < plan->ntasks; i++) {
		struct shim_task *t = &plan->tasks[i];
		t->env = xrealloc(t->env, sizeof(char *) * (size_t)(t->nenv + 3));
		t->env[t->nenv++] = xasprintf("TENK_IMAGE=%s", g->img.ref);
		t->env[t->nenv++] = xasprintf("TENK_IMAGE_DIGEST=%s", g->img.digest);
		t->env[t->nenv] = NULL;
	}
}

/* Writes the plan, starts the shim with its socket, connects to it. */
static int spawn_shim(struct taskgroup *g, const struct shim_plan *plan, struct tk_error *err)
{
	struct agent *a = g->a;
	/* a folder of its own, made now; one there already is what a crashed
	 * agent left of this attempt, and goes first */
	int r = mkdir(g->shim.dir, 0700) == 0 ? 0 : -errno;
	if (r == -ENOENT)
		r = tk_mkdir_p(g->shim.dir, 0700);
	if (r == -EEXIST) {
		remove_dir(g->shim.dir);
		r = tk_mkdir_p(g->shim.dir, 0700);
	}
	if (r < 0)
		return tk_errorf(err, r, "cannot create %s: %s", g->shim.dir, strerror(-r));
	json_t *j = shim_plan_pack(plan);
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	_cleanup_free_ char *path = xasprintf("%s/plan.json", g->shim.dir);
	r = tk_replace_file(path, text, strlen(text), 0600);
	free(text);
	if (r < 0)
		return tk_errorf(err, r, "cannot write %s: %s", path, strerror(-r));
	g->shim.dirfd = open(g->shim.dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (g->shim.dirfd < 0)
		return tk_errorf(err, -errno, "cannot open %s: %s", g->shim.dir, strerror(errno));
	int lfd = shim_socket(g, true, err);
	if (lfd < 0)
		return lfd;
	/* tenk-shim beside the agent's own binary */
	char self[MODEL_MAX_PATH];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash = len > 0 ? memrchr(self, '/', (size_t)len) : NULL;
	if (!slash || (size_t)(slash - self) + sizeof("/tenk-shim") > sizeof(self)) {
		close(lfd);
		return tk_errorf(err, -ENOENT, "cannot find the agent's own binary");
	}
	memcpy(slash, "/tenk-shim", sizeof("/tenk-shim"));
	char *argv[] = {"tenk-shim", g->shim.dir, NULL};
	g->shim.proc.data = g;
	r = agent__launcher_spawn(a, &g->shim.proc, self, g->shim.dir, lfd, shim_exit_cb);
	if (r < 0) /* (no launcher: as before it) */
		r = agent__proc_spawn(a->loop, &g->shim.proc, self, argv, environ, lfd,
				      shim_exit_cb);
	close(lfd);
	if (r < 0)
		return tk_errorf(err, r, "cannot start %s: %s", self, strerror(-r));
	g->shim.running = true;
	group_hold(g);
	return shim_connect(g, err);
}

/* The machine's start: the plan finished and the shim started with it. */
static int shim_start(struct taskgroup *g, char *why, size_t n)
{
	struct tk_error err;
	assert(g->plan);
	plan_finish(g, g->plan);
	int r = spawn_shim(g, g->plan, &err);
	shim_plan_release(g->plan);
	free(g->plan);
	g->plan = NULL;
	if (r < 0)
		snprintf(why, n, "%s", err.text);
	return r;
}

/* Its device check failed: the node reports it (a fault the server drains
 * it for, until its agent restarts), and its jobs go elsewhere. */
static void node_fault(struct taskgroup *g, const char *why)
{
	char fault[WIRE_FAULT_MAX];
	snprintf(fault, sizeof(fault), "job %lld attempt %d: %s", (long long)g->job, g->attempt,
		 why);
	agent__health_fault(g->a, fault);
}

static void emit(struct taskgroup *g, struct task_event *ev)
{
	if (ev->type == TASK_EVENT_EXITED)
		agent__usage_of(g, &ev->energy_mj, &ev->gpu_busy_ms);
	agent_queue_event(g->a, ev);
}

const struct group_ops agent__launch_ops = {
	.emit = emit,
	.image_resolve = agent__image_resolve,
	.shim_start = shim_start,
	.shim_send = shim_send,
	.shim_let_go = shim_let_go,
	.ckpt_draining = agent__ckpt_draining,
	.tasks_ended = release_cpus,
	.forget = forget,
	.node_fault = node_fault,
};

/* A group of tpn tasks of node rank node_rank, registered in a->groups. */
static struct taskgroup *group_new(struct agent *a, int64_t job, int attempt, int node_rank,
				   int tpn, int64_t grace_ms)
{
	struct taskgroup *g = xcalloc(1, sizeof(*g));
	g->a = a;
	group_init(g, &agent__launch_ops, job, attempt, node_rank, tpn, grace_ms);
	g->shim.dirfd = -1;
	g->train.fd = -1;
	g->ckpt.done_step = -1;
	g->cg_slot = -1;
	g->shim.dir = xasprintf("%s/%s/%lld.%d", a->cfg.run_dir, SHIM_DIR, (long long)job, attempt);
	strbuf_init(&g->shim.in);
	tk_map_put(&a->groups, g->key, g);
	return g;
}

struct taskgroup *agent__group_start(struct agent *a, const struct work_item *it,
				     const struct work_spec *spec)
{
	int64_t job = it->job;
	int attempt = it->attempt;
	struct taskgroup *g = group_new(a, job, attempt, spec->node_rank, spec->tasks_per_node,
					spec->grace_s * 1000);
	g->nnodes = spec->nnodes;
	g->world_size = spec->world_size;
	snprintf(g->owner, sizeof(g->owner), "%s", spec->owner);
	g->milli = spec->milli;
	snprintf(g->queue, sizeof(g->queue), "%s", spec->queue);
	for (int t = 0; t < spec->tasks_per_node; t++) {
		int n;
		const int *d = work_spec_devices(spec, t, &n);
		for (int k = 0; k < n; k++) {
			bool have = false;
			for (int m = 0; m < g->ndevs; m++)
				have |= g->devs[m] == d[k];
			if (!have && g->ndevs < MODEL_MAX_ACCELS)
				g->devs[g->ndevs++] = d[k];
		}
	}
	agent__usage_start(g);
	/* its devices at their full power limit before anything runs there */
	agent__idle_power_wake(a, g->devs, g->ndevs);
	log_debug("job %lld.%d: starting %d task(s), node rank %d", (long long)job, attempt,
		  g->ntasks, g->node_rank);
	struct shim_plan plan = {0};
	char why[MODEL_REASON_MAX];
	int code = build_plan(g, spec, &plan, why, sizeof(why));
	if (code) {
		shim_plan_release(&plan);
		group_unlaunchable(g, code, why);
		return g;
	}
	g->plan = xmalloc(sizeof(*g->plan));
	*g->plan = plan;
	if (it->ckpt_store[0]) {
		/* tags this attempt marks from now on are its own to upload; the
		 * restored one and older ones are not */
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		g->ckpt.since_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		g->ckpt.chown = plan.as_user;
		g->ckpt.marker = spec->ckpt_marker;
		g->ckpt.uid = plan.user.uid;
		g->ckpt.gid = plan.user.gid;
		if (it->restore_tag[0] && !it->restore_go) {
			g->ckpt.hold_restore = true; /* agent__ckpt_item starts the restore */
			g->ckpt.done_step = it->restore_step;
		}
	}
	/* an image job's shim waits for the image, on every node */
	if (plan.ctr)
		snprintf(g->img.ref, sizeof(g->img.ref), "%s", spec->image);
	agent__ckpt_item(g, it);
	group_prepared(g);
	return g;
}

/* Holds for g the CPUs of a cpuset list ("0-3,8") that the agent has. */
static void hold_listed_cpus(struct taskgroup *g, const char *list)
{
	struct agent *a = g->a;
	g->cpus = xcalloc((size_t)a->ncpus + 1, sizeof(int));
	for (const char *p = list; *p;) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p)
			break;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		for (int i = 0; i < a->ncpus && g->ncpus < a->ncpus; i++) {
			if (a->cpu_id[i] < lo || a->cpu_id[i] > hi)
				continue;
			g->cpus[g->ncpus++] = i;
			if (!a->cpu_holder[i])
				a->cpu_holder[i] = g;
		}
		p = *end == ',' ? end + 1 : end;
	}
}

/* The shim in WORK/shims/NAME was started by an agent before this one:
 * its group again, from its plan, following it. A shim that is gone is
 * read from the status it left, and what it did not see end is killed and
 * reported lost. Returns the group, or NULL for a folder of no use. */
static struct taskgroup *group_adopt(struct agent *a, const char *base, const char *name)
{
	_cleanup_free_ char *dir = xasprintf("%s/%s", base, name);
	_cleanup_free_ char *path = xasprintf("%s/plan.json", dir);
	struct shim_plan plan = {0};
	struct tk_error err;
	char *text = NULL;
	json_t *j = NULL;
	int r = tk_read_file(path, 64 * 1024 * 1024, &text, NULL);
	if (r < 0) {
		tk_errorf(&err, r, "%s", strerror(-r));
	} else if (!(j = json_loads(text, 0, NULL))) {
		r = tk_errorf(&err, -EBADMSG, "not JSON");
	} else {
		r = shim_plan_unpack(j, &plan, &err);
	}
	free(text);
	json_decref(j);
	char key[48];
	snprintf(key, sizeof(key), "%lld.%d", (long long)plan.job, plan.attempt);
	if (r == 0 &&
	    (strcmp(key, name) != 0 || plan.ntasks < 1 || plan.tasks[0].rank % plan.ntasks != 0))
		r = tk_errorf(&err, -EINVAL, "it is not the plan of %s", name);
	if (r < 0) {
		log_warn("%s: %s; removed", path, err.text);
		remove_dir(dir);
		shim_plan_release(&plan);
		return NULL;
	}
	struct taskgroup *g = group_new(a, plan.job, plan.attempt, plan.tasks[0].rank / plan.ntasks,
					plan.ntasks, plan.grace_ms);
	g->limit_ms = plan.limit_ms;
	g->cg_slot = plan.cgroup ? plan.cg_slot : -1;
	if (plan.cgroup)
		hold_listed_cpus(g, plan.limits.cpus);
	g->shim.dirfd = open(g->shim.dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	/* what it last wrote down: every task it saw start or end */
	_cleanup_free_ char *spath = xasprintf("%s/status.json", dir);
	struct shim_status st;
	bool have = false;
	if (tk_read_file(spath, 64 * 1024 * 1024, &text, NULL) == 0) {
		j = json_loads(text, 0, NULL);
		have = j && shim_status_unpack(j, &st, &err) == 0;
		json_decref(j);
		free(text);
	}
	if (have && st.protocol != SHIM_PROTOCOL)
		log_info("job %lld.%d: its shim speaks shim protocol %d, this agent %d",
			 (long long)g->job, g->attempt, st.protocol, SHIM_PROTOCOL);
	group_adopted(g, have ? &st : NULL);
	if (have)
		shim_status_release(&st);
	if (group_running(g) && (g->shim.dirfd < 0 || shim_connect(g, &err) < 0)) {
		/* no shim holds them: nothing supervises or fences them */
		log_warn("job %lld.%d: its shim is gone; killing its tasks", (long long)g->job,
			 g->attempt);
		empty_attempt(g, &plan);
		group_shim_gone(g, "its shim ended while no agent was there");
	}
	log_info("job %lld.%d: found its shim%s, %d task(s) running", (long long)g->job, g->attempt,
		 g->shim.conn_open ? "" : " gone", g->nrunning);
	shim_plan_release(&plan);
	return g;
}

int agent__shims_adopt(struct agent *a)
{
	_cleanup_free_ char *base = xasprintf("%s/%s", a->cfg.run_dir, SHIM_DIR);
	tk_mkdir_p(base, 0700);
	DIR *d = opendir(base);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !tk_map_get(&a->groups, de->d_name) &&
		    group_adopt(a, base, de->d_name))
			n++;
	closedir(d);
	return n;
}

#define CKPT_SCAN_MAX 4096 /* entries looked at in one checkpoint folder */

int64_t agent__group_newest_checkpoint(const struct taskgroup *g)
{
	_cleanup_free_ char *dir =
		xasprintf("%s/checkpoints/%lld", g->a->cfg.work_dir, (long long)g->job);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int64_t newest = 0;
	int seen = 0;
	struct dirent *de;
	while ((de = readdir(d)) && seen++ < CKPT_SCAN_MAX) {
		if (de->d_name[0] == '.')
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		int64_t ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
		newest = MAX(newest, ms);
	}
	closedir(d);
	return newest;
}

int64_t agent__group_grace_ms(const struct taskgroup *g)
{
	return g->grace_ms;
}

int agent_running_groups(struct agent *a)
{
	int n = 0;
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		if (group_running(v))
			n++;
	return n;
}
