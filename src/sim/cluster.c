/*
 * Cluster descriptions for the simulator: node lists from public traces and
 * tenk's own format, each row checked, models matched to the catalogue.
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

enum format { F_SPOT, F_OPENB, F_TENK };

static int set_model(struct sim_node *n, const struct catalogue *cat, const char *name,
		     bool keep_name)
{
	n->model[0] = '\0';
	if (!*name)
		return 0;
	const struct catalogue_entry *e = catalogue_match(cat, name, 0);
	if (e && keep_name) {
		model_name_sanitize(name, n->model, sizeof(n->model));
		n->tflops = e->tflops;
		n->gpu_mem_mib = e->mem_mib;
	} else if (e) {
		snprintf(n->model, sizeof(n->model), "%s", e->name);
		n->tflops = e->tflops;
		n->gpu_mem_mib = e->mem_mib;
	} else {
		model_name_sanitize(name, n->model, sizeof(n->model));
	}
	return 0;
}

/* A row's labels ("tier=top;fabric=ib") and domain, checked, with the
 * gpu=MODEL label every node has; columns < 0: none given. */
static int labels_and_domain(struct sim_csv *c, int cl, int cd, struct sim_node *n,
			     struct tk_error *err)
{
	char text[MODEL_LABELS_MAX], canon[MODEL_LABELS_MAX];
	snprintf(text, sizeof(text), "%s", cl >= 0 ? c->fields[cl] : "");
	for (char *p = text; *p; p++)
		if (*p == ';')
			*p = ',';
	struct tk_error e;
	if (node_labels_parse(text, canon, sizeof(canon), &e) < 0)
		return tk_errorf(err, -EINVAL, "labels: %s", e.text);
	node_labels_with_gpu(canon, n->gpus ? n->model : NULL, n->labels, sizeof(n->labels));
	if (cd >= 0 && *c->fields[cd]) {
		snprintf(n->domain, sizeof(n->domain), "%s", c->fields[cd]);
		if (!model_domain_valid(n->domain))
			return tk_errorf(err, -EINVAL,
					 "domain: \"%.64s\" is not a fault-domain path (names "
					 "joined by '/', widest first)",
					 c->fields[cd]);
	}
	return 0;
}

int sim_cluster_load(const char *path, const struct catalogue *cat, struct sim_cluster *ret,
		     struct tk_error *err)
{
	struct sim_csv c;
	int r = sim_csv_open(&c, path, err);
	if (r < 0)
		return r;
	enum format fmt;
	int cm, cg, cc, cn, cmem = -1, ct = -1, cl_ = -1, cd = -1;
	if ((cm = sim_csv_column(&c, "gpu_model")) >= 0) {
		fmt = F_SPOT;
		cg = sim_csv_column(&c, "gpu_capacity_num");
		cc = sim_csv_column(&c, "cpu_num");
		cn = sim_csv_column(&c, "node_name");
	} else if ((cn = sim_csv_column(&c, "sn")) >= 0) {
		fmt = F_OPENB;
		cm = sim_csv_column(&c, "model");
		cg = sim_csv_column(&c, "gpu");
		cc = sim_csv_column(&c, "cpu_milli");
		cmem = sim_csv_column(&c, "memory_mib");
	} else {
		fmt = F_TENK;
		cn = sim_csv_column(&c, "name");
		cm = sim_csv_column(&c, "model");
		cg = sim_csv_column(&c, "gpus");
		cc = sim_csv_column(&c, "cpus");
		cmem = sim_csv_column(&c, "mem_mib");
		ct = sim_csv_column(&c, "topology");
		cl_ = sim_csv_column(&c, "labels");
		cd = sim_csv_column(&c, "domain");
	}
	if (cm < 0 || cg < 0 || cc < 0 || cn < 0 || (fmt == F_OPENB && cmem < 0)) {
		sim_csv_close(&c);
		return tk_errorf(
			err, -EINVAL,
			"%s:1: not a node list I know: expected the columns "
			"gpu_model,gpu_capacity_num,cpu_num,node_name or "
			"sn,cpu_milli,memory_mib,gpu,model or name,model,gpus,cpus[,mem_mib,"
			"topology,labels,domain]",
			path);
	}
	struct sim_cluster cl = {0};
	size_t alloc = 0;
	while ((r = sim_csv_next(&c, err)) > 0) {
		if (cl.n == SIM_MAX_NODES) {
			r = tk_errorf(err, -E2BIG, "%s:%d: more than %d nodes", path, c.lineno,
				      SIM_MAX_NODES);
			break;
		}
		xgrow(&cl.nodes, &alloc, (size_t)cl.n + 1, sizeof(*cl.nodes));
		struct sim_node *n = &cl.nodes[cl.n];
		memset(n, 0, sizeof(*n));
		int64_t gpus, cpus, mem = 0;
		if ((r = sim_csv_int(&c, cg, 0, MODEL_MAX_ACCELS, &gpus, err)) < 0 ||
		    (r = sim_csv_int(&c, cc, 0,
				     fmt == F_OPENB ? 1000LL * MODEL_MAX_CPUS : MODEL_MAX_CPUS,
				     &cpus, err)) < 0 ||
		    (cmem >= 0 && (r = sim_csv_int(&c, cmem, 0, MODEL_MAX_MEM_MIB, &mem, err)) < 0))
			break;
		n->gpus = (int)gpus;
		n->cpus = (int)(fmt == F_OPENB ? cpus / 1000 : cpus);
		n->cpu_milli = fmt == F_OPENB ? cpus : cpus * 1000;
		n->mem_mib = mem;
		const char *name = c.fields[cn];
		if (!*name || strlen(name) >= MODEL_NAME_MAX) {
			r = tk_errorf(err, -EINVAL,
				      "%s:%d: column %d (%s): a node name of 1 to %d "
				      "characters, got \"%.40s\"",
				      path, c.lineno, cn + 1, c.header[cn], MODEL_NAME_MAX - 1,
				      name);
			break;
		}
		/* numeric names ("17") become "n17" so they are valid node names */
		if (name[0] >= '0' && name[0] <= '9')
			snprintf(n->name, sizeof(n->name), "n%.*s", MODEL_NAME_MAX - 2, name);
		else
			model_name_sanitize(name, n->name, sizeof(n->name));
		if (n->gpus > 0 && !*c.fields[cm]) {
			r = tk_errorf(err, -EINVAL,
				      "%s:%d: column %d (%s): a node with %d GPUs needs "
				      "a model",
				      path, c.lineno, cm + 1, c.header[cm], n->gpus);
			break;
		}
		set_model(n, cat, n->gpus ? c.fields[cm] : "", fmt == F_OPENB);
		if (ct >= 0)
			snprintf(n->topology, sizeof(n->topology), "%s", c.fields[ct]);
		struct tk_error e;
		if ((r = labels_and_domain(&c, cl_, cd, n, &e)) < 0) {
			tk_errorf(err, r, "%s:%d: %s", path, c.lineno, e.text);
			break;
		}
		cl.gpus += n->gpus;
		cl.n++;
	}
	sim_csv_close(&c);
	if (r < 0) {
		free(cl.nodes);
		return r;
	}
	*ret = cl;
	return 0;
}

void sim_cluster_release(struct sim_cluster *c)
{
	free(c->nodes);
	c->nodes = NULL;
	c->n = c->gpus = 0;
}
