/*
 * The commands of nodes: nodes, drain, resume.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- nodes -------------------------------------------------------------------------------- */

static void accel_summary(json_t *n, char *buf, size_t len, double *ret_used)
{
	struct strbuf sb;
	strbuf_init(&sb);
	json_t *accels = json_object_get(n, "accelerators");
	const char *model = NULL;
	int count = 0;
	double used = 0;
	size_t i;
	json_t *a;
	json_array_foreach (accels, i, a) {
		used += json_number_value(json_object_get(a, "used"));
		if (model && strcmp(model, cli__jstr(a, "model")) == 0) {
			count++;
			continue;
		}
		if (model)
			strbuf_addf(&sb, "%s%dx%s", sb.len ? "," : "", count, model);
		model = cli__jstr(a, "model");
		count = 1;
	}
	if (model)
		strbuf_addf(&sb, "%s%dx%s", sb.len ? "," : "", count, model);
	snprintf(buf, len, "%s", sb.len ? sb.buf : "-");
	strbuf_release(&sb);
	*ret_used = used;
}

static int node_action(struct ctx *c, const char *action, json_t *body);

/* A line of a node's names (its pools, its taints): head, " a, b", tail;
 * nothing when there are none. */
static void print_names(const char *head, json_t *names, const char *tail)
{
	if (!json_array_size(names))
		return;
	size_t k;
	json_t *v;
	printf("%s", head);
	json_array_foreach (names, k, v)
		printf("%s %s", k ? "," : "", json_string_value(v));
	printf("%s\n", tail);
}

/* The node's fabric: an interface a line, then each RDMA port. */
static void print_network(json_t *net)
{
	size_t i;
	json_t *x;
	json_array_foreach (json_object_get(net, "interfaces"), i, x) {
		char speed[32] = "speed not said";
		if (json_object_get(x, "speed_mbps")) {
			long long m = (long long)cli__jint(x, "speed_mbps");
			if (m >= 1000)
				snprintf(speed, sizeof(speed), "%g Gb/s", (double)m / 1000);
			else
				snprintf(speed, sizeof(speed), "%lld Mb/s", m);
		}
		printf("  %s %-10s %s%s, %s, %s, MTU %lld",
		       i ? "         " : "Network: ", cli__jstr(x, "name"), cli__jstr(x, "kind"),
		       json_is_true(json_object_get(x, "virtual")) ? " (virtual)" : "",
		       json_is_true(json_object_get(x, "up")) ? "up" : "down", speed,
		       (long long)cli__jint(x, "mtu"));
		if (*cli__jstr(x, "driver"))
			printf(", %s", cli__jstr(x, "driver"));
		if (*cli__jstr(x, "pci"))
			printf(" at %s", cli__jstr(x, "pci"));
		if (json_object_get(x, "numa"))
			printf(", NUMA %lld", (long long)cli__jint(x, "numa"));
		if (*cli__jstr(x, "rdma"))
			printf(", RDMA %s", cli__jstr(x, "rdma"));
		static const char *const qos[][2] = {
			{"pfc", "PFC"}, {"ecn_np", "ECN np"}, {"ecn_rp", "ECN rp"}};
		for (size_t q = 0; q < sizeof(qos) / sizeof(qos[0]); q++) {
			json_t *prios = json_object_get(x, qos[q][0]), *p;
			size_t k;
			if (!json_is_array(prios))
				continue;
			printf(", %s %s", qos[q][1], json_array_size(prios) ? "on" : "off");
			json_array_foreach (prios, k, p)
				printf("%s%lld", k ? "," : " ", (long long)json_integer_value(p));
		}
		printf("\n");
	}
	json_array_foreach (json_object_get(net, "rdma"), i, x) {
		printf("  %s %s port %lld: %s, %s, %g Gb/s, %lld GIDs",
		       i ? "      " : "RDMA:  ", cli__jstr(x, "device"),
		       (long long)cli__jint(x, "port"),
		       strcmp(cli__jstr(x, "link_layer"), "Ethernet") == 0 ? "RoCE" : "InfiniBand",
		       *cli__jstr(x, "state") ? cli__jstr(x, "state") : "state not said",
		       json_number_value(json_object_get(x, "rate_gbps")),
		       (long long)cli__jint(x, "gids"));
		if (*cli__jstr(x, "pci"))
			printf(" at %s", cli__jstr(x, "pci"));
		if (json_object_get(x, "numa"))
			printf(", NUMA %lld", (long long)cli__jint(x, "numa"));
		printf("\n");
	}
	/* each GPU's place, and the RDMA port nearest it (NCCL_IB_HCA) */
	json_array_foreach (json_object_get(net, "gpus"), i, x) {
		long long shared = cli__jint(x, "shared_bridges");
		printf("  %s GPU %lld at %s",
		       i ? "       " : "Near:  ", (long long)cli__jint(x, "index"),
		       cli__jstr(x, "pci"));
		if (json_object_get(x, "numa"))
			printf(", NUMA %lld", (long long)cli__jint(x, "numa"));
		if (*cli__jstr(x, "hca"))
			printf(": %s, %s", cli__jstr(x, "hca"),
			       shared > 0     ? "behind a PCIe bridge they share"
			       : shared == 0  ? "on the same root complex"
			       : shared == -1 ? "on the same NUMA node"
					      : "nearest, on another socket");
		printf("\n");
	}
}

/* tenk nodes NAME...: each node whole. */
static int show_nodes(struct ctx *c)
{
	int rc = CLI_EXIT_OK;
	json_t *all = json_array();
	for (int i = 0; i < c->npos; i++) {
		_cleanup_free_ char *path = xasprintf("/v1/nodes/%s", c->pos[i]);
		json_t *n;
		struct tk_error err;
		if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &n, NULL, &err) <
		    0) {
			rc = cli__api_error(c, &err);
			continue;
		}
		if (c->json) {
			json_array_append_new(all, n);
			continue;
		}
		printf("Node %s  %s%s%s\n", cli__jstr(n, "name"), cli__jstr(n, "state"),
		       *cli__jstr(n, "reason") ? ": " : "", cli__jstr(n, "reason"));
		printf("  Address:  %s, topology %s, credential %s\n", cli__jstr(n, "addr"),
		       *cli__jstr(n, "topology") ? cli__jstr(n, "topology") : "-",
		       cli__jstr(n, "credential"));
		if (*cli__jstr(n, "domain"))
			printf("  Domain:   %s (its fault domain, widest first)\n",
			       cli__jstr(n, "domain"));
		printf("  CPUs:     %lld of %lld reserved\n", (long long)cli__jint(n, "cpus_used"),
		       (long long)cli__jint(n, "cpus"));
		printf("  Memory:   %lld of %lld MiB reserved\n",
		       (long long)cli__jint(n, "mem_used_mib"), (long long)cli__jint(n, "mem_mib"));
		size_t k;
		json_t *a;
		json_array_foreach (json_object_get(n, "accelerators"), k, a)
			printf("  GPU %lld:    %s, %lld MiB, %g TFLOP/s, NVLink domain %lld, %g in "
			       "use, "
			       "%s\n",
			       (long long)cli__jint(a, "index"), cli__jstr(a, "model"),
			       (long long)cli__jint(a, "mem_mib"),
			       json_number_value(json_object_get(a, "tflops")),
			       (long long)cli__jint(a, "nvlink_domain"),
			       json_number_value(json_object_get(a, "used")), cli__jstr(a, "uuid"));
		printf("  Jobs:    ");
		json_array_foreach (json_object_get(n, "jobs"), k, a)
			printf(" %lld", (long long)json_integer_value(a));
		if (!json_array_size(json_object_get(n, "jobs")))
			printf(" none");
		printf("\n");
		json_t *labels = json_object_get(n, "labels");
		if (json_object_size(labels)) {
			printf("  Labels:  ");
			const char *lk;
			json_t *lv;
			json_object_foreach (labels, lk, lv)
				printf(" %s=%s", lk, json_string_value(lv));
			printf("\n");
		}
		json_t *sj = json_object_get(n, "stack");
		struct node_stack st;
		if (json_is_object(sj) && node_stack_unpack(sj, NULL, &st, &err) == 0) {
			char line[512];
			node_stack_line(&st, line, sizeof(line));
			printf("  Stack:    %s\n", line);
		}
		print_names("  Pools:   ", json_object_get(n, "pools"), "");
		print_names("  Taints:  ", json_object_get(n, "taints"),
			    " (only jobs that --tolerate each)");
		size_t ri;
		json_t *rw;
		json_array_foreach (json_object_get(n, "reservations"), ri, rw) {
			char from[32], to[32];
			cli__fmt_time(cli__jint(rw, "start_ms"), from, sizeof(from));
			cli__fmt_time(cli__jint(rw, "end_ms"), to, sizeof(to));
			printf("  Reserved: %s, %s to %s, %s: %s\n", cli__jstr(rw, "name"), from,
			       to,
			       json_object_get(rw, "users") || *cli__jstr(rw, "queue")
				       ? "for its users"
				       : "maintenance",
			       cli__jstr(rw, "reason"));
		}
		json_t *iso = json_object_get(n, "isolation");
		if (json_is_object(iso)) {
			json_t *un = json_object_get(iso, "unenforced");
			long long v = (long long)cli__jint(iso, "cgroup");
			printf("  Limits:   ");
			if (v)
				printf("cgroup v%lld", v);
			else
				printf("no cgroups");
			if (json_array_size(un)) {
				printf("; not enforced:");
				json_array_foreach (un, k, a)
					printf("%s %s", k ? "," : "", json_string_value(a));
			} else {
				printf("; memory, CPUs, processes and devices enforced");
			}
			printf("\n");
		}
		print_network(json_object_get(n, "network"));
		json_t *v = json_object_get(n, "validation");
		if (json_is_object(v))
			printf("  Validation: %s%s%s\n", cli__jstr(v, "verdict"),
			       *cli__jstr(v, "reason") ? ": " : "", cli__jstr(v, "reason"));
		json_decref(n);
	}
	if (c->json)
		cli__print_json(all);
	json_decref(all);
	return rc;
}

enum { N_YES = O_FIRST_OWN, N_FORMAT };
static const struct tk_option nodes_opts[] = {
	COMMON_OPTS,
	{"yes", 0, NULL, "nodes down: do not ask (a node in fact alive runs its jobs twice)"},
	{"format", 'o', "table|wide|where|stack|json",
	 "wide: each node's accelerators as its agent last read them (busy, hottest, power, "
	 "the health checks they fail); where: how the cluster is carved (fault domain, pools, "
	 "taints, labels); stack: the nodes grouped by software stack, the most common first"},
};

/* A JSON array of strings, or an object's K=V, as "a,b" into sb ("-": none). */
static void words(json_t *v, struct strbuf *sb)
{
	strbuf_reset(sb);
	size_t i;
	json_t *x;
	const char *k;
	json_array_foreach (v, i, x)
		strbuf_addf(sb, "%s%s", sb->len ? "," : "", json_string_value(x));
	json_object_foreach (v, k, x)
		strbuf_addf(sb, "%s%s=%s", sb->len ? "," : "", k, json_string_value(x));
	if (!sb->len)
		strbuf_addstr(sb, "-");
}

/* The `where` table: how each node is placed in the carved cluster, each
 * column as wide as its widest entry (up to 48: a longer one pushes its
 * row's next ones), the labels last. */
static void print_where(json_t *nodes)
{
	enum { NAME, STATE, DOMAIN, POOLS, TAINTS, LABELS, NCOL, MAXW = 48 };
	static const char *const head[NCOL] = {"NAME",	"STATE",  "DOMAIN",
					       "POOLS", "TAINTS", "LABELS"};
	size_t n = json_array_size(nodes);
	struct strbuf *cell = xcalloc(n * NCOL + 1, sizeof(*cell));
	int width[NCOL];
	for (int k = 0; k < NCOL; k++)
		width[k] = (int)strlen(head[k]);
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(nodes, i);
		struct strbuf *row = &cell[i * NCOL];
		for (int k = 0; k < NCOL; k++)
			strbuf_init(&row[k]);
		strbuf_addstr(&row[NAME], cli__jstr(x, "name"));
		strbuf_addstr(&row[STATE], cli__jstr(x, "state"));
		strbuf_addstr(&row[DOMAIN], *cli__jstr(x, "domain") ? cli__jstr(x, "domain") : "-");
		words(json_object_get(x, "pools"), &row[POOLS]);
		words(json_object_get(x, "taints"), &row[TAINTS]);
		words(json_object_get(x, "labels"), &row[LABELS]);
		for (int k = 0; k < LABELS; k++)
			width[k] = MAX(width[k], MIN((int)row[k].len, MAXW));
	}
	for (int k = 0; k < NCOL; k++)
		printf("%-*s%s", k < LABELS ? width[k] : 0, head[k], k < LABELS ? " " : "\n");
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < NCOL; k++) {
			struct strbuf *c = &cell[i * NCOL + k];
			printf("%-*s%s", k < LABELS ? width[k] : 0, c->buf,
			       k < LABELS ? " " : "\n");
			strbuf_release(c);
		}
	free(cell);
}

/* The wide table's accelerator columns of node n: their mean utilisation,
 * the hottest, the power drawn of their limits, and the checks each one
 * fails ("1:pcie"), from the agent's newest beat; "-" where not known. */
static void gpu_columns(json_t *n, char *util, char *temp, char *power, char *health, size_t len)
{
	json_t *gpus = json_object_get(n, "gpus");
	snprintf(util, len, "-");
	snprintf(temp, len, "-");
	snprintf(power, len, "-");
	snprintf(health, len, "-");
	if (!json_array_size(gpus) || strcmp(cli__jstr(n, "state"), "DOWN") == 0)
		return;
	long long usum = 0, un = 0, tmax = -1, w = 0, limit = 0, slowed = 0;
	size_t i, hl = 0;
	json_t *g;
	health[0] = 0;
	json_array_foreach (gpus, i, g) {
		json_t *u = json_object_get(g, "util_pct"), *t = json_object_get(g, "temp_c");
		if (u) {
			usum += json_integer_value(u);
			un++;
		}
		if (t && json_integer_value(t) > tmax)
			tmax = json_integer_value(t);
		w += cli__jint(g, "power_w");
		limit += cli__jint(g, "power_limit_w");
		slowed += json_is_true(json_object_get(g, "slowed"));
		size_t k;
		json_t *f;
		json_array_foreach (json_object_get(g, "failing"), k, f)
			if (hl < len)
				hl += (size_t)snprintf(
					health + hl, len - hl, "%s%lld:%s", hl ? "," : "",
					(long long)cli__jint(g, "index"), json_string_value(f));
	}
	if (un)
		snprintf(util, len, "%lld%%", usum / un);
	if (tmax >= 0)
		snprintf(temp, len, "%lldC", tmax);
	if (limit)
		snprintf(power, len, "%lld/%lld", w, limit);
	if (!health[0])
		snprintf(health, len, slowed ? "%lld slowed" : "ok", slowed);
}

/* tenk nodes history NAME: its failures and what was done about them, oldest
 * first. */
static int node_history(struct ctx *c)
{
	if (c->npos != 2)
		return cli__usage_error(c->cmd, "nodes history: name one node");
	_cleanup_free_ char *path = xasprintf("/v1/nodes/%s", c->pos[1]);
	json_t *n;
	struct tk_error err;
	if (client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, &n, NULL, &err) < 0)
		return cli__api_error(c, &err);
	json_t *h = json_object_get(n, "history");
	if (c->json) {
		cli__print_json(h);
		json_decref(n);
		return CLI_EXIT_OK;
	}
	printf("%-20s %-18s %-8s %s\n", "WHEN", "WHAT", "JOB", "DETAIL");
	size_t i;
	json_t *e;
	json_array_foreach (h, i, e) {
		char when[32], job[24] = "-";
		cli__fmt_time(cli__jint(e, "at_ms"), when, sizeof(when));
		if (cli__jint(e, "job"))
			snprintf(job, sizeof(job), "%lld", (long long)cli__jint(e, "job"));
		printf("%-20s %-18s %-8s %s\n", when, cli__jstr(e, "kind"), job,
		       cli__jstr(e, "detail"));
	}
	if (!json_array_size(h))
		printf("(nothing has happened to %s)\n", c->pos[1]);
	json_decref(n);
	return CLI_EXIT_OK;
}

/* A node's reason, or what it is held idle as: a spare of jobs (--spares)
 * or of the cluster's pool. */
static void spare_reason(json_t *n, char *buf, size_t len)
{
	snprintf(buf, len, "%s", cli__jstr(n, "reason"));
	json_t *of = json_object_get(n, "spare_for");
	size_t at = strlen(buf);
	if (json_is_true(json_object_get(n, "pool_spare"))) {
		snprintf(buf + at, len - at, "%sspare of the cluster's pool", at ? "; " : "");
		if (json_object_get(n, "pool_lent_to")) {
			at = strlen(buf);
			snprintf(buf + at, len - at, ", lent to job %lld",
				 (long long)cli__jint(n, "pool_lent_to"));
		}
	} else if (json_array_size(of)) {
		snprintf(buf + at, len - at, "%sspare for job", at ? "; " : "");
		size_t k;
		json_t *id;
		json_array_foreach (of, k, id) {
			at = strlen(buf);
			snprintf(buf + at, len - at, "%s %lld", k ? "," : "",
				 (long long)json_integer_value(id));
		}
		json_array_foreach (json_object_get(n, "spare_lent_to"), k, id) {
			at = strlen(buf);
			snprintf(buf + at, len - at, "%s %lld", k ? "," : ", lent to job",
				 (long long)json_integer_value(id));
		}
	}
}

/* POST body (taken) to /v1/nodes/NAME/what for tenk nodes label|taint
 * NAME: the node as the server answers it into *ret, or the error said. */
static int node_post(struct ctx *c, const char *what, json_t *body, json_t **ret)
{
	char *path = xasprintf("/v1/nodes/%s/%s", c->pos[1], what);
	struct tk_error err;
	int r = client_call(&c->client, "POST", path, body, CALL_TIMEOUT_MS, ret, NULL, &err);
	free(path);
	json_decref(body);
	return r < 0 ? cli__api_error(c, &err) : CLI_EXIT_OK;
}

/* tenk nodes label NAME KEY=VALUE... KEY-...: an operator's labels set
 * and removed (kubectl label's habit). */
static int node_label(struct ctx *c)
{
	if (c->npos < 3)
		return cli__usage_error(c->cmd, "nodes label NAME KEY=VALUE... KEY-...: name the "
						"node and at least one label to set or remove");
	json_t *set = json_object(), *rm = json_array();
	for (int i = 2; i < c->npos; i++) {
		const char *a = c->pos[i], *eq = strchr(a, '=');
		size_t n = strlen(a);
		if (eq && eq > a) {
			char *k = xstrndup(a, (size_t)(eq - a));
			json_object_set_new(set, k, json_string(eq + 1));
			free(k);
		} else if (!eq && n > 1 && a[n - 1] == '-') {
			json_array_append_new(rm, json_stringn(a, n - 1));
		} else {
			json_decref(set);
			json_decref(rm);
			return cli__usage_error(c->cmd,
						"nodes label: \"%s\": expected KEY=VALUE to set a "
						"label or KEY- to remove one",
						a);
		}
	}
	json_t *body = json_pack("{s:o, s:o}", "set", set, "remove", rm);
	json_t *n;
	int rc = node_post(c, "labels", body, &n);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (c->json) {
		cli__print_json(n);
	} else {
		printf("node %s:", cli__jstr(n, "name"));
		const char *k;
		json_t *v;
		json_object_foreach (json_object_get(n, "labels"), k, v)
			printf(" %s=%s", k, json_string_value(v));
		printf("\n");
	}
	json_decref(n);
	return CLI_EXIT_OK;
}

/* tenk nodes taint NAME TAINT... TAINT-...: taints added and removed. */
static int node_taint(struct ctx *c)
{
	if (c->npos < 3)
		return cli__usage_error(c->cmd,
					"nodes taint NAME TAINT... TAINT-...: name the node "
					"and at least one taint to add or remove");
	json_t *add = json_array(), *rm = json_array();
	for (int i = 2; i < c->npos; i++) {
		size_t n = strlen(c->pos[i]);
		if (n > 1 && c->pos[i][n - 1] == '-')
			json_array_append_new(rm, json_stringn(c->pos[i], n - 1));
		else
			json_array_append_new(add, json_string(c->pos[i]));
	}
	json_t *body = json_pack("{s:o, s:o}", "add", add, "remove", rm);
	json_t *n;
	int rc = node_post(c, "taints", body, &n);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (c->json) {
		cli__print_json(n);
	} else {
		printf("node %s: taints", cli__jstr(n, "name"));
		size_t k;
		json_t *v;
		json_array_foreach (json_object_get(n, "taints"), k, v)
			printf("%s %s", k ? "," : "", json_string_value(v));
		if (!json_array_size(json_object_get(n, "taints")))
			printf(" none");
		printf("\n");
	}
	json_decref(n);
	return CLI_EXIT_OK;
}

/* One group of nodes with one software stack. */
struct stack_group {
	struct node_stack st;
	bool known;
	struct strbuf names;
	int n;
};

static int group_cmp(const void *a, const void *b)
{
	const struct stack_group *x = a, *y = b;
	return y->n - x->n;
}

/* tenk nodes -o stack: the nodes by software stack, the most common first;
 * the fields where a group differs from the first are marked. */
static void print_stacks(json_t *nodes)
{
	size_t nn = json_array_size(nodes), ng = 0;
	struct stack_group *g = xcalloc(nn + 1, sizeof(*g));
	size_t i;
	json_t *n;
	json_array_foreach (nodes, i, n) {
		struct stack_group x = {0};
		struct tk_error err;
		json_t *sj = json_object_get(n, "stack");
		x.known = json_is_object(sj) && node_stack_unpack(sj, NULL, &x.st, &err) == 0;
		size_t k = 0;
		while (k < ng && !(g[k].known == x.known && node_stack_same(&g[k].st, &x.st)))
			k++;
		if (k == ng) {
			g[ng] = x;
			strbuf_init(&g[ng++].names);
		}
		strbuf_addf(&g[k].names, "%s%s", g[k].n ? "," : "", cli__jstr(n, "name"));
		g[k].n++;
	}
	qsort(g, ng, sizeof(*g), group_cmp);
	for (size_t k = 0; k < ng; k++) {
		printf("%s%d node%s: %s\n", k ? "\n" : "", g[k].n, g[k].n == 1 ? "" : "s",
		       g[k].names.buf);
		if (!g[k].known) {
			printf("  (its agent says no stack: older than 0.2.0)\n");
			continue;
		}
		for (int f = 0; f < NODE_STACK_FIELDS; f++) {
			const char *v = node_stack_field(&g[k].st, f);
			bool odd = k && g[0].known && strcmp(v, node_stack_field(&g[0].st, f)) != 0;
			printf("  %-8s %s%s\n", node_stack_field_name(f), *v ? v : "-",
			       odd ? "   <- unlike the most" : "");
		}
	}
	for (size_t k = 0; k < ng; k++)
		strbuf_release(&g[k].names);
	free(g);
}

static int run_nodes(struct ctx *c)
{
	if (c->npos && strcmp(c->pos[0], "history") == 0)
		return node_history(c);
	if (c->npos && strcmp(c->pos[0], "label") == 0)
		return node_label(c);
	if (c->npos && strcmp(c->pos[0], "taint") == 0)
		return node_taint(c);
	if (c->npos && strcmp(c->pos[0], "admit") != 0 && strcmp(c->pos[0], "revoke") != 0 &&
	    strcmp(c->pos[0], "down") != 0)
		return show_nodes(c);
	if (c->npos) {
		/* tenk nodes admit|revoke NAME...: a node's credential; tenk nodes
		 * down NAME...: a silent node is dead, its jobs move */
		const char *what = c->pos[0];
		if (c->npos < 2)
			return cli__usage_error(c->cmd, "nodes %s: name the node(s)", what);
		if (strcmp(what, "down") == 0 && !c->v[N_YES]) {
			if (!isatty(0))
				return cli__usage_error(
					c->cmd,
					"nodes down: a node that is in fact alive would run "
					"its jobs twice; say --yes when you know it is dead");
			fprintf(stderr,
				"A node that is in fact alive would run its jobs twice (on it and "
				"elsewhere).\nIs %s dead (powered off, or its tasks killed)? "
				"[y/N] ",
				c->pos[1]);
			char line[16] = "";
			if (!fgets(line, sizeof(line), stdin) || (line[0] != 'y' && line[0] != 'Y'))
				return CLI_EXIT_ERROR;
		}
		c->pos++;
		c->npos--;
		int rc = node_action(c, what, NULL);
		c->pos--;
		c->npos++;
		return rc;
	}
	const char *fmt = c->v[N_FORMAT] ? c->v[N_FORMAT] : "table";
	if (strcmp(fmt, "table") && strcmp(fmt, "wide") && strcmp(fmt, "where") &&
	    strcmp(fmt, "stack") && strcmp(fmt, "json"))
		return cli__usage_error(
			c->cmd, "--format: table, wide, where, stack or json, got \"%s\"", fmt);
	bool wide = strcmp(fmt, "wide") == 0, where = strcmp(fmt, "where") == 0;
	if (strcmp(fmt, "json") == 0)
		c->json = true;
	json_t *res;
	struct tk_error err;
	if (client_call(&c->client, "GET", "/v1/nodes", NULL, CALL_TIMEOUT_MS, &res, NULL, &err) <
	    0)
		return cli__api_error(c, &err);
	if (c->json) {
		cli__print_json(res);
		json_decref(res);
		return CLI_EXIT_OK;
	}
	if (where) {
		print_where(json_object_get(res, "nodes"));
		json_decref(res);
		return CLI_EXIT_OK;
	}
	if (strcmp(fmt, "stack") == 0) {
		print_stacks(json_object_get(res, "nodes"));
		json_decref(res);
		return CLI_EXIT_OK;
	}
	if (wide)
		printf("%-16s %-11s %-20s %6s %5s %5s %5s %11s %-20s %s\n", "NAME", "STATE",
		       "ACCELERATORS", "USED", "JOBS", "BUSY", "TEMP", "POWER(W)", "GPU HEALTH",
		       "REASON");
	else
		printf("%-16s %-11s %9s %11s %-20s %6s %5s %-18s %s\n", "NAME", "STATE", "CPUS",
		       "MEM(GiB)", "ACCELERATORS", "USED", "JOBS", "VALIDATION", "REASON");
	size_t i;
	json_t *n;
	json_array_foreach (json_object_get(res, "nodes"), i, n) {
		char acc[128], cpus[48], mem[48], val[48] = "-", reason[512];
		spare_reason(n, reason, sizeof(reason));
		double used;
		accel_summary(n, acc, sizeof(acc), &used);
		snprintf(cpus, sizeof(cpus), "%lld/%lld", (long long)cli__jint(n, "cpus_used"),
			 (long long)cli__jint(n, "cpus"));
		snprintf(mem, sizeof(mem), "%lld/%lld",
			 (long long)(cli__jint(n, "mem_used_mib") / 1024),
			 (long long)(cli__jint(n, "mem_mib") / 1024));
		if (wide) {
			char util[128], temp[128], power[128], health[128];
			gpu_columns(n, util, temp, power, health, sizeof(health));
			printf("%-16.16s %-11s %-20.20s %6g %5zu %5s %5s %11s %-20s %s\n",
			       cli__jstr(n, "name"), cli__jstr(n, "state"), acc, used,
			       json_array_size(json_object_get(n, "jobs")), util, temp, power,
			       health, reason);
			continue;
		}
		/* the last validation: its verdict, and the layer that failed */
		json_t *v = json_object_get(n, "validation");
		if (json_is_object(v)) {
			const char *layer = cli__jstr(v, "layer");
			snprintf(val, sizeof(val), "%s%s%s%s", cli__jstr(v, "verdict"),
				 *layer ? " (" : "", layer, *layer ? ")" : "");
		}
		printf("%-16.16s %-11s %9s %11s %-20.20s %6g %5zu %-18s %s\n", cli__jstr(n, "name"),
		       cli__jstr(n, "state"), cpus, mem, acc, used,
		       json_array_size(json_object_get(n, "jobs")), val, reason);
	}
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_nodes, CLI_OPTS(nodes_opts), false, 0, -1, run_nodes)

/* ---- drain, resume ---------------------------------------------------------------------- */

enum { D_REASON = O_FIRST_OWN };
static const struct tk_option drain_opts[] = {
	COMMON_OPTS,
	{"reason", 'r', "TEXT", "why (required; shown in tenk nodes)"},
};

static int node_action(struct ctx *c, const char *action, json_t *body)
{
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < c->npos; i++) {
		char *path = xasprintf("/v1/nodes/%s/%s", c->pos[i], action);
		json_t *n;
		struct tk_error err;
		int r = client_call(&c->client, "POST", path, body, CALL_TIMEOUT_MS, &n, NULL,
				    &err);
		free(path);
		if (r < 0) {
			rc = cli__api_error(c, &err);
			continue;
		}
		if (c->json)
			cli__print_json(n);
		else if (strcmp(action, "admit") == 0 || strcmp(action, "revoke") == 0)
			printf("node %s: credential %s\n", cli__jstr(n, "name"),
			       cli__jstr(n, "credential"));
		else
			printf("node %s: %s\n", cli__jstr(n, "name"), cli__jstr(n, "state"));
		json_decref(n);
	}
	return rc;
}

static int run_drain(struct ctx *c)
{
	if (!c->v[D_REASON] || !*c->v[D_REASON])
		return cli__usage_error(c->cmd,
					"--reason TEXT is required: say why the node is drained");
	json_t *body = json_pack("{s:s}", "reason", c->v[D_REASON]);
	int rc = node_action(c, "drain", body);
	json_decref(body);
	return rc;
}

CLI_COMMAND(cli_drain, CLI_OPTS(drain_opts), false, 1, -1, run_drain)

enum { R_FORCE = O_FIRST_OWN };
static const struct tk_option resume_opts[] = {
	COMMON_OPTS,
	{"force", 0, NULL,
	 "resume a node despite a fault it still reports (it would otherwise be drained again at "
	 "its next heartbeat)"},
};

static int run_resume(struct ctx *c)
{
	return node_action(c, c->v[R_FORCE] ? "resume?force=true" : "resume", NULL);
}

CLI_COMMAND(cli_resume, CLI_OPTS(resume_opts), false, 1, -1, run_resume)

/* ---- images ------------------------------------------------------------------------------ */

enum { I_NODES = O_FIRST_OWN, I_TIMEOUT };
static const struct tk_option images_opts[] = {
	COMMON_OPTS,
	{"nodes", 'w', "LIST", "these nodes (comma-separated; default all)"},
	{"timeout", 0, "TIME", "images pull: how long to wait for the nodes (default 30m)"},
};

/* The nodes' images and pulls, as the server has them. */
static int get_images(struct ctx *c, const char *nodes, json_t **res, struct tk_error *err)
{
	_cleanup_free_ char *path =
		nodes ? xasprintf("/v1/images?nodes=%s", nodes) : xstrdup("/v1/images");
	return client_call(&c->client, "GET", path, NULL, CALL_TIMEOUT_MS, res, NULL, err);
}

static void print_images(json_t *res)
{
	printf("%-16s %-48s %-19s %9s\n", "NODE", "IMAGE", "DIGEST", "SIZE(MiB)");
	size_t i, k;
	json_t *n, *im;
	json_array_foreach (json_object_get(res, "nodes"), i, n) {
		json_t *list = json_object_get(n, "images");
		if (!json_is_array(list)) {
			printf("%-16.16s %s\n", cli__jstr(n, "name"),
			       "(not reported: no podman, or not yet)");
			continue;
		}
		if (!json_array_size(list))
			printf("%-16.16s %s\n", cli__jstr(n, "name"), "(none)");
		json_array_foreach (list, k, im)
			printf("%-16.16s %-48s %-19.19s %9lld\n", cli__jstr(n, "name"),
			       cli__jstr(im, "ref"), cli__jstr(im, "digest"),
			       (long long)cli__jint(im, "size_mib"));
	}
}

/* The pull of ref on node n: "pulling", "done", "failed" (and why). */
static json_t *pull_of(json_t *n, const char *ref)
{
	size_t k;
	json_t *p;
	json_array_foreach (json_object_get(n, "pulls"), k, p)
		if (strcmp(cli__jstr(p, "ref"), ref) == 0)
			return p;
	return NULL;
}

/* `tenk images pull REF --nodes LIST|all`: asks, then waits for every node. */
static int images_pull(struct ctx *c)
{
	if (c->npos != 2)
		return cli__usage_error(c->cmd, "images pull: give one image (tenk images pull REF "
						"--nodes all)");
	const char *ref = c->pos[1];
	if (!c->v[I_NODES])
		return cli__usage_error(c->cmd,
					"images pull: --nodes LIST or --nodes all is required");
	int64_t timeout_s = 1800;
	if (c->v[I_TIMEOUT] &&
	    (tk_parse_duration(c->v[I_TIMEOUT], &timeout_s) < 0 || timeout_s < 1))
		return cli__usage_error(c->cmd,
					"--timeout: expected a duration such as 90s or 30m, "
					"got \"%s\"",
					c->v[I_TIMEOUT]);
	json_t *nodes;
	if (strcmp(c->v[I_NODES], "all") == 0) {
		nodes = json_string("all");
	} else {
		nodes = json_array();
		_cleanup_free_ char *copy = xstrdup(c->v[I_NODES]);
		char *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
			json_array_append_new(nodes, json_string(t));
	}
	json_t *body = json_pack("{s:s, s:o}", "ref", ref, "nodes", nodes);
	json_t *asked;
	struct tk_error err;
	int r = client_call(&c->client, "POST", "/v1/images/pull", body, CALL_TIMEOUT_MS, &asked,
			    NULL, &err);
	json_decref(body);
	if (r < 0)
		return cli__api_error(c, &err);
	struct strbuf names;
	strbuf_init(&names);
	size_t i;
	json_t *v;
	json_array_foreach (json_object_get(asked, "nodes"), i, v)
		strbuf_addf(&names, "%s%s", i ? "," : "", json_string_value(v));
	json_decref(asked);
	int rc = CLI_EXIT_OK;
	int64_t deadline = tk_mono_ms() + timeout_s * 1000;
	json_t *res = NULL;
	for (;;) {
		if (get_images(c, names.buf, &res, &err) < 0) {
			rc = cli__api_error(c, &err);
			break;
		}
		bool all = true;
		json_t *n;
		json_array_foreach (json_object_get(res, "nodes"), i, n) {
			json_t *p = pull_of(n, ref);
			all &= p && strcmp(cli__jstr(p, "state"), "pulling") != 0;
		}
		if (all || tk_mono_ms() >= deadline) {
			json_array_foreach (json_object_get(res, "nodes"), i, n) {
				json_t *p = pull_of(n, ref);
				const char *st = p ? cli__jstr(p, "state") : "pulling";
				if (strcmp(st, "done") != 0)
					rc = CLI_EXIT_ERROR;
				if (!c->json)
					printf("%s: %s%s%s\n", cli__jstr(n, "name"),
					       strcmp(st, "pulling") == 0 ? "still pulling" : st,
					       p && *cli__jstr(p, "detail") ? ": " : "",
					       p ? cli__jstr(p, "detail") : "");
			}
			if (c->json)
				cli__print_json(res);
			break;
		}
		json_decref(res);
		res = NULL;
		usleep(200 * 1000);
	}
	json_decref(res);
	strbuf_release(&names);
	return rc;
}

static int run_images(struct ctx *c)
{
	if (c->npos >= 1 && strcmp(c->pos[0], "pull") == 0)
		return images_pull(c);
	if (c->npos)
		return cli__usage_error(c->cmd,
					"images: unknown action \"%s\" (tenk images [pull REF])",
					c->pos[0]);
	json_t *res;
	struct tk_error err;
	if (get_images(c, c->v[I_NODES], &res, &err) < 0)
		return cli__api_error(c, &err);
	if (c->json)
		cli__print_json(res);
	else
		print_images(res);
	json_decref(res);
	return CLI_EXIT_OK;
}

CLI_COMMAND(cli_images, CLI_OPTS(images_opts), false, 0, 2, run_images)
