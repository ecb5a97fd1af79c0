/*
 * Topology: each node's path of switches (spine1/leaf07) split into levels,
 * the distinct prefixes at each level numbered in order of node names (so
 * that ids do not depend on node order), and how many switches a set of
 * nodes spans.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- topology -------------------------------------------------------------------- */

/* Splits every node's path into levels and numbers the distinct prefixes at
 * each level, in order of node names, so ids do not depend on node order. */
void sched__topo_init(struct pass *p)
{
	const struct sched_snapshot *s = p->snap;
	int nn = p->nn;
	int depth = 1;
	for (int n = 0; n < nn; n++) {
		const char *t = s->nodes[n].topology;
		int d = 1;
		for (; t && *t; t++)
			if (*t == '/')
				d++;
		depth = MAX(depth, d);
	}
	p->depth = depth;
	p->topo_group = xcalloc((size_t)depth * (size_t)nn + 1, sizeof(int));
	p->ngroups = xcalloc((size_t)depth, sizeof(int));
	/* nodes by name */
	int *byname = p->order;
	for (int n = 0; n < nn; n++)
		byname[n] = n;
	/* insertion of names into a sorted order: qsort on pointers to names */
	const char **names = xcalloc((size_t)nn + 1, sizeof(char *));
	for (int n = 0; n < nn; n++)
		names[n] = s->nodes[n].name;
	qsort(names, (size_t)nn, sizeof(char *), sched__cmp_str);
	struct tk_map byn;
	tk_map_init(&byn);
	for (int n = 0; n < nn; n++)
		tk_map_put(&byn, s->nodes[n].name, (void *)&s->nodes[n]);
	for (int k = 0; k < nn; k++) {
		const struct sched_node *node = tk_map_get(&byn, names[k]);
		byname[k] = (int)(node - s->nodes);
		p->name_rank[byname[k]] = k;
	}
	tk_map_release(&byn);
	free(names);
	struct strbuf sb;
	strbuf_init(&sb);
	for (int level = 0; level < depth; level++) {
		struct tk_map ids;
		tk_map_init(&ids);
		char **keys = xcalloc((size_t)nn + 1, sizeof(char *));
		int nkeys = 0;
		for (int k = 0; k < nn; k++) {
			int n = byname[k];
			const char *t = s->nodes[n].topology ? s->nodes[n].topology : "";
			/* the prefix of level+1 components (or all there are) */
			int comps = 0;
			const char *end = t;
			while (*end) {
				if (*end == '/' && ++comps == level + 1)
					break;
				end++;
			}
			strbuf_reset(&sb);
			strbuf_add(&sb, t, (size_t)(end - t));
			void *v = tk_map_get(&ids, sb.buf);
			int id;
			if (v) {
				id = (int)(intptr_t)v - 1;
			} else {
				id = nkeys;
				keys[nkeys++] = xstrdup(sb.buf);
				tk_map_put(&ids, keys[id], (void *)(intptr_t)(id + 1));
			}
			p->topo_group[level * nn + n] = id;
		}
		p->ngroups[level] = nkeys;
		for (int i = 0; i < nkeys; i++)
			free(keys[i]);
		free(keys);
		tk_map_release(&ids);
	}
	strbuf_release(&sb);
}

size_t sched_domain_prefix(const char *domain, int depth)
{
	size_t i = 0;
	int comps = 0;
	for (; domain && domain[i]; i++)
		if (domain[i] == '/' && ++comps == depth)
			break;
	return i;
}

void sched_job_domains(struct sched_job *j, const struct sched_config *c, const char *spread,
		       const char *within)
{
	int cap = 1, d;
	j->spread_depth = j->spread_max = j->within_depth = 0;
	j->spread = j->within = NULL;
	if ((d = sched_config_domain_rule(c, spread, &cap)) > 0) {
		j->spread_depth = d;
		j->spread_max = cap;
		j->spread = c->domain_levels[d - 1];
	}
	if ((d = sched_config_domain_rule(c, within, NULL)) > 0) {
		j->within_depth = d;
		j->within = c->domain_levels[d - 1];
	}
}

bool sched_domain_same(const char *a, const char *b, int depth)
{
	size_t la = sched_domain_prefix(a, depth), lb = sched_domain_prefix(b, depth);
	return la == lb && (!la || strncmp(a, b, la) == 0);
}

int sched_switches_spanned(const struct sched_node *nodes, const int *idx, int n)
{
	if (n <= 0)
		return 0;
	/* the longest common prefix, in components */
	const char *first = nodes[idx[0]].topology ? nodes[idx[0]].topology : "";
	size_t lcp = strlen(first);
	for (int i = 1; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		size_t k = 0;
		while (k < lcp && t[k] && t[k] == first[k])
			k++;
		lcp = k;
	}
	/* cut back to a whole component */
	bool all_same = true;
	for (int i = 0; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		if (strlen(t) != lcp || strncmp(t, first, lcp) != 0)
			all_same = false;
	}
	if (all_same)
		return 1;
	while (lcp > 0 && first[lcp] != '/')
		lcp--;
	/* every distinct prefix below the common one is a switch, plus the common one */
	struct tk_map seen;
	tk_map_init(&seen);
	char **owned = xcalloc((size_t)n * 8 + 1, sizeof(char *));
	size_t nowned = 0, cap = (size_t)n * 8;
	int count = 0;
	for (int i = 0; i < n; i++) {
		const char *t = nodes[idx[i]].topology ? nodes[idx[i]].topology : "";
		for (size_t k = lcp + 1; k <= strlen(t); k++) {
			if (t[k] != '/' && t[k] != '\0')
				continue;
			char *pre = xstrndup(t, k);
			if (tk_map_get(&seen, pre)) {
				free(pre);
				continue;
			}
			if (nowned == cap) {
				cap *= 2;
				owned = xrealloc(owned, cap * sizeof(char *));
			}
			owned[nowned++] = pre;
			tk_map_put(&seen, pre, pre);
			count++;
		}
	}
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
	free(owned);
	tk_map_release(&seen);
	return count + 1;
}
