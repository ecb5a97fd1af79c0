/*
 * The daemons' life (`tenk up`, `tenk server`, `tenk agent`): the server and
 * agent libraries on libuv loops, from options to a clean stop.
 *
 * A daemon's life reads top to bottom: parse options, create the parts,
 * run the loop until SIGINT or SIGTERM, stop the parts (the agent first, so
 * its tasks' exits reach the server), destroy them in reverse.
 */
#include "daemon.h"

#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "agent/agent.h"
#include "client/client.h"
#include "model/model.h"
#include "server/server.h"
#include "store/store.h"

/*
 * A daemon process: a server, an agent, or both (`tenk up`). Each part has
 * its own loop; in `tenk up` the agent's runs on a second thread, so that
 * launching tasks (fork and exec) never stalls the server. The parts talk
 * over HTTP on loopback exactly as they do across machines.
 */
struct daemon {
	uv_loop_t loop; /* the main thread's: the server's, or a lone agent's */
	struct server *server;
	struct agent *agent;
	struct hollow *hollow; /* `tenk agent --hollow N` */
	uv_signal_t sigint, sigterm;
	int signals;
	/* `tenk up` only */
	bool agent_threaded;
	uv_loop_t agent_loop;
	uv_thread_t agent_thread;
	uv_async_t agent_stop_async; /* on agent_loop: main asks the agent to stop */
	uv_async_t agent_done_async; /* on loop: the agent has stopped */
};

static void all_stopped(struct daemon *d)
{
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	if (d->agent_threaded)
		uv_close((uv_handle_t *)&d->agent_done_async, NULL);
}

static void server_stopped(void *arg)
{
	all_stopped(arg);
}

/* On the main thread, once the agent (if any) has stopped. */
static void agent_gone(struct daemon *d)
{
	if (d->server)
		server_stop(d->server, server_stopped, d);
	else
		all_stopped(d);
}

static void agent_stopped(void *arg)
{
	struct daemon *d = arg;
	if (d->agent_threaded) {
		/* on the agent's thread: let its loop end, tell the main thread */
		uv_close((uv_handle_t *)&d->agent_stop_async, NULL);
		uv_async_send(&d->agent_done_async);
	} else {
		agent_gone(d);
	}
}

static void hollow_stopped(void *arg)
{
	agent_gone(arg);
}

static void agent_stop_async_cb(uv_async_t *h)
{
	struct daemon *d = h->data;
	agent_stop(d->agent, agent_stopped, d);
}

static void agent_done_async_cb(uv_async_t *h)
{
	agent_gone(h->data);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;
	if (d->signals++ > 0) {
		log_warn("second signal: exiting without a clean stop");
		_exit(1);
	}
	log_info("%s received; stopping (send it again to exit at once)", strsignal(signum));
	if (d->agent_threaded)
		uv_async_send(&d->agent_stop_async);
	else if (d->hollow)
		hollow_stop(d->hollow, hollow_stopped, d);
	else if (d->agent)
		agent_stop(d->agent, agent_stopped, d);
	else
		agent_gone(d);
}

static void agent_thread_main(void *arg)
{
	struct daemon *d = arg;
	uv_run(&d->agent_loop, UV_RUN_DEFAULT);
}

static int run_loop(struct daemon *d)
{
	d->sigint.data = d->sigterm.data = d;
	uv_signal_init(&d->loop, &d->sigint);
	uv_signal_init(&d->loop, &d->sigterm);
	uv_signal_start(&d->sigint, on_signal, SIGINT);
	uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	if (d->agent_threaded) {
		d->agent_stop_async.data = d->agent_done_async.data = d;
		uv_async_init(&d->agent_loop, &d->agent_stop_async, agent_stop_async_cb);
		uv_async_init(&d->loop, &d->agent_done_async, agent_done_async_cb);
		if (uv_thread_create(&d->agent_thread, agent_thread_main, d) < 0) {
			log_err("cannot start the agent's thread");
			_exit(1);
		}
	}
	uv_run(&d->loop, UV_RUN_DEFAULT);
	int rc = 0;
	if (d->agent_threaded) {
		uv_thread_join(&d->agent_thread);
		agent_destroy(d->agent);
		if (uv_loop_close(&d->agent_loop) < 0) {
			log_err("the agent left handles open at exit");
			rc = 1;
		}
	} else {
		agent_destroy(d->agent);
	}
	hollow_destroy(d->hollow);
	server_destroy(d->server);
	int r = uv_loop_close(&d->loop);
	if (r < 0) {
		log_err("handles left open at exit: %s", uv_strerror(r));
		return 1;
	}
	log_info("stopped");
	return rc;
}

/* ---- options shared by the daemons ---------------------------------------------- */

enum {
	D_HELP,
	D_LOG,
	D_DATA,
	D_LISTEN,
	D_CATALOGUE,
	D_NODE_TIMEOUT,
	D_KEEP_SETTLED,
	D_MASTER_PORTS,
	D_SERVER,
	D_TOKEN_FILE,
	D_NAME,
	D_FAKE,
	D_ADDR,
	D_TOPO,
	D_LABELS,
	D_DOMAIN,
	D_CPUS,
	D_MEM,
	D_WORK,
	D_RUN_DIR,
	D_STOP_JOBS,
	D_PODMAN,
	D_CTR_CONF,
	D_PODMAN_ROOT,
	D_CDI,
	D_INIT,
	D_QUARANTINE,
	D_TLS_CERT,
	D_TLS_KEY,
	D_CA,
	D_INSECURE,
	D_MAX_CONNS,
	D_REQ_TIMEOUT,
	D_CKPT_RATE,
	D_MIN_FREE,
	D_JOB_DISK,
	D_HEALTH,
	D_HEALTH_EVERY,
	D_METRICS,
	D_DCGM,
	D_WITNESS,
	D_HOLLOW,
	D_HOLLOW_RUN,
	D_HEARTBEAT,
	D_STORE,
	D_CLUSTER_NAME,
	D_DEVICE_CHECK,
	D_FAKE_STACK,
	D_MAX
};

static const struct tk_option all_opts[D_MAX] = {
	[D_HELP] = {"help", 'h', NULL, "show this help"},
	[D_LOG] = {"log-level", 0, "LEVEL", "error, warn, info or debug (default info)"},
	[D_DATA] = {"data", 'd', "DIR",
		    "data folder: the database, tokens, the agent's work (default ./tenk-data)"},
	[D_LISTEN] = {"listen", 'l', "HOST:PORT", "address to serve (default 127.0.0.1:7480)"},
	[D_CATALOGUE] = {"catalogue", 0, "FILE", "accelerator catalogue overrides (JSON)"},
	[D_NODE_TIMEOUT] = {"node-timeout", 0, "TIME", "a silent node is DOWN after (default 30s)"},
	[D_KEEP_SETTLED] = {"keep-finished", 0, "TIME",
			    "a finished job stays in memory this long; then the store answers "
			    "for it (default 5m)"},
	[D_MASTER_PORTS] = {"master-ports", 0, "FIRST",
			    "jobs' MASTER_PORT comes from the 512 ports from FIRST on each "
			    "node (default $TENK_MASTER_PORTS, else 29500)"},
	[D_SERVER] = {"server", 's', "URL", "the server to join"},
	[D_TOKEN_FILE] = {"token-file", 0, "FILE", "the agent join token (server's agent.token)"},
	[D_NAME] = {"name", 'n', "NAME", "this node's name (default: the host name)"},
	[D_FAKE] = {"fake-gpus", 0, "SPEC", "fake accelerators, e.g. 8xH100 or 4xA100-80GB,2xT4"},
	[D_FAKE_STACK] = {"fake-stack", 0, "FILE",
			  "a JSON object whose fields (kernel, os, driver, cuda, nccl, vbios, "
			  "nic_fw) replace the software stack this node reports, read again at "
			  "every heartbeat (tests: an upgrade without one)"},
	[D_ADDR] = {"addr", 0, "ADDR",
		    "address peers reach this node at (default: as the server "
		    "sees it)"},
	[D_TOPO] = {"topology", 0, "PATH", "switches above this node, e.g. spine1/leaf07"},
	[D_LABELS] = {"labels", 0, "K=V,...",
		      "this node's labels, e.g. tier=top,fabric=ib (jobs select nodes by them: "
		      "tenk submit --constraint)"},
	[D_DOMAIN] = {"domain", 0, "PATH",
		      "this node's fault domain, widest first, e.g. dc1/row3/rack07/pdu2 (tenk "
		      "submit --spread rack, --within rack)"},
	[D_CPUS] = {"cpus", 0, "N", "CPUs to offer (default: detected)"},
	[D_MEM] = {"mem", 0, "SIZE", "memory to offer, e.g. 512G (default: detected)"},
	[D_WORK] = {"work-dir", 0, "DIR", "local folder for checkpoints (default DATA/agent)"},
	[D_RUN_DIR] = {"run-dir", 0, "DIR",
		       "the shims' folders and metrics files (default: as root, a folder of the "
		       "agent's own under /run/tenk or /dev/shm/tenk, whichever is a tmpfs, "
		       "linked as WORK/run; else the work folder)"},
	[D_STOP_JOBS] = {"stop-jobs", 0, NULL,
			 "on stop, end this node's jobs (they are requeued) rather than leave "
			 "them running until the agent is back"},
	[D_PODMAN] = {"podman", 0, "PROGRAM", "the podman image jobs run with (default: podman)"},
	[D_CTR_CONF] = {"containers-conf", 0, "FILE",
			"a containers.conf for podman (CONTAINERS_CONF)"},
	[D_PODMAN_ROOT] = {"podman-root", 0, "DIR",
			   "podman's store for this node: DIR/storage, DIR/run (default: "
			   "podman's own)"},
	[D_CDI] = {"cdi-dir", 0, "DIR", "where the node's CDI specs are (default /etc/cdi)"},
	[D_INIT] = {"init", 0, NULL,
		    "start a new cluster even though DATA held one and its store is empty"},
	[D_QUARANTINE] = {"quarantine-bad-rows", 0, NULL,
			  "set rows of the store that do not decode aside, and start"},
	[D_TLS_CERT] = {"tls-cert", 0, "FILE", "serve HTTPS with this certificate (PEM)"},
	[D_TLS_KEY] = {"tls-key", 0, "FILE", "the certificate's private key (PEM)"},
	[D_CA] = {"ca-file", 0, "FILE",
		  "verify the server's HTTPS against this CA (default $TENK_CA, else "
		  "tls/ca.pem beside the token file)"},
	[D_INSECURE] = {"insecure-http", 0, NULL,
			"plain HTTP: the server serves no TLS; an agent may send its "
			"token to a server that is not on this machine without it"},
	[D_MAX_CONNS] = {"max-connections", 0, "N",
			 "connections at most, the last quarter kept for nodes' addresses "
			 "(default 60000, or what descriptors allow)"},
	[D_MIN_FREE] = {"min-free-disk", 0, "SIZE",
			"less free space in the work folder is a fault: the node is drained "
			"and its jobs requeued (default 1G)"},
	[D_JOB_DISK] = {"job-disk-limit", 0, "SIZE|N%",
			"what one job's checkpoint folder may hold; over it the job fails "
			"and its files go (default 50% of the work folder's file system; 0: "
			"no limit)"},
	[D_HEALTH] = {"health-check", 0, "PROGRAM",
		      "the operator's health check: while it exits non-zero (or hangs) the "
		      "node is drained and its jobs requeued"},
	[D_HEALTH_EVERY] = {"health-check-interval", 0, "TIME",
			    "how often the health check runs (default 60s)"},
	[D_METRICS] = {"metrics-listen", 0, "HOST:PORT",
		       "serve GET /metrics (Prometheus) here, plain HTTP; \"none\": nowhere "
		       "(default 127.0.0.1:9400, where it is free)"},
	[D_WITNESS] = {"witness-port", 0, "PORT",
		       "the UDP port where the members of this node's witness group ask it "
		       "whether it hears the server (default: the one it had, or any free one)"},
	[D_DCGM] = {"dcgm-compat", 0, NULL,
		    "/metrics also in dcgm-exporter's names and labels (its Grafana "
		    "dashboards)"},
	[D_CKPT_RATE] = {"checkpoint-upload-rate", 0, "MIB_S",
			 "upload checkpoints at most this fast, MiB/s (default: no limit)"},
	[D_REQ_TIMEOUT] = {"request-timeout", 0, "TIME",
			   "a connection's time to send a request's headers, then its body "
			   "(default 30s)"},
	[D_HOLLOW] = {"hollow", 0, "N",
		      "N hollow nodes in this process (NAME-00000 ...): the real protocol, "
		      "tasks that run nothing, to drive a server as a large cluster"},
	[D_HOLLOW_RUN] = {"hollow-run", 0, "TIME",
			  "how long a hollow task of a command other than sleep S, true or "
			  "false takes (default 0)"},
	[D_CLUSTER_NAME] = {"cluster-name", 0, "NAME",
			    "its name among the CLI's clusters (tenk config; default local); "
			    "none: write none"},
	[D_DEVICE_CHECK] =
		{"device-check", 0, "WHEN",
		 "check an attempt's GPUs here before it starts (a small GEMM checked "
		 "exactly, a copy): restarts (attempts after the first; default), always "
		 "or never. A node that fails it is drained"},
	[D_STORE] = {"store", 0, "FILE|URL",
		     "where the state is kept: a file (default DATA/tenk.db), or a PostgreSQL "
		     "database, postgresql://USER@HOST/DB (its password from PGPASSFILE or "
		     "~/.pgpass, never the URL)"},
	[D_HEARTBEAT] = {"heartbeat", 0, "TIME",
			 "how often the node reports to the server (default 5s; at most a "
			 "tenth of the server's --node-timeout, and at most what the server "
			 "asks: its power_fence.heartbeat)"},
};

/* Which options each daemon takes, in all_opts order. */
static const int up_opts[] = {
	D_HELP,		D_LOG,		D_DATA,		D_LISTEN,	D_CATALOGUE,
	D_NODE_TIMEOUT, D_KEEP_SETTLED, D_MASTER_PORTS, D_NAME,		D_FAKE,
	D_TOPO,		D_LABELS,	D_DOMAIN,	D_CPUS,		D_MEM,
	D_STOP_JOBS,	D_RUN_DIR,	D_PODMAN,	D_CTR_CONF,	D_PODMAN_ROOT,
	D_CDI,		D_INIT,		D_QUARANTINE,	D_TLS_CERT,	D_TLS_KEY,
	D_CA,		D_INSECURE,	D_MAX_CONNS,	D_REQ_TIMEOUT,	D_CKPT_RATE,
	D_MIN_FREE,	D_JOB_DISK,	D_HEALTH,	D_HEALTH_EVERY, D_METRICS,
	D_DCGM,		D_WITNESS,	D_CLUSTER_NAME, D_DEVICE_CHECK, D_FAKE_STACK};
static const int server_opts[] = {D_HELP,	 D_LOG,		 D_DATA,	 D_LISTEN,
				  D_CATALOGUE,	 D_NODE_TIMEOUT, D_INIT,	 D_QUARANTINE,
				  D_TLS_CERT,	 D_TLS_KEY,	 D_INSECURE,	 D_MAX_CONNS,
				  D_REQ_TIMEOUT, D_KEEP_SETTLED, D_MASTER_PORTS, D_STORE};
static const int agent_opts[] = {
	D_HELP,	       D_LOG,	    D_DATA,	    D_SERVER,	    D_TOKEN_FILE, D_NAME,
	D_FAKE,	       D_ADDR,	    D_TOPO,	    D_LABELS,	    D_DOMAIN,	  D_CPUS,
	D_MEM,	       D_WORK,	    D_RUN_DIR,	    D_STOP_JOBS,    D_PODMAN,	  D_CTR_CONF,
	D_PODMAN_ROOT, D_CDI,	    D_CA,	    D_INSECURE,	    D_CKPT_RATE,  D_MIN_FREE,
	D_JOB_DISK,    D_HEALTH,    D_HEALTH_EVERY, D_METRICS,	    D_DCGM,	  D_HOLLOW,
	D_HOLLOW_RUN,  D_HEARTBEAT, D_WITNESS,	    D_DEVICE_CHECK, D_FAKE_STACK};

/* What a daemon takes (indices into all_opts, in its order) and runs. */
struct daemon_spec {
	const int *opts;
	size_t nopts;
	int (*run)(const char **v);
};

static int usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk %s: ", cmd);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see tenk %s --help)\n", cmd);
	return 2;
}

static int set_log_level(const char *cmd, const char *v)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	if (!v)
		v = getenv("TENK_LOG_LEVEL");
	if (!v)
		return 0;
	for (int i = 0; i < TK_LOG_MAX; i++)
		if (strcmp(v, names[i]) == 0) {
			tk_log_set_level((enum tk_log_level)i);
			return 0;
		}
	return usage(cmd, "--log-level: must be error, warn, info or debug, got \"%s\"", v);
}

static int server_cfg(const char *cmd, const char **v, struct server_config *sc)
{
	server_config_init(sc);
	if (v[D_DATA])
		sc->data_dir = v[D_DATA];
	if (v[D_LISTEN])
		sc->listen = v[D_LISTEN];
	sc->catalogue_path = v[D_CATALOGUE];
	sc->init = v[D_INIT] != NULL;
	sc->tls_cert = v[D_TLS_CERT];
	sc->tls_key = v[D_TLS_KEY];
	sc->insecure_http = v[D_INSECURE] != NULL;
	sc->quarantine_bad_rows = v[D_QUARANTINE] != NULL;
	sc->store = v[D_STORE];
	if (v[D_MAX_CONNS]) {
		int64_t n;
		if (tk_parse_int64(v[D_MAX_CONNS], 16, 1000000, &n) < 0)
			return usage(cmd,
				     "--max-connections: must be an integer from 16 to "
				     "1000000, got \"%s\"",
				     v[D_MAX_CONNS]);
		sc->max_connections = (int)n;
	}
	if (v[D_REQ_TIMEOUT]) {
		int64_t t;
		if (tk_parse_duration(v[D_REQ_TIMEOUT], &t) < 0 || t < 1 || t > 3600)
			return usage(cmd,
				     "--request-timeout: expected a duration from 1s to 1h, got "
				     "\"%s\"",
				     v[D_REQ_TIMEOUT]);
		sc->request_timeout_ms = t * 1000;
	}
	if (v[D_NODE_TIMEOUT]) {
		int64_t s;
		if (tk_parse_duration(v[D_NODE_TIMEOUT], &s) < 0 || s < 1 || s > 86400)
			return usage(
				cmd,
				"--node-timeout: expected a duration from 1s to 1d, got \"%s\"",
				v[D_NODE_TIMEOUT]);
		sc->node_timeout_ms = s * 1000;
	}
	if (v[D_KEEP_SETTLED]) {
		int64_t s;
		if (tk_parse_duration(v[D_KEEP_SETTLED], &s) < 0 || s < 0 || s > 30 * 86400)
			return usage(cmd,
				     "--keep-finished: expected a duration from 0s to 30d, got "
				     "\"%s\"",
				     v[D_KEEP_SETTLED]);
		sc->keep_settled_ms = s * 1000;
	}
	const char *ports = v[D_MASTER_PORTS] ? v[D_MASTER_PORTS] : getenv("TENK_MASTER_PORTS");
	if (ports && *ports) {
		int64_t first;
		if (tk_parse_int64(ports, 1024, 65536 - SERVER_MASTER_PORTS, &first) < 0)
			return usage(cmd,
				     "--master-ports%s: expected the first port, from 1024 to %d, "
				     "got \"%s\"",
				     v[D_MASTER_PORTS] ? "" : " (TENK_MASTER_PORTS)",
				     65536 - SERVER_MASTER_PORTS, ports);
		sc->master_port_first = (int)first;
	}
	return 0;
}

static int agent_cfg(const char *cmd, const char **v, struct agent_config *ac)
{
	agent_config_init(ac);
	ac->name = v[D_NAME];
	ac->fake_gpus = v[D_FAKE];
	ac->fake_stack = v[D_FAKE_STACK];
	ac->addr = v[D_ADDR];
	ac->topology = v[D_TOPO];
	ac->labels = v[D_LABELS];
	ac->domain = v[D_DOMAIN];
	if (v[D_DATA])
		ac->data_dir = v[D_DATA];
	ac->work_dir = v[D_WORK];
	ac->run_dir = v[D_RUN_DIR];
	ac->stop_jobs = v[D_STOP_JOBS] != NULL;
	if (v[D_DEVICE_CHECK]) {
		static const char *const when[] = {"restarts", "always", "never"};
		size_t k = 0;
		while (k < ARRAY_SIZE(when) && strcmp(v[D_DEVICE_CHECK], when[k]) != 0)
			k++;
		if (k == ARRAY_SIZE(when))
			return usage(cmd, "--device-check: restarts, always or never, got \"%s\"",
				     v[D_DEVICE_CHECK]);
		ac->device_check = (enum device_check_when)k;
	}
	ac->podman = v[D_PODMAN];
	ac->containers_conf = v[D_CTR_CONF];
	ac->podman_root = v[D_PODMAN_ROOT];
	ac->cdi_dir = v[D_CDI];
	ac->ca_file = v[D_CA];
	ac->insecure_http = v[D_INSECURE] != NULL;
	if (ac->containers_conf && access(ac->containers_conf, R_OK) < 0)
		return usage(cmd, "--containers-conf: cannot read %s: %s", ac->containers_conf,
			     strerror(errno));
	if (v[D_MIN_FREE] && tk_parse_size_mib(v[D_MIN_FREE], &ac->min_free_mib) < 0)
		return usage(cmd, "--min-free-disk: expected a size such as 2G, got \"%s\"",
			     v[D_MIN_FREE]);
	if (v[D_JOB_DISK]) {
		const char *x = v[D_JOB_DISK];
		size_t len = strlen(x);
		int64_t pct;
		char num[16];
		if (len > 1 && len < sizeof(num) && x[len - 1] == '%') {
			memcpy(num, x, len - 1);
			num[len - 1] = '\0';
			if (tk_parse_int64(num, 1, 100, &pct) < 0)
				return usage(cmd,
					     "--job-disk-limit: a percent from 1%% to 100%%, got "
					     "\"%s\"",
					     x);
			ac->job_disk_limit_pct = (int)pct;
			ac->job_disk_limit_mib = 0;
		} else if (strcmp(x, "0") == 0) {
			ac->job_disk_limit_pct = 0;
			ac->job_disk_limit_mib = 0;
		} else if (tk_parse_size_mib(x, &ac->job_disk_limit_mib) < 0 ||
			   ac->job_disk_limit_mib <= 0) {
			return usage(cmd,
				     "--job-disk-limit: expected a size such as 200G, a percent "
				     "such as 50%%, or 0, got \"%s\"",
				     x);
		}
	}
	ac->metrics_listen = v[D_METRICS];
	ac->dcgm_compat = v[D_DCGM] != NULL;
	if (v[D_WITNESS]) {
		int64_t port;
		if (tk_parse_int64(v[D_WITNESS], 1, 65535, &port) < 0)
			return usage(cmd, "--witness-port: a UDP port from 1 to 65535, got \"%s\"",
				     v[D_WITNESS]);
		ac->witness_port = (int)port;
	}
	if (ac->metrics_listen && strcmp(ac->metrics_listen, "none") != 0) {
		struct sockaddr_storage ss;
		socklen_t len;
		char host[128];
		struct tk_error err;
		if (tk_parse_listen(ac->metrics_listen, &ss, &len, host, sizeof(host), &err) < 0)
			return usage(cmd, "--metrics-listen: %s", err.text);
	}
	ac->health_check = v[D_HEALTH];
	if (ac->health_check && (ac->health_check[0] != '/' || access(ac->health_check, X_OK) < 0))
		return usage(cmd, "--health-check: %s is not an executable given by its full path",
			     ac->health_check);
	if (v[D_HEALTH_EVERY]) {
		int64_t t;
		if (tk_parse_duration(v[D_HEALTH_EVERY], &t) < 0 || t < 1 || t > 86400)
			return usage(cmd,
				     "--health-check-interval: expected a duration from 1s to 1d, "
				     "got \"%s\"",
				     v[D_HEALTH_EVERY]);
		ac->health_check_interval_ms = t * 1000;
	}
	if (v[D_CKPT_RATE] &&
	    tk_parse_int64(v[D_CKPT_RATE], 1, 1 << 20, &ac->ckpt_upload_mib_s) < 0)
		return usage(cmd,
			     "--checkpoint-upload-rate: MiB/s, a whole number from 1, got \"%s\"",
			     v[D_CKPT_RATE]);
	if (v[D_CPUS]) {
		int64_t n;
		if (tk_parse_int64(v[D_CPUS], 1, 65536, &n) < 0)
			return usage(cmd, "--cpus: must be an integer from 1 to 65536, got \"%s\"",
				     v[D_CPUS]);
		ac->cpus = (int)n;
	}
	if (v[D_MEM] && tk_parse_size_mib(v[D_MEM], &ac->mem_mib) < 0)
		return usage(cmd, "--mem: expected a size such as 512G, got \"%s\"", v[D_MEM]);
	return 0;
}

static int run_server(const char **v)
{
	struct server_config sc;
	int r = server_cfg("server", v, &sc);
	if (r)
		return r;
	struct daemon d;
	memset(&d, 0, sizeof(d));
	uv_loop_init(&d.loop);
	tk_log_set_prefix("server");
	struct tk_error err;
	if (server_create(&d.loop, &sc, &d.server, &err) < 0) {
		log_err("%s", err.text);
		uv_loop_close(&d.loop);
		return 1;
	}
	printf("tenk server: %s\n", server_url(d.server));
	printf("  admin token: %s/admin.token   agent token: %s/agent.token\n", sc.data_dir,
	       sc.data_dir);
	if (server_ca_file(d.server))
		printf("  its CA: %s (clients: --ca-file or TENK_CA; agents find it beside "
		       "a copy of agent.token, in tls/)\n",
		       server_ca_file(d.server));
	fflush(stdout);
	return run_loop(&d);
}

static int run_agent(const char **v)
{
	struct agent_config ac;
	int r = agent_cfg("agent", v, &ac);
	if (r)
		return r;
	const char *url = v[D_SERVER] ? v[D_SERVER] : getenv("TENK_SERVER");
	if (!url)
		return usage("agent", "--server URL is required (or set TENK_SERVER)");
	if (!v[D_TOKEN_FILE])
		return usage("agent", "--token-file FILE is required (the server's agent.token)");
	int64_t hollow = 0, hollow_run_s = 0;
	if (v[D_HOLLOW] && tk_parse_int64(v[D_HOLLOW], 1, 100000, &hollow) < 0)
		return usage("agent", "--hollow: a number of nodes from 1 to 100000, got \"%s\"",
			     v[D_HOLLOW]);
	if (v[D_HOLLOW_RUN] &&
	    (tk_parse_duration(v[D_HOLLOW_RUN], &hollow_run_s) < 0 || hollow_run_s < 0))
		return usage("agent", "--hollow-run: expected a duration such as 30s, got \"%s\"",
			     v[D_HOLLOW_RUN]);
	if (v[D_HEARTBEAT]) {
		int64_t hb_s = 0;
		if (tk_parse_duration(v[D_HEARTBEAT], &hb_s) < 0 || hb_s < 1 || hb_s > 3600)
			return usage("agent",
				     "--heartbeat: expected a duration from 1s to 1h such as 10s, "
				     "got \"%s\"",
				     v[D_HEARTBEAT]);
		ac.heartbeat_ms = hb_s * 1000;
	}
	char *token = NULL;
	if ((r = tk_read_file(v[D_TOKEN_FILE], 4096, &token, NULL)) < 0)
		return usage("agent", "--token-file: cannot read %s: %s", v[D_TOKEN_FILE],
			     strerror(-r));
	tk_strip(token);
	ac.server_url = url;
	ac.token = token;
	/* the server's own CA travels with its join token: DATA/tls/ca.pem
	 * beside DATA/agent.token */
	_cleanup_free_ char *beside = NULL;
	if (!ac.ca_file && !(getenv("TENK_CA") && *getenv("TENK_CA"))) {
		_cleanup_free_ char *dir = xstrdup(v[D_TOKEN_FILE]);
		beside = xasprintf("%s/tls/ca.pem", dirname(dir));
		if (access(beside, R_OK) == 0)
			ac.ca_file = beside;
	}
	struct daemon d;
	memset(&d, 0, sizeof(d));
	uv_loop_init(&d.loop);
	tk_log_set_prefix(hollow ? "hollow" : "agent");
	struct tk_error err;
	if (hollow ? hollow_create(&d.loop, &ac, (int)hollow, hollow_run_s * 1000, &d.hollow,
				   &err) < 0
		   : agent_create(&d.loop, &ac, &d.agent, &err) < 0) {
		log_err("%s", err.text);
		free(token);
		uv_loop_close(&d.loop);
		return hollow ? 2 : 1;
	}
	r = run_loop(&d);
	free(token);
	return r;
}

/* A one-machine cluster starts with a configuration of its own: the admin
 * token's jobs run as whoever started it (the user behind sudo, if any), and
 * when that is root, root is allowed. A cluster of several machines (tenk
 * server) has no such default: its admin names the account. */
static int up_config(const char *data_dir, struct tk_error *err)
{
	_cleanup_free_ char *path = xasprintf("%s/config.json", data_dir);
	if (access(path, F_OK) == 0)
		return 0;
	const char *name = geteuid() == 0 ? getenv("SUDO_USER") : NULL;
	struct passwd *pw = name && *name ? getpwnam(name) : getpwuid(geteuid());
	if (!pw || !model_unix_user_valid(pw->pw_name))
		return tk_errorf(err, -ENOENT, "cannot tell which Unix account starts tenk up");
	json_t *c = json_pack("{s:s}", "admin_unix_user", pw->pw_name);
	if (pw->pw_uid == 0)
		json_object_set_new(c, "allow_root_jobs", json_true());
	char *text = json_dumps(c, JSON_INDENT(2));
	json_decref(c);
	int r = tk_mkdir_p(data_dir, 0700);
	if (r == 0)
		r = tk_write_file(path, text, strlen(text), 0600);
	free(text);
	if (r < 0)
		return tk_errorf(err, r, "cannot write %s: %s", path, strerror(-r));
	log_info("%s written: the admin token's jobs run as %s%s", path, pw->pw_name,
		 pw->pw_uid == 0 ? " (root is allowed on this one-machine cluster)" : "");
	return 0;
}

/* Writes this cluster into the CLI's configuration as `name` (its server,
 * CA and the admin token's file, by absolute paths), current unless
 * another cluster is: then tenk works from any folder. Says what it did. */
static bool up_context(const char *name, const struct daemon *d, const char *data_dir)
{
	if (strcmp(name, "none") == 0)
		return false;
	struct tk_error err;
	json_t *cfg;
	_cleanup_free_ char *path = client_config_path();
	_cleanup_free_ char *data = realpath(data_dir, NULL);
	if (!path || !data || client_config_load(&cfg, &err) < 0) {
		printf("  cli:  not written to the CLI's configuration (%s)\n",
		       !path   ? "no HOME"
		       : !data ? "no data folder"
			       : err.text);
		return false;
	}
	json_t *clusters = json_object_get(cfg, "clusters");
	if (!clusters) {
		clusters = json_object();
		json_object_set_new(cfg, "clusters", clusters);
	}
	json_t *c = json_pack("{s:s, s:s+}", "server", server_url(d->server), "token_file", data,
			      "/admin.token");
	const char *ca = server_ca_file(d->server);
	_cleanup_free_ char *ca_abs = ca ? realpath(ca, NULL) : NULL;
	if (ca_abs)
		json_object_set_new(c, "ca", json_string(ca_abs));
	json_object_set_new(clusters, name, c);
	const char *cur = json_string_value(json_object_get(cfg, "current"));
	bool current = !cur || strcmp(cur, name) == 0 || !json_object_get(clusters, cur);
	if (current)
		json_object_set_new(cfg, "current", json_string(name));
	bool saved = client_config_save(cfg, &err) == 0;
	if (!saved)
		printf("  cli:  not written to the CLI's configuration: %s\n", err.text);
	else if (current)
		printf("  cli:  cluster \"%s\" in %s, the current one: tenk works from any "
		       "folder\n",
		       name, path);
	else
		printf("  cli:  cluster \"%s\" in %s (the current one is %s: tenk config "
		       "use-cluster %s)\n",
		       name, path, cur, name);
	json_decref(cfg);
	return saved && current;
}

/* "tenk" where the PATH finds one, else the tenk beside this program. */
static char *cli_path(void)
{
	_cleanup_free_ char *found = tk_which("tenk", NULL);
	if (found)
		return xstrdup("tenk");
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return xstrdup("tenk");
	self[len] = '\0';
	char *slash = strrchr(self, '/');
	return slash ? xasprintf("%.*s/tenk", (int)(slash - self), self) : xstrdup("tenk");
}

static int run_up(const char **v)
{
	struct server_config sc;
	struct agent_config ac;
	const char *cname = v[D_CLUSTER_NAME];
	if (cname && (!model_name_valid(cname) || strlen(cname) >= 64))
		return usage("up",
			     "--cluster-name: \"%s\" is not a name (letters, digits, '.', "
			     "'_', '-')",
			     cname);
	int r = server_cfg("up", v, &sc);
	if (r || (r = agent_cfg("up", v, &ac)))
		return r;
	struct daemon d;
	memset(&d, 0, sizeof(d));
	struct tk_error err;
	if (up_config(sc.data_dir, &err) < 0) {
		log_err("%s", err.text);
		return 1;
	}
	uv_loop_init(&d.loop);
	if (server_create(&d.loop, &sc, &d.server, &err) < 0) {
		log_err("%s", err.text);
		uv_loop_close(&d.loop);
		return 1;
	}
	ac.server_url = server_url(d.server);
	ac.token = server_agent_token(d.server);
	if (!ac.ca_file)
		ac.ca_file = server_ca_file(d.server);
	ac.data_dir = sc.data_dir;
	/* beside DATA, which is the server's alone (0700): the jobs' users
	 * reach their checkpoint folders through the agent's */
	_cleanup_free_ char *work = xasprintf("%s-work", sc.data_dir);
	ac.work_dir = work;
	if (!ac.addr)
		ac.addr = "127.0.0.1";
	uv_loop_init(&d.agent_loop);
	if (agent_create(&d.agent_loop, &ac, &d.agent, &err) < 0) {
		log_err("%s", err.text);
		uv_loop_close(&d.agent_loop);
		server_stop(d.server, NULL, NULL);
		uv_run(&d.loop, UV_RUN_DEFAULT);
		server_destroy(d.server);
		uv_loop_close(&d.loop);
		return 1;
	}
	d.agent_threaded = true;
	printf("tenk is up: %s\n", server_url(d.server));
	printf("  admin token: %s/admin.token\n", sc.data_dir);
	if (server_ca_file(d.server))
		printf("  its CA:      %s (TENK_CA)\n", server_ca_file(d.server));
	/* the web page, logged in by the link's fragment (never sent to a server) */
	_cleanup_free_ char *tokpath = xasprintf("%s/admin.token", sc.data_dir);
	char *tok = NULL;
	if (tk_read_file(tokpath, 4096, &tok, NULL) == 0) {
		tk_strip(tok);
		printf("  web:  %s/#token=%s%s\n", server_url(d.server), tok,
		       server_ca_file(d.server) ? "  (the browser must trust its CA: README)" : "");
	}
	free(tok);
	if (server_local_socket(d.server))
		printf("  on this machine, without TLS (faster): export TENK_SERVER=unix:%s\n",
		       server_local_socket(d.server));
	bool current = up_context(v[D_CLUSTER_NAME] ? v[D_CLUSTER_NAME] : "local", &d, sc.data_dir);
	/* what to type: `tenk` where the PATH has it, else the one beside this
	 * program (make up runs build/tenk) */
	_cleanup_free_ char *cli = cli_path();
	if (!current)
		printf("  try:  export TENK_SERVER=%s TENK_TOKEN=$(cat %s/admin.token)%s%s\n",
		       server_url(d.server), sc.data_dir,
		       server_ca_file(d.server) ? " TENK_CA=" : "",
		       server_ca_file(d.server) ? server_ca_file(d.server) : "");
	printf("  %s  %s submit -- echo hello; %s queue --all\n", current ? "try:" : "    ", cli,
	       cli);
	fflush(stdout);
	return run_loop(&d);
}

static int daemon_main(const struct tk_command *cmd, const struct daemon_spec *dc, int argc,
		       char **argv)
{
	struct tk_option opts[D_MAX];
	for (size_t i = 0; i < dc->nopts; i++)
		opts[i] = all_opts[dc->opts[i]];
	const char *got[D_MAX], *v[D_MAX] = {0};
	char **pos;
	int npos, r;
	struct tk_error err;
	if (tk_opts_parse(opts, dc->nopts, argc, argv, false, got, &pos, &npos, &err) < 0)
		return usage(cmd->name, "%s", err.text);
	if (npos) {
		r = usage(cmd->name, "unexpected argument \"%s\"", pos[0]);
		free(pos);
		return r;
	}
	free(pos);
	for (size_t i = 0; i < dc->nopts; i++)
		v[dc->opts[i]] = got[i];
	if (v[D_HELP]) {
		tk_opts_usage(opts, dc->nopts, "usage: tenk %s [OPTIONS]\n%s.", cmd->name,
			      cmd->summary);
		return 0;
	}
	r = set_log_level(cmd->name, v[D_LOG]);
	if (r)
		return r;
	signal(SIGPIPE, SIG_IGN);
	/* scheduling passes allocate and free the same large arrays over and
	 * over: keep them in the heap rather than map fresh pages each pass */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	/* a server holds a few connections per agent: take every descriptor allowed */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* libcurl (and GnuTLS under it) is set up once, before any thread */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = dc->run(v);
	curl_global_cleanup();
	return r;
}

#define DAEMON(fn, opts, run)                                                                      \
	int fn(const struct tk_command *cmd, int argc, char **argv)                                \
	{                                                                                          \
		static const struct daemon_spec spec = {opts, ARRAY_SIZE(opts), run};              \
		return daemon_main(cmd, &spec, argc, argv);                                        \
	}

DAEMON(daemon_up, up_opts, run_up)
DAEMON(daemon_server, server_opts, run_server)
DAEMON(daemon_agent, agent_opts, run_agent)

/* `tenk backup FILE [--data DIR]`: a consistent copy of the server's store,
 * taken while it runs (on its machine, as its user). */
int daemon_backup(const struct tk_command *cmd, int argc, char **argv)
{
	static const struct tk_option opts[] = {
		{"data", 'd', "DIR", "the server's data folder (default ./tenk-data)"},
		{"store", 0, "FILE|URL",
		 "the cluster's store, where the server's --store named another (default: "
		 "config.json's \"store\", else DATA/tenk.db)"},
		{"help", 'h', NULL, "show this help"},
	};
	const char *v[3];
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, 3, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage(cmd->name, "%s", err.text);
	if (v[2]) {
		free(pos);
		tk_opts_usage(
			opts, 3,
			"usage: tenk backup FILE [--data DIR] [--store FILE]\n%s. To restore: "
			"stop the server, copy FILE to DATA/tenk.db (removing tenk.db-wal and "
			"tenk.db-shm), start it.",
			cmd->summary);
		return 0;
	}
	if (npos != 1) {
		free(pos);
		return usage(cmd->name, "give the file to write, once (tenk backup FILE)");
	}
	const char *data = v[0] ? v[0] : "tenk-data";
	/* the store the server uses: as it finds it (server.c) */
	struct sched_config sc;
	sched_config_default(&sc);
	_cleanup_free_ char *conf_path = xasprintf("%s/config.json", data);
	char *text = NULL;
	if (!v[1] && tk_read_file(conf_path, 1 << 20, &text, NULL) == 0 &&
	    sched_config_load_json(&sc, text, &err) < 0) {
		fprintf(stderr, "tenk backup: %s: %s\n", conf_path, err.text);
		free(text);
		free(pos);
		return 1;
	}
	free(text);
	_cleanup_free_ char *db = v[1]		? xstrdup(v[1])
				  : sc.store[0] ? xstrdup(sc.store)
						: xasprintf("%s/tenk.db", data);
	if (store_kind_of(db) == STORE_POSTGRESQL) {
		fprintf(stderr,
			"tenk backup: the cluster's store is PostgreSQL (%s): tenk backup copies "
			"an SQLite store; back PostgreSQL up with its own tools (pg_dump, or "
			"pg_basebackup with WAL archiving), or, with the servers stopped, tenk "
			"store copy %s FILE\n",
			db, db);
		free(pos);
		return 1;
	}
	const char *out = pos[0];
	int r = access(db, R_OK) < 0 ? -errno : 0;
	if (r < 0)
		fprintf(stderr, "tenk backup: cannot read %s: %s\n", db, strerror(-r));
	else if ((r = store_backup(db, out, &err)) < 0)
		fprintf(stderr, "tenk backup: %s\n", err.text);
	else
		printf("%s: a copy of %s\n", out, db);
	free(pos);
	return r < 0 ? 1 : 0;
}

/* `tenk store copy FROM TO`: the whole state of a stopped cluster from one
 * store into another, empty one (SQLite to PostgreSQL, or back), then both
 * read back and compared row for row. */
int daemon_store(const struct tk_command *cmd, int argc, char **argv)
{
	static const struct tk_option opts[] = {
		{"help", 'h', NULL, "show this help"},
	};
	const char *v[1];
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, 1, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage(cmd->name, "%s", err.text);
	if (v[0]) {
		free(pos);
		tk_opts_usage(opts, 1,
			      "usage: tenk store copy FROM TO\n%s. FROM and TO are each a "
			      "file (DATA/tenk.db) or a PostgreSQL URL "
			      "(postgresql://USER@HOST/DB, its password from PGPASSFILE or "
			      "~/.pgpass). Stop the server first; TO must be empty. Then start "
			      "the server with --store TO.",
			      cmd->summary);
		return 0;
	}
	if (npos != 3 || strcmp(pos[0], "copy") != 0) {
		int r = usage(cmd->name,
			      npos && strcmp(pos[0], "copy") != 0
				      ? "no such action \"%s\" (there is: copy FROM TO)"
				      : "give where from and where to: tenk store copy FROM TO",
			      npos ? pos[0] : "");
		free(pos);
		return r;
	}
	struct store_copy_report rep;
	int64_t t0 = tk_mono_ms();
	int r = store_copy(pos[1], pos[2], &rep, &err);
	if (r < 0) {
		fprintf(stderr, "tenk store: %s\n", err.text);
	} else {
		for (int i = 0; i < rep.ntables; i++)
			printf("%-11s %10lld rows  sha256 %.16s\n", rep.tables[i].name,
			       (long long)rep.tables[i].rows, rep.tables[i].digest);
		printf("copied %lld rows (%s to %s) in %.1f s, every row the same in both\n",
		       (long long)rep.rows, store_kind_name(store_kind_of(pos[1])),
		       store_kind_name(store_kind_of(pos[2])), (double)(tk_mono_ms() - t0) / 1000);
	}
	free(pos);
	return r < 0 ? 1 : 0;
}
