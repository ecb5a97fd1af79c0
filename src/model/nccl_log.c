/*
 * What NCCL's own log says of the transports it chose (NCCL_DEBUG=INFO):
 * for every connection of a channel, a line such as
 *
 *   host:1234:1250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA
 *   host:1234:1250 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
 *   host:1234:1250 [2] NCCL INFO Channel 00/0 : 10[2] -> 9[1] via P2P/IPC/read
 *   host:1234:1250 [1] NCCL INFO Channel 00 : 2[1] -> 0[0] via SHM/direct/direct
 *
 * (older releases: "Ring 00 : 43 -> 44 [receive] via NET/Socket/0"; a
 * network plugin names itself: "via NET/IBext_v8/2"), and once per
 * process "Using network IB" (or Socket, or the plugin's name). "NET/..."
 * connections leave the node; NET/Socket is the one over TCP.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const char *model_nccl_transport_name(enum nccl_transport t)
{
	static const char *const names[] = {
		[NCCL_TR_NET] = "net", [NCCL_TR_SOCKET] = "socket", [NCCL_TR_P2P] = "p2p",
		[NCCL_TR_SHM] = "shm", [NCCL_TR_OTHER] = "other",
	};
	return (unsigned)t < NCCL_TR_MAX ? names[t] : "?";
}

/* The text after "NCCL INFO " in line, or NULL. */
static const char *info_of(const char *line)
{
	const char *p = strstr(line, "NCCL INFO ");
	return p ? p + strlen("NCCL INFO ") : NULL;
}

/* A word of at most n - 1 bytes up to a '/', a space or the end. */
static void word(const char *s, char *out, size_t n)
{
	size_t k = 0;
	while (s[k] && s[k] != '/' && s[k] != ' ' && s[k] != '\n' && s[k] != '\r' && k + 1 < n)
		k++;
	memcpy(out, s, k);
	out[k] = '\0';
}

void model_nccl_log_line(struct nccl_log *l, const char *line)
{
	const char *m = info_of(line);
	if (!m)
		return;
	if (strncmp(m, "Using network ", 14) == 0) {
		word(m + 14, l->network, sizeof(l->network));
		return;
	}
	if (strncmp(m, "NET/IB : No device found", 24) == 0) {
		l->ib_no_device = true;
		return;
	}
	if (strncmp(m, "Channel ", 8) != 0 && strncmp(m, "Ring ", 5) != 0)
		return;
	const char *via = strstr(m, " via ");
	if (!via)
		return;
	via += 5;
	char kind[32], net[32] = "";
	word(via, kind, sizeof(kind));
	enum nccl_transport t = NCCL_TR_OTHER;
	if (strcmp(kind, "NET") == 0 && via[3] == '/') {
		word(via + 4, net, sizeof(net));
		t = strcmp(net, "Socket") == 0 ? NCCL_TR_SOCKET : NCCL_TR_NET;
	} else if (strcmp(kind, "P2P") == 0) {
		t = NCCL_TR_P2P;
	} else if (strcmp(kind, "SHM") == 0) {
		t = NCCL_TR_SHM;
	}
	l->connections[t]++;
	if (t == NCCL_TR_NET && !l->net[0])
		snprintf(l->net, sizeof(l->net), "%s", net);
	if (t == NCCL_TR_SOCKET && !l->socket_line[0]) {
		/* NCCL's own words, from "Channel": what the check quotes */
		size_t k = strcspn(m, "\r\n");
		if (k >= sizeof(l->socket_line))
			k = sizeof(l->socket_line) - 1;
		memcpy(l->socket_line, m, k);
		l->socket_line[k] = '\0';
	}
}

void model_nccl_log_text(struct nccl_log *l, const char *text, size_t len)
{
	char line[512];
	size_t i = 0;
	while (i < len) {
		size_t k = 0;
		while (i + k < len && text[i + k] != '\n')
			k++;
		size_t c = k < sizeof(line) - 1 ? k : sizeof(line) - 1;
		memcpy(line, text + i, c);
		line[c] = '\0';
		model_nccl_log_line(l, line);
		i += k + 1;
	}
}

int model_nccl_log_between_nodes(const struct nccl_log *l)
{
	return l->connections[NCCL_TR_NET] + l->connections[NCCL_TR_SOCKET];
}
