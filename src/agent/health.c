/*
 * Faults the agent sees on its node, told to the server at once (a
 * heartbeat goes out the second one appears) rather than left for the node
 * timeout:
 * - a work folder short of space (checkpoints, shims and outputs need it);
 * - accelerators whose uncorrected ECC error count grew since the agent
 *   started, and Xid errors that implicate the hardware (NVML, loaded with
 *   dlopen; none on a node without NVIDIA's driver or with fake devices).
 *   Xids that an application causes (13, 31, 43, 45, ...) are counted, not
 *   held against the node;
 * - accelerators held to the cluster's thresholds ("gpu_health", sent at
 *   registration): too hot, clocks slowed for heat or by the power brake
 *   while busy, drawing far under the power limit while busy, a PCIe link
 *   narrower (or, busy, slower) than it can be, each once it has lasted
 *   the threshold's time; uncorrectable remapped memory rows grown, a
 *   remap pending or failed, at once;
 * - the operator's health check (`--health-check PROGRAM`, Slurm's
 *   HealthCheckProgram): run every interval, a fault while it exits
 *   non-zero or does not finish in time.
 * The server drains a node that reports one and requeues its jobs at once.
 * An Xid is an event, not a state: it is told until a heartbeat carrying it
 * has been answered, so that an operator who resumes the node is not
 * overruled by the same Xid again.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#define HEALTH_TICK_MS 1000
#define HEALTH_EVENTS_PER_TICK 64
#define HEALTH_CHECK_MAX_MS 60000 /* a health check's time at most */

struct health {
	struct agent *a;
	int ndev; /* NVML's */
	uint64_t ecc_base[MODEL_MAX_ACCELS];
	/* every Xid seen since the agent started, and the last; of those that
	 * implicate the hardware, the newest not yet told (0: none), how many
	 * there were, and how many of them the beat in flight carries */
	uint64_t xids[MODEL_MAX_ACCELS];
	unsigned xid_last[MODEL_MAX_ACCELS];
	unsigned xid_fault[MODEL_MAX_ACCELS];
	uint64_t xid_pending[MODEL_MAX_ACCELS], xid_sent[MODEL_MAX_ACCELS];

	/* the thresholds; each check of each accelerator: since when its
	 * condition holds (0: it does not), whether that is a fault yet and
	 * the fault's text, fixed when it became one (so that a beat is sent
	 * for a new fault, not for every change of a figure) */
	struct gpu_limits lim;
	struct gpu_sample last[MODEL_MAX_ACCELS];
	unsigned rows_base[MODEL_MAX_ACCELS];
	int64_t since[MODEL_MAX_ACCELS][GPU_CHECK_MAX];
	unsigned failing[MODEL_MAX_ACCELS];
	char why[MODEL_MAX_ACCELS][GPU_CHECK_MAX][160];

	uv_timer_t timer;
	bool timer_open;
	uint64_t told; /* a digest of the faults the last beat carried */
	/* the operator's health check */
	int64_t check_next_ms;
	bool check_running;
	char check_fault[WIRE_FAULT_MAX]; /* "": it passed (or has not run yet) */
	/* what the agent itself found wrong with the node (an attempt's
	 * processes it could not kill): told until the agent restarts */
	char own_fault[WIRE_FAULT_MAX];
};

/* Xids that say the accelerator itself needs attention (NVIDIA's Xid
 * catalogue: ECC, NVLink, the bus, the GSP), with what each means. */
static const struct {
	unsigned xid;
	const char *what;
} hardware_xids[] = {
	{48, "double-bit ECC error"},	  {62, "internal micro-controller halt"},
	{64, "ECC row remapping failed"}, {74, "NVLink error"},
	{79, "fallen off the bus"},	  {92, "high single-bit ECC error rate"},
	{94, "contained ECC error"},	  {95, "uncontained ECC error"},
	{119, "GSP RPC timeout"},	  {120, "GSP error"},
	{140, "unrecovered ECC error"},
};

static const char *xid_hardware(unsigned xid)
{
	for (size_t i = 0; i < ARRAY_SIZE(hardware_xids); i++)
		if (hardware_xids[i].xid == xid)
			return hardware_xids[i].what;
	return NULL;
}

void agent__health_init(struct agent *a)
{
	struct health *h = xcalloc(1, sizeof(*h));
	a->health = h;
	h->a = a;
	a->nvml = agent__nvml_open(&a->cfg, &a->inv);
	h->ndev = agent__nvml_count(a->nvml);
	sched_config_gpu_default(&h->lim);
	for (int i = 0; i < h->ndev; i++) {
		agent__nvml_ecc(a->nvml, i, &h->ecc_base[i]);
		agent__nvml_read(a->nvml, i, &h->last[i]);
		h->rows_base[i] = h->last[i].rows_unc;
	}
}

void agent__health_limits(struct agent *a, const struct gpu_limits *g)
{
	a->health->lim = *g;
}

unsigned agent__health_gpu(struct agent *a, int i, struct gpu_sample *last)
{
	struct health *h = a->health;
	if (i < 0 || i >= h->ndev) {
		memset(last, 0, sizeof(*last));
		return 0;
	}
	*last = h->last[i];
	return h->failing[i];
}

int agent__health_for_heartbeat(struct agent *a, struct wire_gpu *out, int max)
{
	struct health *h = a->health;
	int n = 0;
	for (int i = 0; i < h->ndev && n < max; i++) {
		const struct gpu_sample *s = &h->last[i];
		out[n++] = (struct wire_gpu){
			.index = a->inv.accel[i].index,
			.util_pct = (s->have & GPU_UTIL) ? (int)s->util_pct : -1,
			.temp_c = (s->have & GPU_TEMP) ? (int)s->temp_c : -1,
			.power_w = (s->have & GPU_POWER) ? (int)(s->power_mw / 1000) : -1,
			.power_limit_w =
				(s->have & GPU_POWER_LIMIT) ? (int)(s->power_limit_mw / 1000) : -1,
			.slowed = (s->have & GPU_THROTTLE) && (s->throttle & GPU_SLOWDOWN_MASK),
			.failing = h->failing[i],
		};
	}
	return n;
}

/* What slows the clocks, in words. */
static void slowdown_text(uint64_t reasons, char *out, size_t n)
{
	static const struct {
		uint64_t bit;
		const char *what;
	} names[] = {
		{GPU_SLOWDOWN_HW_THERMAL, "hardware thermal slowdown"},
		{GPU_SLOWDOWN_SW_THERMAL, "software thermal slowdown"},
		{GPU_SLOWDOWN_POWER_BRAKE, "power brake"},
		{GPU_SLOWDOWN_HW, "hardware slowdown"},
	};
	size_t len = 0;
	out[0] = 0;
	for (size_t k = 0; k < ARRAY_SIZE(names); k++)
		if ((reasons & names[k].bit) && len < n)
			len += (size_t)snprintf(out + len, n - len, "%s%s", len ? ", " : "",
						names[k].what);
}

/* Holds accelerator i to the thresholds with what it reads now. */
static void check_gpu(struct health *h, int i, int64_t now)
{
	struct agent *a = h->a;
	const struct gpu_limits *l = &h->lim;
	struct gpu_sample *s = &h->last[i];
	agent__nvml_read(a->nvml, i, s);
	bool busy = (s->have & GPU_UTIL) && s->util_pct >= l->busy_pct;
	char hold[32], cond[GPU_CHECK_MAX][160] = {{0}};
	tk_format_duration(l->hold_ms / 1000, hold, sizeof(hold));
	if (l->temp_c && (s->have & GPU_TEMP) && s->temp_c > l->temp_c)
		snprintf(cond[GPU_CHECK_TEMPERATURE], 160, "%u C, over %lld C, for %s", s->temp_c,
			 (long long)l->temp_c, hold);
	if (l->throttle && busy && (s->have & GPU_THROTTLE) && (s->throttle & GPU_SLOWDOWN_MASK)) {
		char what[96];
		slowdown_text(s->throttle, what, sizeof(what));
		snprintf(cond[GPU_CHECK_THROTTLE], 160, "clocks slowed (%s) while busy for %s",
			 what, hold);
	}
	if (l->power_pct && busy && (s->have & GPU_POWER) && (s->have & GPU_POWER_LIMIT) &&
	    (uint64_t)s->power_mw * 100 < (uint64_t)s->power_limit_mw * (uint64_t)l->power_pct)
		snprintf(cond[GPU_CHECK_POWER], 160,
			 "drawing %u W of its %u W limit (under %lld%%) at %u%% utilisation for %s",
			 s->power_mw / 1000, s->power_limit_mw / 1000, (long long)l->power_pct,
			 s->util_pct, hold);
	if (l->pcie && (s->have & GPU_PCIE) &&
	    (s->pcie_width < s->pcie_width_max || (busy && s->pcie_gen < s->pcie_gen_max)))
		snprintf(cond[GPU_CHECK_PCIE], 160,
			 "PCIe link x%u gen %u where it can be x%u gen %u, for %s", s->pcie_width,
			 s->pcie_gen, s->pcie_width_max, s->pcie_gen_max, hold);
	if (l->rows && (s->have & GPU_ROWS)) {
		unsigned grown = s->rows_unc > h->rows_base[i] ? s->rows_unc - h->rows_base[i] : 0;
		if (s->rows_failed)
			snprintf(cond[GPU_CHECK_ROWS], 160, "memory row remapping failed");
		else if (s->rows_pending)
			snprintf(cond[GPU_CHECK_ROWS], 160,
				 "a memory row remap is pending (the GPU needs a reset)");
		else if (grown >= (unsigned)l->rows)
			snprintf(cond[GPU_CHECK_ROWS], 160,
				 "%u uncorrectable remapped memory row(s) since the agent started",
				 grown);
	}
	for (int c = 0; c < GPU_CHECK_MAX; c++) {
		bool held = h->failing[i] & (1u << c);
		if (!cond[c][0]) {
			if (held)
				log_info("accelerator %d (%s): the %s check passes again",
					 a->inv.accel[i].index, a->inv.accel[i].uuid,
					 gpu_check_name((enum gpu_check)c));
			h->since[i][c] = 0;
			h->failing[i] &= ~(1u << c);
			continue;
		}
		if (!h->since[i][c])
			h->since[i][c] = now;
		/* remapped rows are a fault at once, as ECC errors are */
		int64_t need = c == GPU_CHECK_ROWS ? 0 : l->hold_ms;
		if (held || now - h->since[i][c] < need)
			continue;
		h->failing[i] |= 1u << c;
		memcpy(h->why[i][c], cond[c], sizeof(h->why[i][c]));
	}
}

/* Takes what Xid events have come, without waiting. */
static void poll_xids(struct health *h)
{
	int i;
	unsigned xid;
	for (int n = 0; n < HEALTH_EVENTS_PER_TICK && agent__nvml_xid(h->a->nvml, &i, &xid); n++) {
		h->xids[i]++;
		h->xid_last[i] = xid;
		const char *what = xid_hardware(xid);
		log_warn("accelerator %d (%s): Xid %u%s%s", h->a->inv.accel[i].index,
			 h->a->inv.accel[i].uuid, xid, what ? ": " : "",
			 what ? what : " (counted; not a fault of the node)");
		if (what) {
			h->xid_fault[i] = xid;
			h->xid_pending[i]++;
		}
	}
}

/* ---- the operator's health check --------------------------------------------------- */

/* The last line of text that is not blank, at most n bytes of it. */
static void last_line(const char *text, char *out, size_t n)
{
	_cleanup_free_ char *t = xstrdup(text ? text : "");
	tk_strip(t);
	const char *nl = strrchr(t, '\n');
	snprintf(out, n, "%s", nl ? nl + 1 : t);
}

static void check_done(struct cmd *c, int64_t status, const char *out, const char *err)
{
	struct health *h = c->data;
	h->check_running = false;
	const char *prog = h->a->cfg.health_check;
	char was[WIRE_FAULT_MAX];
	snprintf(was, sizeof(was), "%s", h->check_fault);
	if (c->timed_out) {
		snprintf(h->check_fault, sizeof(h->check_fault),
			 "health check %.160s did not finish within %llds", prog,
			 (long long)(MIN(h->a->cfg.health_check_interval_ms, HEALTH_CHECK_MAX_MS) /
				     1000));
	} else if (status != 0) {
		char line[81];
		last_line(err && *err ? err : out, line, sizeof(line));
		snprintf(h->check_fault, sizeof(h->check_fault),
			 "health check %.120s failed (exit %lld)%s%.80s", prog, (long long)status,
			 *line ? ": " : "", line);
	} else {
		h->check_fault[0] = 0;
	}
	if (was[0] && !h->check_fault[0] && !h->a->stopping)
		log_info("health check %s passes again", prog);
}

static void start_check(struct health *h, int64_t now)
{
	struct agent *a = h->a;
	h->check_next_ms = now + a->cfg.health_check_interval_ms;
	char *argv[] = {(char *)a->cfg.health_check, NULL};
	_cleanup_free_ char *node = xasprintf("TENK_NODE=%s", a->inv.name);
	_cleanup_free_ char *work = xasprintf("TENK_WORK_DIR=%s", a->cfg.work_dir);
	char *env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", node,
		       work, NULL};
	h->check_running = true;
	int64_t limit = MIN(a->cfg.health_check_interval_ms, HEALTH_CHECK_MAX_MS);
	if (agent__cmd_run(a, argv, env, limit, check_done, h) < 0)
		log_warn("cannot start the health check %s", a->cfg.health_check);
}

/* ---- faults ------------------------------------------------------------------------ */

static int collect(struct health *h, char (*out)[WIRE_FAULT_MAX], int max, bool sending)
{
	struct agent *a = h->a;
	int n = 0;
	struct statvfs vfs;
	if (max > n && statvfs(a->cfg.work_dir, &vfs) == 0) {
		/* what the jobs' own folders hold is theirs (disk.c): only the
		 * rest can make the node short */
		int64_t free_mib = (int64_t)((unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20);
		int64_t jobs_mib = a->disk_jobs_bytes >> 20;
		if (free_mib + jobs_mib < a->cfg.min_free_mib) {
			/* short: the jobs' folders measured now, not seconds ago */
			agent__disk_tick(a, true);
			jobs_mib = a->disk_jobs_bytes >> 20;
		}
		if (free_mib + jobs_mib < a->cfg.min_free_mib)
			snprintf(out[n++], WIRE_FAULT_MAX,
				 "disk full: %.120s has %lld MiB free, less than %lld MiB (the "
				 "jobs' folders hold %lld MiB)",
				 a->cfg.work_dir, (long long)free_mib,
				 (long long)a->cfg.min_free_mib, (long long)jobs_mib);
	}
	if (max > n && h->check_fault[0])
		snprintf(out[n++], WIRE_FAULT_MAX, "%s", h->check_fault);
	if (max > n && h->own_fault[0])
		snprintf(out[n++], WIRE_FAULT_MAX, "%s", h->own_fault);
	for (int i = 0; i < h->ndev && n < max; i++) {
		uint64_t c = 0;
		if (agent__nvml_ecc(a->nvml, i, &c) && c > h->ecc_base[i])
			snprintf(out[n++], WIRE_FAULT_MAX,
				 "accelerator %d (%.80s): %llu uncorrected ECC error(s) since the "
				 "agent started",
				 a->inv.accel[i].index, a->inv.accel[i].uuid,
				 (unsigned long long)(c - h->ecc_base[i]));
	}
	for (int i = 0; i < h->ndev; i++)
		for (int c = 0; c < GPU_CHECK_MAX && n < max; c++)
			if (h->failing[i] & (1u << c))
				snprintf(out[n++], WIRE_FAULT_MAX, "accelerator %d (%.80s): %s",
					 a->inv.accel[i].index, a->inv.accel[i].uuid, h->why[i][c]);
	for (int i = 0; i < h->ndev && n < max; i++) {
		if (!h->xid_pending[i])
			continue;
		snprintf(out[n++], WIRE_FAULT_MAX, "accelerator %d (%.80s): Xid %u (%s)",
			 a->inv.accel[i].index, a->inv.accel[i].uuid, h->xid_fault[i],
			 xid_hardware(h->xid_fault[i]));
		if (sending)
			h->xid_sent[i] = h->xid_pending[i];
	}
	return n;
}

static uint64_t digest(char (*f)[WIRE_FAULT_MAX], int n)
{
	uint64_t d = 1469598103934665603ULL; /* FNV-1a */
	for (int i = 0; i < n; i++)
		for (const char *p = f[i]; *p; p++)
			d = (d ^ (unsigned char)*p) * 1099511628211ULL;
	return n ? d : 0;
}

int agent__health_faults(struct agent *a, char (*out)[WIRE_FAULT_MAX], int max)
{
	struct health *h = a->health;
	int n = collect(h, out, max, true);
	h->told = digest(out, n);
	return n;
}

void agent__health_fault(struct agent *a, const char *fault)
{
	struct health *h = a->health;
	snprintf(h->own_fault, sizeof(h->own_fault), "%s", fault);
	agent_beat_now(a);
}

void agent__health_told(struct agent *a)
{
	struct health *h = a->health;
	for (int i = 0; i < h->ndev; i++) {
		if (h->xid_sent[i] && h->xid_sent[i] == h->xid_pending[i])
			h->xid_pending[i] = 0;
		h->xid_sent[i] = 0;
	}
}

static void tick(uv_timer_t *t)
{
	struct health *h = t->data;
	struct agent *a = h->a;
	poll_xids(h);
	int64_t now = tk_mono_ms();
	for (int i = 0; i < h->ndev; i++)
		check_gpu(h, i, now);
	/* what the running jobs write for the agent to read, on the same
	 * second: their training lines, NCCL's log */
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		if (g->nrunning && !g->shim.released) {
			agent__train_poll_group(g);
			agent__nccl_poll_group(g);
		}
	}
	agent__usage_tick(a);
	agent__disk_tick(a, false);
	if (!a->stopping)
		agent__idle_power_tick(a, now);
	if (a->cfg.health_check && !h->check_running && now >= h->check_next_ms && !a->stopping)
		start_check(h, now);
	char f[WIRE_MAX_FAULTS][WIRE_FAULT_MAX];
	int n = collect(h, f, WIRE_MAX_FAULTS, false);
	if (n && digest(f, n) != h->told)
		agent_beat_now(a);
}

void agent__health_start(struct agent *a)
{
	struct health *h = a->health;
	uv_timer_init(a->loop, &h->timer);
	h->timer.data = h;
	h->timer_open = true;
	a->open_handles++;
	h->check_next_ms = tk_mono_ms();
	uv_timer_start(&h->timer, tick, HEALTH_TICK_MS, HEALTH_TICK_MS);
}

static void timer_closed(uv_handle_t *t)
{
	struct health *h = t->data;
	agent_handle_gone(h->a);
}

void agent__health_stop(struct agent *a)
{
	struct health *h = a->health;
	if (!h->timer_open)
		return;
	h->timer_open = false;
	uv_timer_stop(&h->timer);
	uv_close((uv_handle_t *)&h->timer, timer_closed);
}

uint64_t agent__health_xids(struct agent *a, int i, unsigned *last)
{
	struct health *h = a->health;
	*last = i >= 0 && i < h->ndev ? h->xid_last[i] : 0;
	return i >= 0 && i < h->ndev ? h->xids[i] : 0;
}

void agent__health_release(struct agent *a)
{
	struct health *h = a->health;
	if (!h)
		return;
	agent__nvml_close(a->nvml);
	a->nvml = NULL;
	free(h);
	a->health = NULL;
}
