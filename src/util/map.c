/*
 * tk_map: string-keyed open-addressing hash table with linear probing and
 * tombstones. Small and predictable; used for nodes by name and the agent's
 * tasks by key. Keys are borrowed from the values.
 */
#include "util.h"

#include <string.h>

struct tk_map_slot {
	const char *key; /* NULL: empty; TOMB: deleted */
	void *value;
	uint64_t hash;
};

static const char tomb_mark;
#define TOMB (&tomb_mark)

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

void tk_map_init(struct tk_map *m)
{
	memset(m, 0, sizeof(*m));
}

void tk_map_release(struct tk_map *m)
{
	free(m->slots);
	tk_map_init(m);
}

static struct tk_map_slot *find(const struct tk_map *m, const char *key, uint64_t h)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	for (size_t i = h & mask, n = 0; n < m->cap; i = (i + 1) & mask, n++) {
		struct tk_map_slot *s = &m->slots[i];
		if (!s->key)
			return NULL;
		if (s->key != TOMB && s->hash == h && strcmp(s->key, key) == 0)
			return s;
	}
	return NULL;
}

static void rehash(struct tk_map *m, size_t cap)
{
	struct tk_map_slot *old = m->slots;
	size_t oldcap = m->cap;
	m->slots = xcalloc(cap, sizeof(*m->slots));
	m->cap = cap;
	m->used = m->len;
	for (size_t i = 0; i < oldcap; i++) {
		if (!old[i].key || old[i].key == TOMB)
			continue;
		size_t j = old[i].hash & (cap - 1);
		while (m->slots[j].key)
			j = (j + 1) & (cap - 1);
		m->slots[j] = old[i];
	}
	free(old);
}

void *tk_map_get(const struct tk_map *m, const char *key)
{
	struct tk_map_slot *s = find(m, key, hash_str(key));
	return s ? s->value : NULL;
}

void *tk_map_put(struct tk_map *m, const char *key, void *value)
{
	uint64_t h = hash_str(key);
	struct tk_map_slot *s = find(m, key, h);
	if (s) {
		void *old = s->value;
		s->value = value;
		s->key = key;
		return old;
	}
	if ((m->used + 1) * 4 >= m->cap * 3)
		rehash(m, m->cap ? (m->len * 2 >= m->cap / 2 ? m->cap * 2 : m->cap) : 16);
	size_t mask = m->cap - 1;
	size_t i = h & mask;
	while (m->slots[i].key && m->slots[i].key != TOMB)
		i = (i + 1) & mask;
	if (!m->slots[i].key)
		m->used++;
	m->slots[i] = (struct tk_map_slot){key, value, h};
	m->len++;
	return NULL;
}

void *tk_map_del(struct tk_map *m, const char *key)
{
	struct tk_map_slot *s = find(m, key, hash_str(key));
	if (!s)
		return NULL;
	void *old = s->value;
	s->key = TOMB;
	s->value = NULL;
	m->len--;
	return old;
}

bool tk_map_next(const struct tk_map *m, size_t *pos, const char **ret_key, void **ret_value)
{
	for (; *pos < m->cap; (*pos)++) {
		struct tk_map_slot *s = &m->slots[*pos];
		if (s->key && s->key != TOMB) {
			if (ret_key)
				*ret_key = s->key;
			if (ret_value)
				*ret_value = s->value;
			(*pos)++;
			return true;
		}
	}
	return false;
}
