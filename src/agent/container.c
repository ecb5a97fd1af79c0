/*
 * A task in a container: what the shim runs for an image job. Each task is
 * one `podman run` (daemonless, so the shim stays its parent) of the image
 * the agent resolved, by its ID, with the host's network and IPC (NCCL and
 * Gloo need them), the owner's uid, gid and groups inside, no capability
 * and no way to gain privileges, its environment from a file only root
 * reads (not the command line, which every user sees), the folders the job
 * named and its checkpoint folder, its devices by CDI name, and its
 * cgroup inside the attempt's, so that the attempt's limits hold it and a
 * kill of the attempt reaches it.
 *
 * Podman is root's; what the job names is checked as its owner: the shim
 * takes the owner's identity as its effective one (saved root) to open the
 * output, enter the folder and look at each folder to mount, so that no
 * mount shows what the owner could not reach on the host.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The shim acts as u (effective ids; root is kept as the saved one) or,
 * with u NULL, as root again. */
static int act_as(const struct shim_user *u)
{
	if (!u) {
		if (setresuid((uid_t)-1, 0, (uid_t)-1) < 0 ||
		    setresgid((gid_t)-1, 0, (gid_t)-1) < 0 || setgroups(0, NULL) < 0)
			return -errno;
		return 0;
	}
	gid_t groups[SHIM_MAX_GROUPS];
	for (int i = 0; i < u->ngroups; i++)
		groups[i] = (gid_t)u->groups[i];
	if (setgroups((size_t)u->ngroups, groups) < 0 ||
	    setresgid((gid_t)-1, (gid_t)u->gid, (gid_t)-1) < 0 ||
	    setresuid((uid_t)-1, (uid_t)u->uid, (uid_t)-1) < 0) {
		int e = errno;
		act_as(NULL);
		return -e;
	}
	return 0;
}

/* The container's name: unique on the host for the node, attempt, task. */
static void ctr_name(const struct shim_plan *p, int rank, char *buf, size_t n)
{
	snprintf(buf, n, "tenk-%s-%lld.%d-%d", p->node[0] ? p->node : "node", (long long)p->job,
		 p->attempt, rank);
}

void ctr_podman_head(const char *podman, const char *root, char ***argv, int *n, size_t *alloc)
{
	shim_strv_push(argv, n, alloc, xstrdup(podman));
	if (root && root[0]) {
		shim_strv_push(argv, n, alloc, xstrdup("--root"));
		shim_strv_push(argv, n, alloc, xasprintf("%s/storage", root));
		shim_strv_push(argv, n, alloc, xstrdup("--runroot"));
		shim_strv_push(argv, n, alloc, xasprintf("%s/run", root));
	}
}

void ctr_podman_said(const char *out, char *buf, size_t n, const char *none)
{
	_cleanup_free_ char *t = xstrdup(out ? out : "");
	tk_strip(t);
	char *last = strrchr(t, '\n');
	const char *msg = last ? last + 1 : t;
	/* catatonit: "ERROR (catatonit:6): failed to exec ..." */
	if (strncmp(msg, "ERROR (catatonit", 16) == 0 && strstr(msg, "): "))
		msg = strstr(msg, "): ") + 3;
	if (strncmp(msg, "Error: ", 7) == 0)
		msg += 7;
	snprintf(buf, n, "%s", *msg ? msg : none);
}

char **ctr_env(const char *conf)
{
	char **env = NULL;
	int n = 0;
	size_t alloc = 0;
	shim_strv_push(
		&env, &n, &alloc,
		xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	shim_strv_push(&env, &n, &alloc, xstrdup("HOME=/root"));
	if (conf && conf[0])
		shim_strv_push(&env, &n, &alloc, xasprintf("CONTAINERS_CONF=%s", conf));
	/* the node's registries and credentials, where its agent was told */
	static const char *const pass[] = {"CONTAINERS_REGISTRIES_CONF", "REGISTRY_AUTH_FILE",
					   "CONTAINERS_STORAGE_CONF"};
	for (size_t i = 0; i < ARRAY_SIZE(pass); i++) {
		const char *v = getenv(pass[i]);
		if (v && *v)
			shim_strv_push(&env, &n, &alloc, xasprintf("%s=%s", pass[i], v));
	}
	shim_strv_push(&env, &n, &alloc, NULL);
	return env;
}

/* Where task rank's mount i is bound for podman. */
static void stage_path(const char *dir, int rank, int i, char *buf, size_t n)
{
	snprintf(buf, n, "%s/mnt.%d.%d", dir, rank, i);
}

/* Is the task's folder one a mount shows (then it starts there)? */
static bool shown(const struct shim_container *c, const char *cwd)
{
	for (int i = 0; i < c->nmounts; i++) {
		struct mount_spec m;
		struct tk_error err;
		if (model_mount_parse(c->mounts[i], false, &m, &err) < 0)
			continue;
		size_t k = strlen(m.dst);
		if (strcmp(m.src, m.dst) == 0 && strncmp(cwd, m.dst, k) == 0 &&
		    (cwd[k] == '\0' || cwd[k] == '/'))
			return true;
	}
	return false;
}

char **ctr_argv(const struct shim_plan *p, const struct cgroup *cg, const struct shim_task *t,
		const char *dir, const char *env_file)
{
	const struct shim_container *c = p->ctr;
	char **argv = NULL;
	int n = 0;
	size_t alloc = 0;
	char name[MODEL_NAME_MAX + 64];
	ctr_name(p, t->rank, name, sizeof(name));
	ctr_podman_head(c->podman, c->root, &argv, &n, &alloc);
	static const char *const fixed[] = {
		"--cgroup-manager",
		"cgroupfs",
		"run",
		"--rm",
		"--replace",
		"--init",
		"--pull",
		"never",
		"--log-driver",
		"none",
		"--network",
		"host",
		"--ipc",
		"host",
		"--cap-drop",
		"all",
		"--security-opt",
		"no-new-privileges",
		"--name",
	};
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		shim_strv_push(&argv, &n, &alloc, xstrdup(fixed[i]));
	shim_strv_push(&argv, &n, &alloc, xstrdup(name));
	if (p->as_user) {
		shim_strv_push(&argv, &n, &alloc, xstrdup("--user"));
		shim_strv_push(&argv, &n, &alloc, xasprintf("%u:%u", p->user.uid, p->user.gid));
		for (int i = 0; i < p->user.ngroups; i++)
			if (p->user.groups[i] != p->user.gid) {
				shim_strv_push(&argv, &n, &alloc, xstrdup("--group-add"));
				shim_strv_push(&argv, &n, &alloc,
					       xasprintf("%u", p->user.groups[i]));
			}
	}
	if (cg->version && cg->rel) {
		shim_strv_push(&argv, &n, &alloc, xstrdup("--cgroup-parent"));
		shim_strv_push(&argv, &n, &alloc, xstrdup(cg->rel));
	}
	shim_strv_push(&argv, &n, &alloc, xstrdup("--env-file"));
	shim_strv_push(&argv, &n, &alloc, xstrdup(env_file));
	for (int i = 0; i < c->nmounts; i++) {
		struct mount_spec m;
		struct tk_error err;
		if (model_mount_parse(c->mounts[i], false, &m, &err) < 0)
			continue; /* (ctr_prepare refused it) */
		char src[PATH_MAX];
		if (p->as_user)
			stage_path(dir, t->rank, i, src, sizeof(src));
		else
			snprintf(src, sizeof(src), "%s", m.src);
		shim_strv_push(&argv, &n, &alloc, xstrdup("--volume"));
		/* always SRC:DST: podman takes a lone path for a new, empty volume */
		shim_strv_push(&argv, &n, &alloc,
			       xasprintf("%s:%s%s", src, m.dst, m.ro ? ":ro" : ""));
	}
	for (int i = 0; i < t->ncdi; i++) {
		shim_strv_push(&argv, &n, &alloc, xstrdup("--device"));
		shim_strv_push(&argv, &n, &alloc, xstrdup(t->cdi[i]));
	}
	shim_strv_push(&argv, &n, &alloc, xstrdup("--workdir"));
	shim_strv_push(&argv, &n, &alloc, xstrdup(shown(c, t->cwd) ? t->cwd : "/"));
	shim_strv_push(&argv, &n, &alloc, xstrdup(c->image));
	for (int i = 0; i < t->argc; i++)
		shim_strv_push(&argv, &n, &alloc, xstrdup(t->argv[i]));
	shim_strv_push(&argv, &n, &alloc, NULL);
	return argv;
}

int ctr_env_file(const char *path, const struct shim_task *t, char *why, size_t n)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (int i = 0; i < t->nenv; i++) {
		if (strchr(t->env[i], '\n')) {
			snprintf(why, n,
				 "env %.*s: a value with a newline cannot go into a container",
				 (int)(strchr(t->env[i], '=') - t->env[i]), t->env[i]);
			strbuf_release(&sb);
			return -EINVAL;
		}
		strbuf_addf(&sb, "%s\n", t->env[i]);
	}
	int r = tk_replace_file(path, sb.buf, sb.len, 0600);
	strbuf_release(&sb);
	if (r < 0)
		snprintf(why, n, "cannot write %s: %s", path, strerror(-r));
	return r;
}

/* Binds what fd is (a folder or a file, opened as its owner) on a place
 * of its kind at path, private to this host's namespace. */
static int stage(int fd, const char *path)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -errno;
	} else {
		int f = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (f < 0)
			return -errno;
		close(f);
	}
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (mount(proc, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -errno;
	/* its mounts and unmounts go nowhere else */
	mount(NULL, path, NULL, MS_PRIVATE | MS_REC, NULL);
	return 0;
}

void ctr_unstage(const char *dir, int rank)
{
	DIR *d = opendir(dir);
	char prefix[32];
	int k = rank < 0 ? snprintf(prefix, sizeof(prefix), "mnt.")
			 : snprintf(prefix, sizeof(prefix), "mnt.%d.", rank);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (strncmp(e->d_name, prefix, (size_t)k) != 0)
			continue;
		_cleanup_free_ char *path = xasprintf("%s/%s", dir, e->d_name);
		/* a mount over a mount: each goes (bounded) */
		for (int i = 0; i < 8 && umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++)
			;
		/* only an empty place goes: rmdir never empties a folder, and a
		 * place still mounted is busy */
		if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0 && errno == ENOTDIR)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
}

int ctr_prepare(const struct shim_plan *p, const struct shim_task *t, const char *dir, int *ret_out,
		char *why, size_t n)
{
	*ret_out = -1;
	int r = p->as_user ? act_as(&p->user) : 0;
	if (r < 0) {
		snprintf(why, n, "cannot act as user %s: %s", p->user.name, strerror(-r));
		return r;
	}
	struct stat st;
	int out = -1, nfds = p->ctr->nmounts;
	int *fds = xcalloc((size_t)MAX(nfds, 1), sizeof(int));
	for (int i = 0; i < nfds; i++)
		fds[i] = -1;
	r = 0;
	for (int i = 0; i < nfds && r == 0; i++) {
		struct mount_spec m;
		struct tk_error err;
		if (model_mount_parse(p->ctr->mounts[i], false, &m, &err) < 0) {
			r = -EINVAL;
			snprintf(why, n, "cannot mount %s: %s", p->ctr->mounts[i], err.text);
		} else if ((fds[i] = open(m.src, O_PATH | O_CLOEXEC)) < 0) {
			/* what is opened here, as the owner, is what is mounted */
			r = -errno;
			snprintf(why, n, "cannot mount %s: %s", m.src, strerror(errno));
		}
	}
	if (r == 0 && (stat(t->cwd, &st) < 0 || access(t->cwd, X_OK) < 0)) {
		r = -errno;
		snprintf(why, n, "cannot enter folder %s: %s", t->cwd, strerror(errno));
	}
	if (r == 0) {
		/* read back when podman fails, to say what it said */
		out = shim_output_open(t->output, true, why, n);
		if (out < 0)
			r = out;
	}
	int back = p->as_user ? act_as(NULL) : 0;
	if (back < 0) {
		/* the shim could not be root again: it cannot go on safely */
		log_err("cannot become root again: %s", strerror(-back));
		_exit(127);
	}
	for (int i = 0; i < nfds && r == 0 && p->as_user; i++) {
		char path[PATH_MAX];
		stage_path(dir, t->rank, i, path, sizeof(path));
		if ((r = stage(fds[i], path)) < 0) {
			struct mount_spec m;
			struct tk_error err;
			model_mount_parse(p->ctr->mounts[i], false, &m, &err);
			snprintf(why, n, "cannot mount %s: binding it on %s: %s", m.src, path,
				 strerror(-r));
		}
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	if (r < 0) {
		ctr_unstage(dir, t->rank);
		if (out >= 0)
			close(out);
		out = -1;
	}
	*ret_out = out;
	return r;
}

bool ctr_failure(int out_fd, int code, char *detail, size_t n)
{
	/* Podman: 125 it failed, 126 the command cannot run, 127 none such;
	 * the init in front of the command (catatonit) 1 when it cannot exec */
	if (code != 1 && code != 125 && code != 126 && code != 127)
		return false;
	char tail[1024] = "";
	struct stat st;
	if (out_fd >= 0 && fstat(out_fd, &st) == 0 && S_ISREG(st.st_mode)) {
		off_t from = st.st_size > (off_t)sizeof(tail) - 1
				     ? st.st_size - (off_t)sizeof(tail) + 1
				     : 0;
		ssize_t k = pread(out_fd, tail, sizeof(tail) - 1, from);
		tail[k > 0 ? k : 0] = '\0';
	}
	tk_strip(tail);
	const char *last = strrchr(tail, '\n');
	bool init = strncmp(last ? last + 1 : tail, "ERROR (catatonit", 16) == 0;
	if (code == 1 && !init)
		return false; /* the command's own exit */
	char said[sizeof(tail)];
	ctr_podman_said(tail, said, sizeof(said), "no message");
	snprintf(detail, n, "%s%s", code == 125 ? "podman: " : "", said);
	return code == 125 || init;
}

void ctr_remove(const struct shim_plan *p, int rank)
{
	char name[MODEL_NAME_MAX + 64];
	ctr_name(p, rank, name, sizeof(name));
	char **argv = NULL;
	int n = 0;
	size_t alloc = 0;
	ctr_podman_head(p->ctr->podman, p->ctr->root, &argv, &n, &alloc);
	static const char *const rm[] = {"rm", "--force", "--ignore", "--time", "0"};
	for (size_t i = 0; i < ARRAY_SIZE(rm); i++)
		shim_strv_push(&argv, &n, &alloc, xstrdup(rm[i]));
	shim_strv_push(&argv, &n, &alloc, xstrdup(name));
	shim_strv_push(&argv, &n, &alloc, NULL);
	char **env = ctr_env(p->ctr->conf);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execve(argv[0], argv, env);
		_exit(127);
	}
	/* the shim's SIGCHLD reaps it; a task it is not */
	shim_strv_release(argv);
	shim_strv_release(env);
}

void shim_strv_push(char ***v, int *n, size_t *alloc, char *s)
{
	xgrow(v, alloc, (size_t)*n + 1, sizeof(char *));
	(*v)[(*n)++] = s;
}

void shim_strv_release(char **v)
{
	for (int i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}
