/*
 * tenk validate: one node, bottom-up, a verdict per layer; it stops at the
 * first failing layer unless --all, because what fails above usually has
 * its cause below.
 *
 * Thresholds: a floor per check (what no healthy machine of any size does
 * worse than), raised to 95% of a stored baseline (--baseline FILE, written
 * by --save-baseline FILE on a machine known good).
 */
#include "validate.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { O_ALL, O_JSON, O_SAVE, O_BASE, O_DIR, O_QUICK, O_LAYERS, O_HELP, O_N };

static const struct tk_option opts[] = {
	{"all", 0, NULL, "run every layer even after one fails"},
	{"json", 0, NULL, "print the checks as JSON"},
	{"save-baseline", 0, "FILE", "write this run's figures to FILE (a machine known good)"},
	{"baseline", 0, "FILE", "hold figures to 95% of those in FILE"},
	{"dir", 0, "DIR", "where the storage checks write (default $TMPDIR or /tmp)"},
	{"quick", 0, NULL, "smaller sizes: seconds, not minutes"},
	{"layers", 0, "LIST", "only these layers, e.g. system,compute"},
	{"help", 'h', NULL, "show this help"},
};

static const char *const layers[] = {"system", "compute", "memory", "interconnect", "storage",
				     "workload"};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "tenk validate: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(see tenk validate --help)\n");
	return 2;
}

static const char *verdict_name(enum vverdict v)
{
	return v == V_PASS ? "pass" : v == V_FAIL ? "FAIL" : "skip";
}

/* The in-node collectives meet on loopback: a port the kernel says is free. */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int port = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port ? port : 20000 + (int)(getpid() % 20000);
}

static void progress(int i, int n, const char *what)
{
	if (!isatty(2))
		return;
	int w = 30, done = n ? i * w / n : w;
	fprintf(stderr, "\r[");
	for (int k = 0; k < w; k++)
		fputc(k < done ? '#' : ' ', stderr);
	fprintf(stderr, "] %d/%d %-24s", i, n, what);
	if (i == n)
		fprintf(stderr, "\n");
	fflush(stderr);
}

static double baseline_of(json_t *base, const char *name)
{
	json_t *v = json_object_get(json_object_get(base, "checks"), name);
	return json_is_number(v) ? json_number_value(v) : 0;
}

int validate_main(int argc, char **argv)
{
	const char *v[O_N] = {0};
	char **pos;
	int npos;
	struct tk_error err;
	if (tk_opts_parse(opts, O_N, argc, argv, false, v, &pos, &npos, &err) < 0)
		return usage("%s", err.text);
	free(pos);
	if (npos)
		return usage("unexpected argument");
	if (v[O_HELP]) {
		struct strbuf sb;
		strbuf_init(&sb);
		tk_opts_help(opts, O_N, &sb);
		printf("usage: tenk validate [OPTIONS]\nChecks this node layer by layer (system, "
		       "compute, memory, interconnect,\nstorage, workload): each check prints its "
		       "figure, its threshold and a verdict.\n\noptions:\n%s",
		       sb.buf);
		strbuf_release(&sb);
		return 0;
	}
	bool want[6] = {true, true, true, true, true, true};
	if (v[O_LAYERS]) {
		memset(want, 0, sizeof(want));
		char buf[256], *save = NULL;
		snprintf(buf, sizeof(buf), "%s", v[O_LAYERS]);
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			int k = -1;
			for (int i = 0; i < 6; i++)
				if (strcmp(t, layers[i]) == 0)
					k = i;
			if (k < 0)
				return usage("--layers: \"%s\" is not one of system, compute, memory, "
					     "interconnect, storage, workload",
					     t);
			want[k] = true;
		}
	}
	json_t *base = NULL;
	if (v[O_BASE]) {
		json_error_t je;
		base = json_load_file(v[O_BASE], 0, &je);
		if (!base || !json_is_object(json_object_get(base, "checks"))) {
			fprintf(stderr, "tenk validate: %s: %s\n", v[O_BASE],
				base ? "no \"checks\" object" : je.text);
			json_decref(base);
			return 1;
		}
	}
	const char *dir = v[O_DIR] ? v[O_DIR] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	bool quick = v[O_QUICK] != NULL;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = (int)MAX(1, MIN(ncpu, 64));
	struct vcheck checks[16];
	int n = 0, port = free_port();
	bool failed = false;
	int nlayers = 0;
	for (int l = 0; l < 6; l++)
		nlayers += want[l];
	int done_layers = 0;
	for (int l = 0; l < 6 && !(failed && !v[O_ALL]); l++) {
		if (!want[l])
			continue;
		progress(done_layers, nlayers, layers[l]);
		int first = n;
		switch (l) {
		case 0:
			check_gpu_stack(&checks[n++]);
			check_shm(&checks[n++], 256);
			check_nofile(&checks[n++], 4096);
			break;
		case 1:
			check_cpu_gemm(&checks[n], threads, quick ? 256 : 768, quick ? 2 : 4);
			vcheck_judge(&checks[n++], 0.2, "floor");
			check_gpu_gemm(&checks[n++]);
			break;
		case 2:
			check_host_memory(&checks[n], threads, quick ? 96 : 768);
			vcheck_judge(&checks[n++], 0.5, "floor");
			break;
		case 3:
			check_allreduce_local(&checks[n], MAX(2, MIN(threads, 8)),
					      quick ? (4u << 20) : (64u << 20), port);
			vcheck_judge(&checks[n++], 0.05, "floor");
			break;
		case 4:
			check_storage(&checks[n], &checks[n + 1], dir, MIN(threads, 4), quick ? 16 : 256);
			vcheck_judge(&checks[n], 5, "floor");
			vcheck_judge(&checks[n + 1], 5, "floor");
			n += 2;
			break;
		case 5:
			check_workload(&checks[n], MAX(2, MIN(threads, 4)), free_port());
			vcheck_judge(&checks[n++], 1, "floor");
			break;
		}
		/* a stored baseline raises the bar to 95% of its figure */
		for (int i = first; i < n && base; i++) {
			struct vcheck *c = &checks[i];
			double b = baseline_of(base, c->name);
			if (c->verdict != V_SKIP && b > 0 && c->higher_is_better &&
			    0.95 * b > c->threshold) {
				enum vverdict was = c->verdict;
				c->verdict = V_PASS;
				vcheck_judge(c, 0.95 * b, "95% of the baseline");
				if (was == V_FAIL)
					c->verdict = V_FAIL;
			}
		}
		for (int i = first; i < n; i++)
			failed |= checks[i].verdict == V_FAIL;
		done_layers++;
	}
	progress(nlayers, nlayers, "done");
	json_decref(base);
	if (v[O_JSON]) {
		json_t *arr = json_array();
		for (int i = 0; i < n; i++) {
			const struct vcheck *c = &checks[i];
			json_array_append_new(
				arr, json_pack("{s:s, s:s, s:f, s:s, s:f, s:s, s:s, s:s}", "layer",
					       c->layer, "check", c->name, "figure", c->figure, "unit",
					       c->unit, "threshold", c->threshold, "threshold_from",
					       c->threshold_from, "verdict", verdict_name(c->verdict),
					       "detail", c->detail));
		}
		json_t *o = json_pack("{s:s, s:o}", "verdict", failed ? "fail" : "pass", "checks", arr);
		char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		puts(text);
		free(text);
		json_decref(o);
	} else {
		printf("%-13s %-18s %12s %-8s %12s  %-7s %s\n", "LAYER", "CHECK", "FIGURE", "UNIT",
		       "THRESHOLD", "VERDICT", "DETAIL");
		for (int i = 0; i < n; i++) {
			const struct vcheck *c = &checks[i];
			char th[32] = "-";
			if (c->threshold_from[0])
				snprintf(th, sizeof(th), "%s%.4g", c->higher_is_better ? ">= " : "<= ",
					 c->threshold);
			char fig[32];
			snprintf(fig, sizeof(fig), c->figure >= 1000 ? "%.0f" : "%.4g", c->figure);
			printf("%-13s %-18s %12s %-8s %12s  %-7s %s\n", c->layer, c->name, fig, c->unit,
			       th, verdict_name(c->verdict), c->detail);
		}
		printf("verdict: %s\n", failed ? "FAIL" : "pass");
	}
	if (v[O_SAVE]) {
		json_t *figs = json_object();
		for (int i = 0; i < n; i++)
			if (checks[i].verdict == V_PASS)
				json_object_set_new(figs, checks[i].name, json_real(checks[i].figure));
		json_t *o = json_pack("{s:o}", "checks", figs);
		if (json_dump_file(o, v[O_SAVE], JSON_INDENT(2)) < 0) {
			fprintf(stderr, "tenk validate: cannot write %s\n", v[O_SAVE]);
			json_decref(o);
			return 1;
		}
		json_decref(o);
	}
	return failed ? 1 : 0;
}
