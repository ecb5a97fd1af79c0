/*
 * GET /metrics on the agent (`--metrics-listen`, default 127.0.0.1:9400,
 * plain HTTP like dcgm-exporter and node-exporter): the node's
 * accelerators from NVML, which job holds each (one info metric to join
 * on), the node's CPU, memory, disks and network from /proc, and each
 * attempt's cgroup. `--dcgm-compat` adds dcgm-exporter's names and labels
 * for the dashboards written for it. libmicrohttpd runs on the agent's
 * loop through its epoll descriptor; the text is made when asked for.
 */
#include "internal.h"

#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define METRICS_DEFAULT_LISTEN "127.0.0.1:9400"

struct metrics {
	struct agent *a;
	struct MHD_Daemon *mhd;
	uv_poll_t poll;
	uv_timer_t timer;
	int epoll_fd;
	int open; /* handles not yet closed */
};

/* ---- the text ------------------------------------------------------------------- */

static void gpu_labels(struct agent *a, int i, struct prom_labels *l)
{
	prom_labels_init(l);
	prom_label(l, "node", a->inv.name);
	prom_labelf(l, "gpu", "%d", a->inv.accel[i].index);
	prom_label(l, "uuid", a->inv.accel[i].uuid);
	prom_label(l, "model_name", a->inv.accel[i].model);
}

static void dcgm_labels(struct agent *a, int i, struct prom_labels *l)
{
	prom_labels_init(l);
	prom_labelf(l, "gpu", "%d", a->inv.accel[i].index);
	prom_label(l, "UUID", a->inv.accel[i].uuid);
	prom_labelf(l, "device", "nvidia%d", a->inv.accel[i].index);
	prom_label(l, "modelName", a->inv.accel[i].model);
	prom_label(l, "Hostname", a->inv.name);
}

struct gpu_family {
	const char *name, *type, *help;
	unsigned need;
	double (*value)(const struct gpu_sample *s);
};

static double v_util(const struct gpu_sample *s)
{
	return s->util_pct / 100.0;
}
static double v_mem_used(const struct gpu_sample *s)
{
	return (double)s->mem_used;
}
static double v_mem_total(const struct gpu_sample *s)
{
	return (double)s->mem_total;
}
static double v_power(const struct gpu_sample *s)
{
	return s->power_mw / 1000.0;
}
static double v_energy(const struct gpu_sample *s)
{
	return (double)s->energy_mj / 1000.0;
}
static double v_temp(const struct gpu_sample *s)
{
	return s->temp_c;
}
static double v_clock(const struct gpu_sample *s)
{
	return s->sm_mhz * 1e6;
}
static double v_ecc(const struct gpu_sample *s)
{
	return (double)s->ecc_uncorrected;
}

static double v_power_limit(const struct gpu_sample *s)
{
	return s->power_limit_mw / 1000.0;
}
static double v_throttle(const struct gpu_sample *s)
{
	return (double)s->throttle;
}
static double v_slowed(const struct gpu_sample *s)
{
	return (s->throttle & GPU_SLOWDOWN_MASK) ? 1 : 0;
}
static double v_rows_pending(const struct gpu_sample *s)
{
	return s->rows_pending;
}
static double v_rows_failed(const struct gpu_sample *s)
{
	return s->rows_failed;
}
static double v_pcie_width(const struct gpu_sample *s)
{
	return s->pcie_width;
}
static double v_pcie_width_max(const struct gpu_sample *s)
{
	return s->pcie_width_max;
}
static double v_pcie_gen(const struct gpu_sample *s)
{
	return s->pcie_gen;
}
static double v_pcie_gen_max(const struct gpu_sample *s)
{
	return s->pcie_gen_max;
}

static const struct gpu_family gpu_families[] = {
	{"tenk_gpu_utilization_ratio", "gauge",
	 "Fraction of the last sample period a kernel ran on the accelerator.", GPU_UTIL, v_util},
	{"tenk_gpu_memory_used_bytes", "gauge", "Accelerator memory in use.", GPU_MEM, v_mem_used},
	{"tenk_gpu_memory_total_bytes", "gauge", "Accelerator memory in all.", GPU_MEM,
	 v_mem_total},
	{"tenk_gpu_power_watts", "gauge", "Power drawn now.", GPU_POWER, v_power},
	{"tenk_gpu_energy_joules_total", "counter", "Energy used since the driver loaded.",
	 GPU_ENERGY, v_energy},
	{"tenk_gpu_temperature_celsius", "gauge", "Die temperature.", GPU_TEMP, v_temp},
	{"tenk_gpu_sm_clock_hertz", "gauge", "Streaming multiprocessor clock.", GPU_CLOCK, v_clock},
	{"tenk_gpu_ecc_uncorrected_errors_total", "counter",
	 "Uncorrected ECC errors since the driver loaded (volatile count).", GPU_ECC, v_ecc},
	{"tenk_gpu_power_limit_watts", "gauge", "The power limit the driver enforces.",
	 GPU_POWER_LIMIT, v_power_limit},
	{"tenk_gpu_clock_event_reasons", "gauge",
	 "What holds the clocks down now: NVML's clock event (throttle) reasons, a mask.",
	 GPU_THROTTLE, v_throttle},
	{"tenk_gpu_clocks_slowed", "gauge",
	 "1 while heat or the power brake slows the clocks (NVML's thermal, power-brake or "
	 "hardware slowdown reasons).",
	 GPU_THROTTLE, v_slowed},
	{"tenk_gpu_row_remap_pending", "gauge",
	 "1 while a memory row remap waits for the GPU's reset.", GPU_ROWS, v_rows_pending},
	{"tenk_gpu_row_remap_failed", "gauge", "1 when memory row remapping failed.", GPU_ROWS,
	 v_rows_failed},
	{"tenk_gpu_pcie_link_width", "gauge", "PCIe lanes the link uses now.", GPU_PCIE,
	 v_pcie_width},
	{"tenk_gpu_pcie_link_width_max", "gauge", "PCIe lanes the link can use.", GPU_PCIE,
	 v_pcie_width_max},
	{"tenk_gpu_pcie_link_generation", "gauge", "The PCIe link's generation now.", GPU_PCIE,
	 v_pcie_gen},
	{"tenk_gpu_pcie_link_generation_max", "gauge",
	 "The highest PCIe generation the device and the system allow.", GPU_PCIE, v_pcie_gen_max},
};

/* dcgm-exporter's names, units and labels (its default counters) */
static const struct {
	const char *name, *help;
	unsigned need;
	double scale;
	double (*value)(const struct gpu_sample *s);
} dcgm_families[] = {
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", GPU_UTIL, 100, v_util},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", GPU_MEM, 1.0 / (1 << 20),
	 v_mem_used},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", GPU_POWER, 1, v_power},
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
	 GPU_ENERGY, 1000, v_energy},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", GPU_TEMP, 1, v_temp},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", GPU_CLOCK, 1e-6, v_clock},
};

static void gpus(struct agent *a, struct strbuf *b)
{
	int n = agent__nvml_count(a->nvml);
	struct gpu_sample *smp = xcalloc((size_t)n + 1, sizeof(*smp));
	unsigned *failing = xcalloc((size_t)n + 1, sizeof(*failing));
	/* what the health check read this second: NVML is not asked twice */
	for (int i = 0; i < n; i++)
		failing[i] = agent__health_gpu(a, i, &smp[i]);
	for (size_t f = 0; f < ARRAY_SIZE(gpu_families); f++) {
		const struct gpu_family *g = &gpu_families[f];
		prom_family(b, g->name, g->type, g->help);
		for (int i = 0; i < n; i++) {
			if (!(smp[i].have & g->need))
				continue;
			struct prom_labels l;
			gpu_labels(a, i, &l);
			prom_sample(b, g->name, &l, g->value(&smp[i]));
		}
	}
	prom_family(b, "tenk_gpu_remapped_rows", "gauge",
		    "Memory rows remapped since the card was made, by the errors that caused it.");
	for (int i = 0; i < n; i++) {
		if (!(smp[i].have & GPU_ROWS))
			continue;
		for (int k = 0; k < 2; k++) {
			struct prom_labels l;
			gpu_labels(a, i, &l);
			prom_label(&l, "kind", k ? "uncorrectable" : "correctable");
			prom_sample(b, "tenk_gpu_remapped_rows", &l,
				    k ? smp[i].rows_unc : smp[i].rows_corr);
		}
	}
	/* a series only for what fails: a fleet's healthy cards say nothing */
	prom_family(b, "tenk_gpu_health_fault", "gauge",
		    "1 for each check (gpu_health) an accelerator fails now: the node is "
		    "drained for it.");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < GPU_CHECK_MAX; c++) {
			if (!(failing[i] & (1u << c)))
				continue;
			struct prom_labels l;
			gpu_labels(a, i, &l);
			prom_label(&l, "check", gpu_check_name((enum gpu_check)c));
			prom_sample(b, "tenk_gpu_health_fault", &l, 1);
		}
	free(failing);
	prom_family(b, "tenk_gpu_xid_errors_total", "counter",
		    "Xid errors since the agent started (NVML events).");
	for (int i = 0; i < n; i++) {
		unsigned last;
		uint64_t count = agent__health_xids(a, i, &last);
		struct prom_labels l;
		gpu_labels(a, i, &l);
		prom_sample(b, "tenk_gpu_xid_errors_total", &l, (double)count);
	}
	prom_family(b, "tenk_gpu_last_xid", "gauge",
		    "The newest Xid since the agent started (0: none).");
	for (int i = 0; i < n; i++) {
		unsigned last;
		agent__health_xids(a, i, &last);
		struct prom_labels l;
		gpu_labels(a, i, &l);
		prom_sample(b, "tenk_gpu_last_xid", &l, last);
	}
	if (a->cfg.dcgm_compat) {
		for (size_t f = 0; f < ARRAY_SIZE(dcgm_families); f++) {
			prom_family(b, dcgm_families[f].name, "gauge", dcgm_families[f].help);
			for (int i = 0; i < n; i++) {
				if (!(smp[i].have & dcgm_families[f].need))
					continue;
				struct prom_labels l;
				dcgm_labels(a, i, &l);
				prom_sample(b, dcgm_families[f].name, &l,
					    dcgm_families[f].value(&smp[i]) *
						    dcgm_families[f].scale);
			}
		}
		prom_family(b, "DCGM_FI_DEV_XID_ERRORS", "gauge",
			    "Value of the last XID error encountered.");
		for (int i = 0; i < n; i++) {
			unsigned last;
			agent__health_xids(a, i, &last);
			struct prom_labels l;
			dcgm_labels(a, i, &l);
			prom_sample(b, "DCGM_FI_DEV_XID_ERRORS", &l, last);
		}
	}
	free(smp);
}

/* Which attempt holds each accelerator, and whose it is: the one series
 * to join telemetry with jobs on. */
static void allocations(struct agent *a, struct strbuf *b)
{
	prom_family(b, "tenk_gpu_allocation_info", "gauge",
		    "The attempt an accelerator is allocated to (1 while it is).");
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		const struct taskgroup *g = v;
		if (!g->nrunning)
			continue;
		for (int k = 0; k < g->ndevs; k++) {
			int d = g->devs[k];
			int i = 0;
			while (i < a->inv.naccel && a->inv.accel[i].index != d)
				i++;
			if (i == a->inv.naccel)
				continue;
			struct prom_labels l;
			prom_labels_init(&l);
			prom_label(&l, "node", a->inv.name);
			prom_labelf(&l, "gpu", "%d", d);
			prom_label(&l, "uuid", a->inv.accel[i].uuid);
			prom_labelf(&l, "job_id", "%lld", (long long)g->job);
			prom_labelf(&l, "attempt", "%d", g->attempt);
			prom_label(&l, "user", g->owner);
			prom_label(&l, "queue", g->queue);
			prom_sample(b, "tenk_gpu_allocation_info", &l, 1);
		}
	}
	prom_family(b, "tenk_attempt_cpu_seconds_total", "counter",
		    "CPU time used by each attempt's cgroup on this node.");
	prom_family(b, "tenk_attempt_memory_bytes", "gauge",
		    "Memory each attempt's cgroup uses on this node.");
	prom_family(b, "tenk_attempt_memory_peak_bytes", "gauge",
		    "The most memory each attempt's cgroup has used on this node.");
	pos = 0;
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		const struct taskgroup *g = v;
		if (!g->nrunning)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_labelf(&l, "job_id", "%lld", (long long)g->job);
		prom_labelf(&l, "attempt", "%d", g->attempt);
		prom_sample(b, "tenk_attempt_cpu_seconds_total", &l, (double)g->cpu_ms / 1000.0);
		prom_sample(b, "tenk_attempt_memory_bytes", &l, (double)g->mem_mib * (1 << 20));
		prom_sample(b, "tenk_attempt_memory_peak_bytes", &l,
			    (double)g->mem_peak_mib * (1 << 20));
	}
	/* checkpoints the store has not yet taken: the work a failure now
	 * would lose beyond the last upload */
	prom_family(b, "tenk_checkpoint_upload_backlog_seconds", "gauge",
		    "How long each attempt's committed checkpoints have waited for the cluster's "
		    "store without a moment with none waiting (0: none waits).");
	pos = 0;
	int64_t now = tk_mono_ms();
	while (tk_map_next(&a->groups, &pos, NULL, &v)) {
		struct taskgroup *g = v;
		int64_t ms = agent__ckpt_backlog_ms(g, now);
		if (ms < 0)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_labelf(&l, "job_id", "%lld", (long long)g->job);
		prom_labelf(&l, "attempt", "%d", g->attempt);
		prom_sample(b, "tenk_checkpoint_upload_backlog_seconds", &l, (double)ms / 1000.0);
	}
}

/* /proc/stat's first line: CPU time of the whole node by mode. */
static void node_cpu(struct agent *a, struct strbuf *b)
{
	static const char *const modes[] = {"user",   "nice", "system",	 "idle",
					    "iowait", "irq",  "softirq", "steal"};
	FILE *f = fopen("/proc/stat", "re");
	unsigned long long t[8] = {0};
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2],
			   &t[3], &t[4], &t[5], &t[6], &t[7])
		  : 0;
	if (f)
		fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	prom_family(b, "tenk_node_cpu_seconds_total", "counter",
		    "CPU time of the node (every CPU), by mode.");
	for (int i = 0; i < n && i < 8 && hz > 0; i++) {
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_label(&l, "mode", modes[i]);
		prom_sample(b, "tenk_node_cpu_seconds_total", &l, (double)t[i] / (double)hz);
	}
}

static void node_memory(struct agent *a, struct strbuf *b)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long total = 0, avail = 0;
	char line[256];
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long kb;
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			total = kb * 1024;
		else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			avail = kb * 1024;
	}
	if (f)
		fclose(f);
	struct prom_labels l;
	prom_labels_init(&l);
	prom_label(&l, "node", a->inv.name);
	prom_family(b, "tenk_node_memory_total_bytes", "gauge", "The node's memory.");
	prom_sample(b, "tenk_node_memory_total_bytes", &l, (double)total);
	prom_family(b, "tenk_node_memory_available_bytes", "gauge",
		    "Memory available for new work without swapping (MemAvailable).");
	prom_sample(b, "tenk_node_memory_available_bytes", &l, (double)avail);
}

/* Two counter families whose samples were gathered side by side: their
 * heads, then their samples, each under its own. */
static void two_families(struct strbuf *b, const char *const names[2], const char *const helps[2],
			 struct strbuf sb[2])
{
	for (int i = 0; i < 2; i++) {
		prom_family(b, names[i], "counter", helps[i]);
		strbuf_add(b, sb[i].buf, sb[i].len);
		strbuf_release(&sb[i]);
	}
}

/* /proc/diskstats, whole disks only (those in /sys/block, not loop or ram
 * devices): bytes read and written. */
static void node_disks(struct agent *a, struct strbuf *b)
{
	static const char *const names[2] = {"tenk_node_disk_read_bytes_total",
					     "tenk_node_disk_written_bytes_total"};
	static const char *const helps[2] = {"Bytes read from each disk.",
					     "Bytes written to each disk."};
	struct strbuf sb[2];
	strbuf_init(&sb[0]);
	strbuf_init(&sb[1]);
	FILE *f = fopen("/proc/diskstats", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char name[64];
		unsigned long long x[7];
		if (sscanf(line, "%*u %*u %63s %llu %llu %llu %llu %llu %llu %llu", name, &x[0],
			   &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]) != 8)
			continue;
		if (strncmp(name, "loop", 4) == 0 || strncmp(name, "ram", 3) == 0)
			continue;
		char sys[128];
		snprintf(sys, sizeof(sys), "/sys/block/%s", name);
		struct stat st;
		if (stat(sys, &st) < 0)
			continue; /* a partition: its disk counts it */
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_label(&l, "device", name);
		prom_sample(&sb[0], names[0], &l, (double)x[2] * 512);
		prom_sample(&sb[1], names[1], &l, (double)x[6] * 512);
	}
	if (f)
		fclose(f);
	two_families(b, names, helps, sb);
}

/* /proc/net/dev, every interface but loopback. */
static void node_network(struct agent *a, struct strbuf *b)
{
	static const char *const names[2] = {"tenk_node_network_receive_bytes_total",
					     "tenk_node_network_transmit_bytes_total"};
	static const char *const helps[2] = {"Bytes received on each network interface.",
					     "Bytes sent on each network interface."};
	struct strbuf sb[2];
	strbuf_init(&sb[0]);
	strbuf_init(&sb[1]);
	FILE *f = fopen("/proc/net/dev", "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue; /* the two header lines */
		*colon = 0;
		char *name = line;
		while (*name == ' ')
			name++;
		unsigned long long r, t;
		if (strcmp(name, "lo") == 0 ||
		    sscanf(colon + 1, "%llu %*u %*u %*u %*u %*u %*u %*u %llu", &r, &t) != 2)
			continue;
		struct prom_labels l;
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_label(&l, "device", name);
		prom_sample(&sb[0], names[0], &l, (double)r);
		prom_sample(&sb[1], names[1], &l, (double)t);
	}
	if (f)
		fclose(f);
	two_families(b, names, helps, sb);
}

char *agent__metrics_render(struct agent *a)
{
	struct strbuf b;
	strbuf_init(&b);
	prom_family(&b, "tenk_agent_info", "gauge", "The agent's version and node.");
	struct prom_labels l;
	prom_labels_init(&l);
	prom_label(&l, "node", a->inv.name);
	prom_label(&l, "version", TENK_VERSION);
	prom_sample(&b, "tenk_agent_info", &l, 1);
	prom_family(&b, "tenk_agent_registered", "gauge",
		    "Whether the agent is joined to its server now.");
	prom_labels_init(&l);
	prom_label(&l, "node", a->inv.name);
	prom_sample(&b, "tenk_agent_registered", &l, a->registered);
	agent__witness_metrics(a, &b);
	gpus(a, &b);
	allocations(a, &b);
	node_cpu(a, &b);
	node_memory(a, &b);
	node_disks(a, &b);
	node_network(a, &b);
	agent__nic_metrics(a, &b);
	agent__forward_metrics(a, &b);
	agent__idle_power_metrics(a, &b);
	return strbuf_detach(&b);
}

/* ---- serving it ------------------------------------------------------------------ */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, char *text,
			      const char *type)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	enum MHD_Result ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **con_cls)
{
	struct metrics *m = cls;
	if (!*con_cls) {
		*con_cls = m; /* the headers: answer once the body (if any) is read */
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* a body is ignored */
		return MHD_YES;
	}
	if (strcmp(url, "/metrics") != 0)
		return answer(c, 404, xasprintf("no such endpoint: %.200s (try /metrics)\n", url),
			      "text/plain; charset=utf-8");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return answer(c, 405,
			      xasprintf("method %.16s is not allowed on /metrics\n", method),
			      "text/plain; charset=utf-8");
	return answer(c, 200, agent__metrics_render(m->a),
		      "text/plain; version=0.0.4; charset=utf-8");
}

static void mhd_timer_cb(uv_timer_t *t);

static void run_mhd(struct metrics *m)
{
	MHD_run(m->mhd);
	MHD_UNSIGNED_LONG_LONG t;
	if (MHD_get_timeout(m->mhd, &t) == MHD_YES)
		uv_timer_start(&m->timer, mhd_timer_cb, (uint64_t)t, 0);
	else
		uv_timer_stop(&m->timer);
}

static void mhd_timer_cb(uv_timer_t *t)
{
	run_mhd(t->data);
}

static void mhd_poll_cb(uv_poll_t *p, int status, int events)
{
	run_mhd(p->data);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	tk_strip(msg);
	log_debug("metrics: %s", msg);
}

int agent__metrics_start(struct agent *a, struct tk_error *err)
{
	const char *listen = a->cfg.metrics_listen ? a->cfg.metrics_listen : METRICS_DEFAULT_LISTEN;
	if (strcmp(listen, "none") == 0)
		return 0;
	struct sockaddr_storage ss;
	socklen_t sslen;
	char host[128];
	int r = tk_parse_listen(listen, &ss, &sslen, host, sizeof(host), err);
	if (r < 0)
		return r;
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	struct metrics *m = xcalloc(1, sizeof(*m));
	m->a = a;
	m->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_access, m, MHD_OPTION_SOCK_ADDR, &ss,
				  MHD_OPTION_CONNECTION_LIMIT, 64, MHD_OPTION_CONNECTION_TIMEOUT,
				  10, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, m, MHD_OPTION_END);
	if (!m->mhd) {
		free(m);
		if (!a->cfg.metrics_listen) {
			/* the default address is taken (another agent on this
			 * machine): this one goes on without */
			log_warn("metrics: cannot listen on %s (taken?); no metrics from this "
				 "agent (--metrics-listen sets another address)",
				 listen);
			return 0;
		}
		return tk_errorf(err, -EADDRINUSE, "--metrics-listen: cannot listen on %s", listen);
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	const union MHD_DaemonInfo *lfd = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_LISTEN_FD);
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	char port[8] = "";
	if (lfd && getsockname(lfd->listen_fd, (struct sockaddr *)&bound, &blen) == 0)
		snprintf(port, sizeof(port), "%u",
			 ntohs(bound.ss_family == AF_INET6
				       ? ((struct sockaddr_in6 *)&bound)->sin6_port
				       : ((struct sockaddr_in *)&bound)->sin_port));
	if (!info || !port[0]) {
		MHD_stop_daemon(m->mhd);
		free(m);
		return tk_errorf(err, -EIO, "metrics: libmicrohttpd gave no epoll descriptor");
	}
	_cleanup_free_ char *url =
		xasprintf("http://%s%s%s:%s/metrics\n", ss.ss_family == AF_INET6 ? "[" : "", host,
			  ss.ss_family == AF_INET6 ? "]" : "", port);
	_cleanup_free_ char *path = xasprintf("%s/metrics.url", a->cfg.work_dir);
	tk_replace_file(path, url, strlen(url), 0644);
	tk_strip(url);
	log_info("metrics at %s", url);
	m->epoll_fd = info->epoll_fd;
	a->metrics = m;
	return 0;
}

void agent__metrics_watch(struct agent *a)
{
	struct metrics *m = a->metrics;
	if (!m)
		return;
	uv_poll_init(a->loop, &m->poll, m->epoll_fd);
	uv_timer_init(a->loop, &m->timer);
	m->poll.data = m->timer.data = m;
	m->open = 2;
	a->open_handles += 2;
	uv_poll_start(&m->poll, UV_READABLE, mhd_poll_cb);
	run_mhd(m);
}

static void closed(uv_handle_t *h)
{
	struct metrics *m = h->data;
	struct agent *a = m->a;
	if (--m->open == 0) {
		MHD_stop_daemon(m->mhd);
		free(m);
	}
	agent_handle_gone(a);
}

void agent__metrics_stop(struct agent *a)
{
	struct metrics *m = a->metrics;
	if (!m)
		return;
	a->metrics = NULL;
	if (!m->open) { /* never watched */
		MHD_stop_daemon(m->mhd);
		free(m);
		return;
	}
	uv_poll_stop(&m->poll);
	uv_timer_stop(&m->timer);
	uv_close((uv_handle_t *)&m->poll, closed);
	uv_close((uv_handle_t *)&m->timer, closed);
}
