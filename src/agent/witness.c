/*
 * The agent's half of witness groups (fence.h; DESIGN.md §5): when the
 * server has answered nothing for a quarter of the node timeout, the agent
 * asks the other members of its witness group, over UDP, whether they hear
 * it. When a strict majority of the group (itself counted) does not, the
 * control plane is what failed and the agent renews its shims' leases
 * itself, a step at a time; otherwise this node is the one cut off and the
 * leases run out as they would without it.
 *
 *   agent ──ask {group, from, nonce}──► member     (each round, every T/32)
 *   agent ◄──tell {group, from, nonce, silent}──
 *
 * Both are signed with HMAC-SHA-256 under the group's key, which only the
 * server hands out (over HTTPS, with the group); a tell must carry the
 * round's fresh nonce, so an old one cannot be replayed. An answer that
 * does not come counts as hearing the server: losing packets can only
 * fence a node, never keep one running that should stop.
 *
 * What a new agent needs before it can reach the server, in an outage, is
 * kept in WORK/witness.json: the group, the node timeout, the endpoint's
 * port, and a bound on when it last heard the server (it may not claim
 * silence earlier than that: the server may hold it to what it heard).
 */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fence/fence.h"

#define WITNESS_FILE "witness.json"
#define WITNESS_DGRAM_MAX 1200

enum witness_said { SAID_TOUCH, SAID_AWAY, SAID_CUT };

struct witness {
	struct agent *a;
	bool have_params;
	struct fence_params p;
	struct wire_lease lease; /* the shims' figures for the same node timeout */
	struct fence_agent fa;
	struct wire_group g;
	int self; /* this node's index in g; -1: not in it (or no group) */
	uv_udp_t udp;
	uv_timer_t timer;
	bool udp_open, timer_open;
	int port;
	char nonce[17];		   /* the round's */
	bool told[WIRE_MAX_GROUP]; /* which members answered it */
	int asked;		   /* how many it asked */
	uint64_t beats;		   /* heartbeats sent (the server takes the newest) */
	int64_t heard_kept_ms;	   /* the bound on fa.heard_ms that the file holds */
	int64_t shims_until_ms;	   /* the shims' lease, as last renewed */
	enum witness_said said;
	char boot_id[64];
};

static void arm(struct witness *w);

/* The figures for node timeout T: the protocol's and the shims' lease. */
static void set_params(struct witness *w, int64_t node_timeout_ms)
{
	w->have_params = true;
	fence_params_of(node_timeout_ms, &w->p);
	wire_lease_of(node_timeout_ms, w->a->cfg.heartbeat_ms, &w->lease);
}

/* ---- the file ---------------------------------------------------------------------- */

static void read_boot_id(char *buf, size_t n)
{
	char *text = NULL;
	buf[0] = '\0';
	if (tk_read_file("/proc/sys/kernel/random/boot_id", 256, &text, NULL) < 0)
		return;
	tk_strip(text);
	snprintf(buf, n, "%s", text);
	free(text);
}

static void save(struct witness *w)
{
	json_t *o = json_pack("{s:s, s:I, s:I, s:i}", "boot_id", w->boot_id, "node_timeout_ms",
			      (json_int_t)(w->have_params ? w->p.node_timeout_ms : 0),
			      "heard_until_ms", (json_int_t)w->heard_kept_ms, "port", w->port);
	if (w->g.n)
		json_object_set_new(o, "group", wire_group_pack(&w->g));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	_cleanup_free_ char *path = xasprintf("%s/%s", w->a->cfg.work_dir, WITNESS_FILE);
	int r = tk_replace_file(path, text, strlen(text), 0600);
	if (r < 0)
		log_warn("cannot keep the witness group in %s: %s", path, strerror(-r));
	free(text);
}

/* What an agent before this one kept, if this host has not restarted since
 * (its monotonic times mean nothing after a reboot). */
static void load(struct witness *w, int64_t now)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", w->a->cfg.work_dir, WITNESS_FILE);
	char *text = NULL;
	if (tk_read_file(path, 64 * 1024, &text, NULL) < 0)
		return;
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	free(text);
	const char *boot = json_string_value(json_object_get(j, "boot_id"));
	if (!j || !boot || strcmp(boot, w->boot_id) != 0) {
		json_decref(j);
		return;
	}
	json_int_t timeout = json_integer_value(json_object_get(j, "node_timeout_ms"));
	json_int_t heard = json_integer_value(json_object_get(j, "heard_until_ms"));
	json_int_t port = json_integer_value(json_object_get(j, "port"));
	struct tk_error err;
	json_t *gj = json_object_get(j, "group");
	if (gj && wire_group_unpack(gj, &w->g, &err) < 0) {
		log_warn("%s: its group is malformed, ignored: %s", path, err.text);
		memset(&w->g, 0, sizeof(w->g));
	}
	if (timeout > 0)
		set_params(w, timeout);
	if (!w->a->cfg.witness_port && port > 0 && port < 65536)
		w->port = (int)port;
	/* what the agent before said it heard, the server may hold this one to */
	if (heard > 0)
		w->fa.heard_ms = heard < now ? heard : now;
	w->heard_kept_ms = heard;
	json_decref(j);
}

/* ---- what the members say to each other ---------------------------------------------- */

static void mac_of(const struct witness *w, const char *text, size_t len, char out[65])
{
	tk_hmac_sha256_hex(w->g.key, strlen(w->g.key), text, len, out);
}

static int member_of(const struct witness *w, const char *name)
{
	for (int i = 0; i < w->g.n; i++)
		if (strcmp(w->g.members[i].node, name) == 0)
			return i;
	return -1;
}

/* Sends msg, signed with the group's key ("MAC JSON"), to `to`. */
static void send_signed(struct witness *w, json_t *msg, const struct sockaddr *to)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	size_t len = strlen(text);
	char mac[65];
	mac_of(w, text, len, mac);
	char buf[WITNESS_DGRAM_MAX];
	int n = snprintf(buf, sizeof(buf), "%s %s", mac, text);
	free(text);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return;
	uv_buf_t b = uv_buf_init(buf, (unsigned)n);
	uv_udp_try_send(&w->udp, &b, 1, to);
}

static void send_to(struct witness *w, const struct wire_peer *to, json_t *msg)
{
	struct sockaddr_storage ss;
	if (uv_ip4_addr(to->addr, to->port, (struct sockaddr_in *)&ss) != 0 &&
	    uv_ip6_addr(to->addr, to->port, (struct sockaddr_in6 *)&ss) != 0)
		return; /* not an address: the member counts as hearing the server */
	send_signed(w, msg, (const struct sockaddr *)&ss);
}

static void round_end(struct witness *w, int64_t now);

static void round_start(struct witness *w, int64_t now)
{
	memset(w->told, 0, sizeof(w->told));
	w->asked = 0;
	if (tk_random_hex(w->nonce, 8) < 0) {
		round_end(w, now); /* no nonce: no answers, no renewal */
		return;
	}
	json_t *ask = json_pack("{s:s, s:s, s:s, s:s}", "t", "ask", "group", w->g.id, "from",
				w->a->inv.name, "nonce", w->nonce);
	for (int i = 0; i < w->g.n; i++)
		if (i != w->self && w->g.members[i].port) {
			send_to(w, &w->g.members[i], ask);
			w->asked++;
		}
	json_decref(ask);
	if (!w->asked)
		round_end(w, now);
}

static void renew_shims(struct witness *w, int64_t until)
{
	struct agent *a = w->a;
	if (until > w->shims_until_ms)
		w->shims_until_ms = until;
	size_t pos = 0;
	void *v;
	while (tk_map_next(&a->groups, &pos, NULL, &v))
		group_renew(v, until);
}

static void clock_of(int64_t mono, char *buf, size_t n)
{
	time_t t = (time_t)((tk_wall_ms() + (mono - tk_mono_ms())) / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, n, "%H:%M:%S", &tm);
}

static void round_end(struct witness *w, int64_t now)
{
	int64_t start = w->fa.round_start_ms;
	int silent = w->fa.silent;
	bool renewed = fence_agent_round_end(&w->fa, &w->p, now);
	long long quiet_s = (long long)((now - w->fa.heard_ms) / 1000);
	if (renewed) {
		/* every task is gone by start + step: the shims stop at that
		 * less their grace */
		renew_shims(w, start + w->p.step_ms - w->lease.fence_grace_ms);
		if (w->said != SAID_AWAY)
			log_warn("no answer from the server for %llds; %d of %d of witness group "
				 "%s have none either: the control plane is away, jobs go on",
				 quiet_s, silent, w->g.n, w->g.id);
		w->said = SAID_AWAY;
		return;
	}
	/* said once, when its tasks are about to stop: a round that begins
	 * as the peers' own silence does is no news */
	if (w->said == SAID_CUT || w->shims_until_ms - now > w->p.quiet_ms / 2)
		return;
	char at[16] = "now";
	if (w->shims_until_ms > now)
		clock_of(w->shims_until_ms, at, sizeof(at));
	log_warn("no answer from the server for %llds; %d of %d of witness group %s hear it: "
		 "this node is cut off; stopping its tasks at %s",
		 quiet_s, w->g.n - silent, w->g.n, w->g.id, at);
	w->said = SAID_CUT;
}

static void on_ask(struct witness *w, const struct sockaddr *from, const char *who,
		   const char *nonce, int64_t now)
{
	int i = member_of(w, who);
	if (i < 0 || i == w->self)
		return;
	bool silent = w->have_params && fence_agent_silent(&w->fa, &w->p, now);
	json_t *tell = json_pack("{s:s, s:s, s:s, s:s, s:b}", "t", "tell", "group", w->g.id, "from",
				 w->a->inv.name, "nonce", nonce, "silent", silent);
	/* answered where the question came from: the asker's endpoint */
	send_signed(w, tell, from);
	json_decref(tell);
}

static void on_tell(struct witness *w, const char *who, const char *nonce, bool silent, int64_t now)
{
	int i = member_of(w, who);
	if (i < 0 || i == w->self || w->fa.round_start_ms == INT64_MIN ||
	    strcmp(nonce, w->nonce) != 0 || w->told[i])
		return;
	w->told[i] = true;
	fence_agent_round_answer(&w->fa, w->fa.round_start_ms, silent);
	if (w->fa.answered - 1 >= w->asked) {
		round_end(w, now);
		arm(w);
	}
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	static char space[WITNESS_DGRAM_MAX + 1];
	(void)h;
	(void)suggested;
	*buf = uv_buf_init(space, WITNESS_DGRAM_MAX);
}

static void recv_cb(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *from,
		    unsigned flags)
{
	struct witness *w = u->data;
	if (nread <= 65 || !from || (flags & UV_UDP_PARTIAL) || !w->g.n)
		return;
	const char *d = buf->base;
	size_t len = (size_t)nread;
	if (d[64] != ' ')
		return;
	char mac[65];
	mac_of(w, d + 65, len - 65, mac);
	/* compared whole, whatever differs first */
	unsigned diff = 0;
	for (int i = 0; i < 64; i++)
		diff |= (unsigned)(mac[i] ^ d[i]);
	if (diff)
		return; /* another group's, or no member's */
	json_t *j = json_loadb(d + 65, len - 65, 0, NULL);
	const char *t = json_string_value(json_object_get(j, "t"));
	const char *group = json_string_value(json_object_get(j, "group"));
	const char *who = json_string_value(json_object_get(j, "from"));
	const char *nonce = json_string_value(json_object_get(j, "nonce"));
	int64_t now = tk_mono_ms();
	if (t && group && who && nonce && strcmp(group, w->g.id) == 0) {
		if (strcmp(t, "ask") == 0)
			on_ask(w, from, who, nonce, now);
		else if (strcmp(t, "tell") == 0)
			on_tell(w, who, nonce, json_is_true(json_object_get(j, "silent")), now);
	}
	json_decref(j);
}

/* ---- time --------------------------------------------------------------------------- */

static void timer_cb(uv_timer_t *t)
{
	struct witness *w = t->data;
	int64_t now = tk_mono_ms();
	if (w->fa.round_start_ms != INT64_MIN && now >= w->fa.round_start_ms + w->p.round_ms)
		round_end(w, now);
	if (fence_agent_tick(&w->fa, &w->p, now))
		round_start(w, now);
	arm(w);
}

/* Wakes when there is something to decide: only with a group this node is
 * in, and the figures. */
static void arm(struct witness *w)
{
	if (!w->timer_open || w->a->stopping)
		return;
	if (!w->have_params || w->self < 0) {
		uv_timer_stop(&w->timer);
		return;
	}
	int64_t now = tk_mono_ms();
	int64_t at = fence_agent_next(&w->fa, &w->p, now);
	uv_timer_start(&w->timer, timer_cb, (uint64_t)(at > now ? at - now : 0), 0);
}

/* ---- the agent's calls ------------------------------------------------------------------ */

/* A UDP socket bound to port (0: any) on every address; its port in
 * *ret_port. Returns the descriptor, or -errno. */
static int bind_port(int port, int *ret_port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	socklen_t len = sizeof(sin);
	if (bind(fd, (const struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	*ret_port = ntohs(sin.sin_port);
	return fd;
}

int agent__witness_open(struct agent *a, struct tk_error *err)
{
	struct witness *w = xcalloc(1, sizeof(*w));
	a->witness = w;
	w->a = a;
	w->self = -1;
	int64_t now = tk_mono_ms();
	fence_agent_init(&w->fa, 0, now);
	read_boot_id(w->boot_id, sizeof(w->boot_id));
	w->port = a->cfg.witness_port;
	load(w, now);
	w->self = member_of(w, a->inv.name);
	w->fa.group_size = w->g.n;
	if (w->self >= 0 && a->groups.len)
		/* the shims an agent before this one renewed hold their own
		 * leases, and one that ran out stays stopped: a round may
		 * renew them as that agent's would have */
		w->fa.lease_until_ms = now + w->p.step_ms;
	int fd = bind_port(w->port, &w->port);
	if (fd < 0 && w->port && !a->cfg.witness_port)
		fd = bind_port(0, &w->port); /* the one it had is taken: any */
	if (fd < 0)
		return tk_errorf(err, fd,
				 "cannot listen for the witness group on UDP port %d: %s "
				 "(--witness-port)",
				 w->port, strerror(-fd));
	uv_udp_init(a->loop, &w->udp);
	w->udp.data = w;
	w->udp_open = true;
	a->open_handles++;
	uv_udp_open(&w->udp, fd);
	uv_udp_recv_start(&w->udp, alloc_cb, recv_cb);
	uv_timer_init(a->loop, &w->timer);
	w->timer.data = w;
	w->timer_open = true;
	a->open_handles++;
	save(w);
	if (w->g.n)
		log_info("witness group %s (%d nodes), as the agent before this one had it; "
			 "asked on UDP port %d",
			 w->g.id, w->g.n, w->port);
	arm(w);
	return 0;
}

void agent__witness_params(struct agent *a, int64_t node_timeout_ms)
{
	struct witness *w = a->witness;
	if (!w || (w->have_params && w->p.node_timeout_ms == node_timeout_ms))
		return;
	set_params(w, node_timeout_ms);
	save(w);
	arm(w);
}

void agent__witness_answered(struct agent *a, int64_t sent_ms, int64_t shims_until_ms)
{
	struct witness *w = a->witness;
	if (!w || !w->have_params)
		return;
	int64_t now = tk_mono_ms();
	if (w->said != SAID_TOUCH)
		log_info("the server answers again after %llds: jobs go on as before",
			 (long long)((now - w->fa.heard_ms) / 1000));
	w->said = SAID_TOUCH;
	fence_agent_answered(&w->fa, &w->p, sent_ms, now);
	if (shims_until_ms > w->shims_until_ms)
		w->shims_until_ms = shims_until_ms;
	/* the file bounds when it last heard: a new agent claims no silence
	 * before that (written before the next beat acknowledges anything) */
	if (w->fa.heard_ms > w->heard_kept_ms - w->p.quiet_ms / 4) {
		w->heard_kept_ms = w->fa.heard_ms + w->p.quiet_ms / 2;
		save(w);
	}
	arm(w);
}

void agent__witness_group(struct agent *a, const struct wire_group *g)
{
	struct witness *w = a->witness;
	if (!w || strcmp(w->g.tag, g->tag) == 0)
		return;
	bool moved = strcmp(w->g.id, g->id) != 0;
	/* a server that started again learns the members' endpoints from
	 * their beats: until then, those this agent knows stand */
	struct wire_group old = w->g;
	w->g = *g;
	for (int i = 0; i < w->g.n; i++) {
		struct wire_peer *p = &w->g.members[i];
		for (int k = 0; k < old.n && !p->port; k++)
			if (strcmp(old.members[k].node, p->node) == 0 &&
			    strcmp(old.members[k].addr, p->addr) == 0)
				p->port = old.members[k].port;
	}
	w->self = member_of(w, a->inv.name);
	w->fa.group_size = g->n;
	w->fa.round_start_ms = INT64_MIN; /* a round under way asked another group */
	save(w);
	if (moved) {
		struct strbuf b;
		strbuf_init(&b);
		for (int i = 0; i < g->n; i++)
			strbuf_addf(&b, "%s%s", i ? ", " : "", g->members[i].node);
		log_info("witness group %s: %s", g->id, b.buf);
		strbuf_release(&b);
	}
	arm(w);
}

void agent__witness_for_heartbeat(struct agent *a, struct wire_heartbeat *m)
{
	struct witness *w = a->witness;
	if (!w)
		return;
	m->witness_port = w->port;
	m->witness_seq = ++w->beats;
	snprintf(m->group_id, sizeof(m->group_id), "%s", w->g.id);
	snprintf(m->group_tag, sizeof(m->group_tag), "%s", w->g.tag);
}

void agent__witness_metrics(struct agent *a, struct strbuf *b)
{
	struct witness *w = a->witness;
	if (!w || !w->have_params)
		return;
	int64_t now = tk_mono_ms();
	struct prom_labels l;
	prom_family(b, "tenk_agent_server_silent_seconds", "gauge",
		    "How long since the server last answered this agent.");
	prom_labels_init(&l);
	prom_label(&l, "node", a->inv.name);
	prom_sample(b, "tenk_agent_server_silent_seconds", &l,
		    (double)(now - w->fa.heard_ms) / 1000.0);
	prom_family(b, "tenk_agent_lease_remaining_seconds", "gauge",
		    "How long the shims' lease holds the node's tasks if nothing renews it.");
	prom_sample(b, "tenk_agent_lease_remaining_seconds", &l,
		    (double)MAX(w->shims_until_ms - now, 0) / 1000.0);
	static const char *const names[] = {[SAID_TOUCH] = "in_touch",
					    [SAID_AWAY] = "control_plane_away",
					    [SAID_CUT] = "cut_off"};
	prom_family(b, "tenk_agent_fence_state", "gauge",
		    "What the agent makes of the server's silence (witness groups): in touch, "
		    "the control plane away (its group hears nothing either: jobs go on), or "
		    "this node cut off (its tasks stop when the lease ends).");
	for (int k = 0; k < 3; k++) {
		prom_labels_init(&l);
		prom_label(&l, "node", a->inv.name);
		prom_label(&l, "state", names[k]);
		prom_sample(b, "tenk_agent_fence_state", &l, w->said == (enum witness_said)k);
	}
}

static void closed(uv_handle_t *h)
{
	struct witness *w = h->data;
	agent_handle_gone(w->a);
}

void agent__witness_close(struct agent *a)
{
	struct witness *w = a->witness;
	if (!w)
		return;
	if (w->timer_open) {
		w->timer_open = false;
		uv_timer_stop(&w->timer);
		uv_close((uv_handle_t *)&w->timer, closed);
	}
	if (w->udp_open) {
		w->udp_open = false;
		uv_udp_recv_stop(&w->udp);
		uv_close((uv_handle_t *)&w->udp, closed);
	}
}

void agent__witness_free(struct agent *a)
{
	free(a->witness);
	a->witness = NULL;
}
