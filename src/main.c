/*
 * tenk: one command for the whole system. This file only dispatches,
 * through one table of commands (as git's git.c does): each row names a
 * command, what it takes and does, and the function that runs it. `tenk
 * help` is generated from the table, and each command gets its own row for
 * its usage lines and --help.
 *
 * It is built twice. `tenk` (TENK_FRONT) holds the commands people type
 * all day and links nothing but libc and jansson, so that one starts in a
 * millisecond; for the daemons and the heavy tools (up, server, agent,
 * backup, store, sim, bench, validate) it execs `tenk-daemon` beside it, the same
 * table built with everything.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "util/util.h"
#ifdef TENK_FRONT
static int run_daemon(const struct tk_command *cmd, int argc, char **argv);
#define DAEMON(fn) run_daemon
#else
#include "daemon.h"
#include "sim/cmd.h"
#include "validate/validate.h"
#define DAEMON(fn) fn
#endif

static int cmd_version(const struct tk_command *cmd, int argc, char **argv);
static int cmd_help(const struct tk_command *cmd, int argc, char **argv);

static const struct tk_command commands[] = {
	{"up", "", "run a server and an agent for this machine (a one-node cluster)",
	 DAEMON(daemon_up)},
	{"server", "", "run the controller", DAEMON(daemon_server)},
	{"agent", "", "run the agent of this node", DAEMON(daemon_agent)},
	{"backup", "FILE", "a consistent copy of the server's store, while it runs",
	 DAEMON(daemon_backup)},
	{"store", "copy FROM TO",
	 "move a cluster between stores (a file, a PostgreSQL URL), checked row for row",
	 DAEMON(daemon_store)},
	{"submit", "[--] COMMAND|SCRIPT [ARGS...]",
	 "submit a job (a script's #TENK and #SBATCH lines set options); prints its id",
	 cli_submit},
	{"run", "[OPTIONS] -- COMMAND [ARGS...]",
	 "submit, stream every task's output here, exit with the job's status", cli_run},
	{"logs", "JOB [-f]", "a job's output, from its nodes (-f: follow it)", cli_logs},
	{"queue", "", "list jobs waiting and running (--all: every job)", cli_queue},
	{"show", "JOB...", "show a job: request, attempts, why it waits", cli_show},
	{"cancel", "[JOB... | FIRST-LAST] [-u USER] [-t STATE] [-n NAME]", "cancel jobs",
	 cli_cancel},
	{"wait", "JOB...", "wait for jobs to end; exits with the first one's status", cli_wait},
	{"hold", "JOB...", "keep waiting jobs from starting", cli_hold},
	{"release", "JOB...", "let held jobs start", cli_release},
	{"requeue", "JOB...", "stop running jobs and put them back in their queue", cli_requeue},
	{"update", "JOB [OPTIONS]", "change a waiting job's request (submit's options)",
	 cli_update},
	{"nodes",
	 "[NAME... | admit|revoke|down NAME... | history NAME | label NAME KEY=VALUE... KEY-... | "
	 "taint NAME TAINT... TAINT-...]",
	 "list nodes, show some, admit a node's new agent, revoke one, say one is dead, list "
	 "what happened to one, set and remove an operator's labels on one, or taint one",
	 cli_nodes},
	{"images", "[pull REF]", "images in the nodes' stores; pull one ahead (--nodes)",
	 cli_images},
	{"drain", "NODE... --reason TEXT", "keep new work off nodes", cli_drain},
	{"resume", "NODE...", "let drained nodes take work again", cli_resume},
	{"queues", "[set NAME]", "list queues: quota, use, borrowed; or set one", cli_queues},
	{"classes", "", "list priority classes", cli_classes},
	{"pools", "", "list node pools: their nodes, accelerators idle, limits, who may use them",
	 cli_pools},
	{"catalogue", "",
	 "accelerator models: memory, peak TFLOP/s, price, weight (units in queues' limits)",
	 cli_catalogue},
	{"reserve", "--nodes LIST --start TIME --duration D --reason TEXT",
	 "keep nodes from a time on: for maintenance (drained then), or for some users or a "
	 "queue",
	 cli_reserve},
	{"reservations", "[delete NAME]", "list the windows in which nodes are kept, or end one",
	 cli_reservations},
	{"users", "[add NAME [--role ROLE] [--unix-user U] | rm NAME]",
	 "list users, add one (prints its token), or remove one", cli_users},
	{"audit", "", "who changed what, when, from where (--since 1h, --user NAME)", cli_audit},
	{"rollout",
	 "create NAME (--image REF | --stack FIELD=VALUE,...) [--canary N --then P% --then all] | "
	 "status [NAME] | pause | resume | abort | rollback NAME",
	 "change the fleet's software in stages: drained, validated, soaked, rolled back by "
	 "itself when a check fails",
	 cli_rollout},
	{"serve",
	 "create NAME [--replicas N] [--port P] [-G N] [--image REF] [--health PATH] -- COMMAND | "
	 "update NAME [--image REF] [-- COMMAND] | apply FILE | ls | show NAME | endpoints NAME | "
	 "scale NAME N | logs NAME | delete NAME",
	 "long-running services: replicas kept live on $PORT, probed, restarted, behind an "
	 "address on every node, updated one at a time",
	 cli_serve},
	{"ckpt", "ls JOB | commit TAG --step N",
	 "a job's committed checkpoints; mark a tag complete (in a job)", cli_ckpt},
	{"acct", "", "one record per attempt: time, GPUs, energy, cost (sacct's habits)", cli_acct},
	{"usage", "", "GPU-hours, cost and energy by queue, user or model (sreport's habits)",
	 cli_usage},
	{"history", "", "write the jobs that ran as a trace for tenk sim", cli_history},
	{"config",
	 "[use-cluster NAME | set-cluster NAME ... | delete-cluster NAME | show | history | apply "
	 "FILE | set KEY VALUE | unset KEY | rollback VERSION]",
	 "the clusters this CLI knows (as kubectl's contexts); the cluster's own configuration, "
	 "versioned",
	 cli_config},
	{"sim", "", "replay a job trace through the scheduler with a virtual clock",
	 DAEMON(sim_main)},
	{"bench", "COLLECTIVE", "measure a collective across ranks (allreduce, allgather, ...)",
	 DAEMON(validate_bench_main)},
	{"validate", "", "check this node, or nodes through the server (--nodes), layer by layer",
	 DAEMON(validate_main)},
	{"version", "", "print tenk's version", cmd_version},
	{"help", "[COMMAND]", "list the commands, or describe one", cmd_help},
};

#ifdef TENK_FRONT
/* The command in tenk-daemon, beside this program: argv[0] is its name. */
static int run_daemon(const struct tk_command *cmd, int argc, char **argv)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "tenk %s: cannot find this program's folder: %s\n", cmd->name,
			strerror(errno));
		return 1;
	}
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	_cleanup_free_ char *daemon = xasprintf("%.*s/tenk-daemon", (int)(slash - self), self);
	char **args = xcalloc((size_t)argc + 2, sizeof(char *));
	args[0] = daemon;
	for (int i = 0; i < argc; i++)
		args[i + 1] = argv[i];
	execv(daemon, args);
	fprintf(stderr, "tenk %s: cannot run %s (installed beside tenk): %s\n", cmd->name, daemon,
		strerror(errno));
	free(args);
	return 1;
}
#endif

static void help(FILE *f)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		strbuf_addf(&sb, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"usage: tenk COMMAND [OPTIONS] [ARGS]\n"
		"tenk %s: a cluster manager for AI compute.\n\ncommands:\n%s\n"
		"`tenk COMMAND --help` describes a command.\n",
		TENK_VERSION, sb.buf);
	strbuf_release(&sb);
}

static int cmd_version(const struct tk_command *cmd, int argc, char **argv)
{
	printf("tenk %s (build %s)\n", TENK_VERSION, tk_build);
	return 0;
}

/* tenk help [COMMAND]: the list, or COMMAND --help */
static int cmd_help(const struct tk_command *cmd, int argc, char **argv)
{
	if (argc < 2) {
		help(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (strcmp(argv[1], commands[i].name) == 0 && &commands[i] != cmd) {
			char *args[] = {argv[1], (char *)"--help", NULL};
			return commands[i].main(&commands[i], 2, args);
		}
	fprintf(stderr, "tenk help: unknown command \"%s\"\n\n", argv[1]);
	help(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		help(stderr);
		return 2;
	}
	const char *name = argv[1];
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
		name = "help";
	else if (strcmp(name, "--version") == 0)
		name = "version";
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (strcmp(name, commands[i].name) != 0)
			continue;
		return commands[i].main(&commands[i], argc - 1, argv + 1);
	}
	fprintf(stderr, "tenk: unknown command \"%s\"\n\n", name);
	help(stderr);
	return 2;
}
