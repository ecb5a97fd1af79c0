/*
 * The store's public calls, dispatched to the implementation that opened
 * it (sqlite.c, pg.c); the batch every implementation applies; and
 * store_copy, which moves a cluster from one kind of store to the other.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

/* ---- the tables, column by column, as both schemas have them ------------------------- */

const struct table_desc store_tables[T_MAX] = {
	[T_META] = {"meta", "key", 2, {"key", "value"}, {COL_TEXT, COL_TEXT}},
	[T_JOBS] = {"jobs",
		    "id",
		    5,
		    {"id", "state", "owner", "settled_ms", "doc"},
		    {COL_INT, COL_TEXT, COL_TEXT, COL_INT, COL_TEXT}},
	[T_NODES] = {"nodes", "name", 2, {"name", "doc"}, {COL_TEXT, COL_TEXT}},
	[T_QUEUES] = {"queues", "name", 2, {"name", "doc"}, {COL_TEXT, COL_TEXT}},
	[T_USERS] = {"users", "name", 2, {"name", "doc"}, {COL_TEXT, COL_TEXT}},
	[T_QUARANTINE] = {"quarantine",
			  "seq",
			  6,
			  {"seq", "kind", "key", "doc", "reason", "at_ms"},
			  {COL_INT, COL_TEXT, COL_TEXT, COL_TEXT_NULL, COL_TEXT, COL_INT},
			  true},
	[T_AUDIT] = {"audit",
		     "seq",
		     4,
		     {"seq", "at_ms", "who", "doc"},
		     {COL_INT, COL_INT, COL_TEXT, COL_TEXT},
		     true},
	[T_ACCT] = {"acct",
		    "key",
		    14,
		    {"key", "owner", "queue", "state", "model", "start_ms", "end_ms", "gpu_hours",
		     "busy_hours", "cost", "energy_j", "doc", "good_hours", "service"},
		    {COL_INT, COL_TEXT, COL_TEXT, COL_TEXT, COL_TEXT, COL_INT, COL_INT, COL_REAL,
		     COL_REAL, COL_REAL, COL_REAL, COL_TEXT, COL_REAL, COL_TEXT}},
	[T_CONFIG] = {"config",
		      "version",
		      4,
		      {"version", "at_ms", "who", "doc"},
		      {COL_INT, COL_INT, COL_TEXT, COL_TEXT}},
};

void store_table_select(struct strbuf *sb, const struct table_desc *t)
{
	strbuf_addstr(sb, "SELECT ");
	for (int i = 0; i < t->ncols; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", t->cols[i]);
	strbuf_addf(sb, " FROM %s ORDER BY %s", t->name, t->key);
}

void store_table_insert(struct strbuf *sb, const struct table_desc *t, char mark)
{
	strbuf_addf(sb, "INSERT INTO %s (", t->name);
	for (int i = 0; i < t->ncols; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "", t->cols[i]);
	strbuf_addstr(sb, ") VALUES (");
	for (int i = 0; i < t->ncols; i++)
		strbuf_addf(sb, "%s%c%d", i ? ", " : "", mark, i + 1);
	strbuf_addstr(sb, ")");
}

/* ---- opening and dispatching ---------------------------------------------------------- */

enum store_kind store_kind_of(const char *where)
{
	return strncmp(where, "postgresql://", 13) == 0 || strncmp(where, "postgres://", 11) == 0
		       ? STORE_POSTGRESQL
		       : STORE_SQLITE;
}

const char *store_kind_name(enum store_kind k)
{
	static const char *const names[STORE_KIND_MAX] = {
		[STORE_SQLITE] = "sqlite", [STORE_POSTGRESQL] = "postgresql"};
	return (unsigned)k < STORE_KIND_MAX ? names[k] : "?";
}

static int open_kind(const char *where, bool reader, struct store **ret, struct tk_error *err)
{
	if (store_kind_of(where) == STORE_POSTGRESQL)
		return store_pg_open(where, reader, ret, err);
	return store_sqlite_open(where, reader, ret, err);
}

int store_open(const char *where, struct store **ret, struct tk_error *err)
{
	return open_kind(where, false, ret, err);
}

int store_open_reader(const char *where, struct store **ret, struct tk_error *err)
{
	return open_kind(where, true, ret, err);
}

void store_destroy(struct store *st)
{
	if (st)
		st->ops->destroy(st);
}

enum store_kind store_kind(const struct store *st)
{
	return st->kind;
}

int store_schema_version(const struct store *st)
{
	return st->version;
}

int store_load_jobs(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_JOBS, cb, ctx, err);
}

int store_load_nodes(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_NODES, cb, ctx, err);
}

int store_load_queues(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_QUEUES, cb, ctx, err);
}

int store_load_users(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_USERS, cb, ctx, err);
}

int store_load_audit(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_AUDIT, cb, ctx, err);
}

int store_load_config(struct store *st, store_row_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load(st, LOAD_CONFIG, cb, ctx, err);
}

int store_load_settled(struct store *st, store_settled_cb cb, void *ctx, struct tk_error *err)
{
	return st->ops->load_settled(st, cb, ctx, err);
}

int store_get_job(struct store *st, int64_t id, char **ret, size_t *len, struct tk_error *err)
{
	return st->ops->get_job(st, id, ret, len, err);
}

int store_meta_get(struct store *st, const char *key, char **ret, struct tk_error *err)
{
	return st->ops->meta_get(st, key, ret, err);
}

int store_apply(struct store *st, const struct store_batch *b, struct tk_error *err)
{
	if (b->n == 0 && !st->leased)
		return 0;
	return st->ops->apply(st, b, err);
}

int store_is_empty(struct store *st, bool *ret, struct tk_error *err)
{
	return st->ops->is_empty(st, ret, err);
}

int store_quarantine(struct store *st, const char *kind, const char *key, const char *reason,
		     int64_t now_ms, struct tk_error *err)
{
	return st->ops->quarantine(st, kind, key, reason, now_ms, err);
}

int store_changes(struct store *st, int64_t *mark, store_change_cb cb, void *ctx,
		  struct store_counts *counts, struct tk_error *err)
{
	if (!st->ops->changes)
		return tk_errorf(err, -ENOTSUP,
				 "store: a %s store is one server's: it keeps no change marks",
				 store_kind_name(st->kind));
	return st->ops->changes(st, mark, cb, ctx, counts, err);
}

int store_lease_get(struct store *st, struct store_lease *ret, struct tk_error *err)
{
	if (!st->ops->lease_get)
		return tk_errorf(err, -ENOTSUP,
				 "store: a %s store is one server's; it has no lease",
				 store_kind_name(st->kind));
	return st->ops->lease_get(st, ret, err);
}

int store_lease_take(struct store *st, const char *holder, const char *url, int64_t ttl_ms,
		     struct store_lease *ret, struct tk_error *err)
{
	if (!st->ops->lease_take)
		return tk_errorf(err, -ENOTSUP,
				 "store: a %s store is one server's; it has no lease",
				 store_kind_name(st->kind));
	return st->ops->lease_take(st, holder, url, ttl_ms, ret, err);
}

void store_lease_hold(struct store *st, const char *holder, int64_t term, int64_t ttl_ms)
{
	assert(st->ops->lease_hold);
	st->ops->lease_hold(st, holder, term, ttl_ms);
	st->leased = true;
}

int store_backup(const char *src, const char *dst, struct tk_error *err)
{
	if (store_kind_of(src) == STORE_POSTGRESQL)
		return tk_errorf(err, -ENOTSUP,
				 "tenk backup copies an SQLite store; back up a PostgreSQL store "
				 "with pg_dump or pg_basebackup, or copy it into a file with tenk "
				 "store copy");
	return store_sqlite_backup(src, dst, err);
}

int store_acct_cursor_new(struct store *st, struct store_acct_cursor **ret, struct tk_error *err)
{
	return st->ops->acct_cursor_new(st, ret, err);
}

void store_acct_cursor_destroy(struct store_acct_cursor *c)
{
	if (c)
		c->ops->destroy(c);
}

void store_acct_cursor_pause(struct store_acct_cursor *c)
{
	c->ops->pause(c);
}

int store_acct_job(struct store_acct_cursor *c, int64_t job_id, store_acct_cb cb, void *ctx,
		   struct tk_error *err)
{
	return c->ops->job(c, job_id, cb, ctx, err);
}

/* ---- batches ------------------------------------------------------------------------- */

struct store_batch *store_batch_create(void)
{
	return xcalloc(1, sizeof(struct store_batch));
}

void store_batch_destroy(struct store_batch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->ops[i].key);
		free(b->ops[i].key2);
		free(b->ops[i].doc);
		free(b->ops[i].acct);
	}
	free(b->ops);
	free(b);
}

static struct op *push(struct store_batch *b, enum op_kind kind)
{
	xgrow(&b->ops, &b->alloc, b->n + 1, sizeof(*b->ops));
	struct op *o = &b->ops[b->n++];
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	return o;
}

void store_batch_strip_job(struct store_batch *b, int64_t id)
{
	push(b, OP_STRIP_JOB)->id = id;
}

void store_batch_del_job(struct store_batch *b, int64_t id)
{
	push(b, OP_DEL_JOB)->id = id;
}

void store_batch_prune_audit(struct store_batch *b, int64_t before_ms, int max)
{
	struct op *o = push(b, OP_PRUNE_AUDIT);
	o->id = before_ms;
	o->n = max;
}

void store_batch_put_job(struct store_batch *b, int64_t id, const char *state, const char *owner,
			 int64_t settled_ms, char *doc)
{
	struct op *o = push(b, OP_PUT_JOB);
	o->id = id;
	o->key = xstrdup(state);
	o->key2 = xstrdup(owner);
	o->n = settled_ms;
	o->doc = doc;
}

void store_batch_put_node(struct store_batch *b, const char *name, char *doc)
{
	struct op *o = push(b, OP_PUT_NODE);
	o->key = xstrdup(name);
	o->doc = doc;
}

void store_batch_put_queue(struct store_batch *b, const char *name, char *doc)
{
	struct op *o = push(b, OP_PUT_QUEUE);
	o->key = xstrdup(name);
	o->doc = doc;
}

void store_batch_put_user(struct store_batch *b, const char *name, char *doc)
{
	struct op *o = push(b, OP_PUT_USER);
	o->key = xstrdup(name);
	o->doc = doc;
}

void store_batch_del_user(struct store_batch *b, const char *name)
{
	push(b, OP_DEL_USER)->key = xstrdup(name);
}

void store_batch_add_audit(struct store_batch *b, int64_t at_ms, const char *who, char *doc)
{
	struct op *o = push(b, OP_ADD_AUDIT);
	o->id = at_ms;
	o->key = xstrdup(who);
	o->doc = doc;
}

void store_batch_add_config(struct store_batch *b, int64_t version, int64_t at_ms, const char *who,
			    char *doc)
{
	struct op *o = push(b, OP_ADD_CONFIG);
	o->id = version;
	o->n = at_ms;
	o->key = xstrdup(who);
	o->doc = doc;
}

void store_batch_del_node(struct store_batch *b, const char *name)
{
	push(b, OP_DEL_NODE)->key = xstrdup(name);
}

void store_batch_put_meta(struct store_batch *b, const char *key, const char *value)
{
	struct op *o = push(b, OP_PUT_META);
	o->key = xstrdup(key);
	o->doc = xstrdup(value);
}

/* A copy of row whose strings live in the same block. */
static struct store_acct *acct_copy(const struct store_acct *row)
{
	const char *const src[] = {row->owner, row->queue, row->state,
				   row->model, row->doc,   row->service ? row->service : ""};
	size_t len[ARRAY_SIZE(src)], total = sizeof(*row);
	for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
		len[i] = strlen(src[i]) + 1;
		total += len[i];
	}
	struct store_acct *c = xmalloc(total);
	*c = *row;
	char *p = (char *)(c + 1);
	const char **dst[] = {&c->owner, &c->queue, &c->state, &c->model, &c->doc, &c->service};
	for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
		memcpy(p, src[i], len[i]);
		*dst[i] = p;
		p += len[i];
	}
	return c;
}

void store_batch_set_acct(struct store_batch *b, int64_t job_id, const struct store_acct *rows,
			  int n)
{
	push(b, OP_DEL_ACCT)->id = job_id;
	for (int i = 0; i < n; i++) {
		assert(rows[i].job_id == job_id && rows[i].attempt >= 1 &&
		       rows[i].attempt < STORE_ACCT_ATTEMPTS);
		push(b, OP_PUT_ACCT)->acct = acct_copy(&rows[i]);
	}
}

size_t store_batch_len(const struct store_batch *b)
{
	return b->n;
}

void store_batch_move(struct store_batch *dst, struct store_batch *src)
{
	if (src->n == 0)
		return;
	xgrow(&dst->ops, &dst->alloc, dst->n + src->n, sizeof(*dst->ops));
	memcpy(dst->ops + dst->n, src->ops, src->n * sizeof(*src->ops));
	dst->n += src->n;
	src->n = 0;
}

/* ---- copying a store whole ----------------------------------------------------------- */

/* Rows copied per transaction of the destination's insert. */
#define COPY_CHUNK_ROWS 2000

/* A chunk of rows whose text the chunk owns. */
struct chunk {
	struct store *to;
	const struct table_desc *t;
	struct store_value *vals;
	char **texts;
	size_t nrows, ntexts;
	int64_t copied;
};

/* Inserts the chunk's rows (unless drop) and empties it. */
static int chunk_flush(struct chunk *c, bool drop, struct tk_error *err)
{
	int r = c->nrows && !drop ? c->to->ops->insert(c->to, c->t, c->vals, c->nrows, err) : 0;
	c->copied += (int64_t)c->nrows;
	for (size_t i = 0; i < c->ntexts; i++)
		free(c->texts[i]);
	c->nrows = c->ntexts = 0;
	return r;
}

struct copy_ctx {
	struct chunk chunk;
	struct tk_error *err;
};

static int copy_row(void *arg, const struct store_value *row)
{
	struct copy_ctx *cc = arg;
	struct chunk *c = &cc->chunk;
	int n = c->t->ncols;
	struct store_value *dst = &c->vals[c->nrows * (size_t)n];
	for (int i = 0; i < n; i++) {
		dst[i] = row[i];
		if (row[i].text)
			dst[i].text = c->texts[c->ntexts++] = xstrdup(row[i].text);
	}
	if (++c->nrows == COPY_CHUNK_ROWS)
		return chunk_flush(c, false, cc->err);
	return 0;
}

/* A table's rows as one digest: each row's canonical text hashed with the
 * digest of those before it. */
struct digest_ctx {
	const struct table_desc *t;
	struct strbuf sb;
	char digest[65];
	int64_t rows;
};

static int digest_row(void *arg, const struct store_value *row)
{
	struct digest_ctx *d = arg;
	strbuf_reset(&d->sb);
	strbuf_add(&d->sb, d->digest, 64);
	for (int i = 0; i < d->t->ncols; i++) {
		switch (d->t->types[i]) {
		case COL_INT:
			strbuf_addf(&d->sb, "|%lld", (long long)row[i].i);
			break;
		case COL_REAL:
			strbuf_addf(&d->sb, "|%.17g", row[i].d);
			break;
		case COL_TEXT:
		case COL_TEXT_NULL:
			if (row[i].text)
				strbuf_addf(&d->sb, "|%zu:%s", strlen(row[i].text), row[i].text);
			else
				strbuf_addstr(&d->sb, "|~");
			break;
		}
	}
	tk_sha256_hex(d->sb.buf, d->sb.len, d->digest);
	d->rows++;
	return 0;
}

static int table_digest(struct store *st, const struct table_desc *t, struct store_copy_table *ret,
			struct tk_error *err)
{
	struct digest_ctx d = {.t = t};
	memset(d.digest, '0', 64);
	d.digest[64] = '\0';
	strbuf_init(&d.sb);
	int r = st->ops->dump(st, t, digest_row, &d, err);
	strbuf_release(&d.sb);
	if (r < 0)
		return r;
	ret->name = t->name;
	ret->rows = d.rows;
	memcpy(ret->digest, d.digest, sizeof(ret->digest));
	return 0;
}

int store_copy(const char *from, const char *to, struct store_copy_report *ret,
	       struct tk_error *err)
{
	struct store *a = NULL, *b = NULL;
	struct store_copy_report rep = {0};
	bool empty = false;
	char why[sizeof(err->text)];
	int r;
	if (strcmp(from, to) == 0)
		return tk_errorf(err, -EINVAL, "copy: \"%s\" is both where from and where to",
				 from);
	if ((r = store_open(from, &a, err)) < 0) {
		snprintf(why, sizeof(why), "%s", err->text);
		return tk_errorf(err, r, "copy: cannot open the store to copy (%s)", why);
	}
	if ((r = store_open(to, &b, err)) < 0) {
		snprintf(why, sizeof(why), "%s", err->text);
		r = tk_errorf(err, r, "copy: cannot open the store to copy into (%s)", why);
		goto out;
	}
	if ((r = store_is_empty(b, &empty, err)) < 0)
		goto out;
	if (!empty) {
		r = tk_errorf(err, -EEXIST,
			      "copy: the store to copy into already holds a cluster; copy into a "
			      "new file or an empty database");
		goto out;
	}
	/* one transaction: a copy that fails leaves the store copied into empty */
	if ((r = b->ops->exec(b, "BEGIN", err)) < 0)
		goto out;
	for (int t = 0; t < T_MAX && r >= 0; t++) {
		const struct table_desc *td = &store_tables[t];
		struct copy_ctx cc = {.chunk = {.to = b, .t = td}, .err = err};
		cc.chunk.vals = xcalloc((size_t)COPY_CHUNK_ROWS * (size_t)td->ncols,
					sizeof(*cc.chunk.vals));
		cc.chunk.texts = xcalloc((size_t)COPY_CHUNK_ROWS * (size_t)td->ncols,
					 sizeof(*cc.chunk.texts));
		r = a->ops->dump(a, td, copy_row, &cc, err);
		int f = chunk_flush(&cc.chunk, r < 0, err);
		r = r < 0 ? r : f;
		free(cc.chunk.vals);
		free(cc.chunk.texts);
	}
	if (r >= 0)
		r = b->ops->exec(b, "COMMIT", err);
	if (r < 0) {
		b->ops->exec(b, "ROLLBACK", NULL);
		goto out;
	}
	/* PostgreSQL: rows written in bulk, read at once by a server's start:
	 * their visibility settled and the planner's statistics made now */
	if (b->kind == STORE_POSTGRESQL && (r = b->ops->exec(b, "VACUUM (ANALYZE)", err)) < 0)
		goto out;
	/* read both back, table by table */
	for (int t = 0; t < T_MAX; t++) {
		struct store_copy_table x, y;
		if ((r = table_digest(a, &store_tables[t], &x, err)) < 0 ||
		    (r = table_digest(b, &store_tables[t], &y, err)) < 0)
			goto out;
		if (x.rows != y.rows || strcmp(x.digest, y.digest) != 0) {
			r = tk_errorf(err, -EIO,
				      "copy: table %s differs after the copy (%lld rows, %lld "
				      "copied): empty the store copied into before trying again",
				      x.name, (long long)x.rows, (long long)y.rows);
			goto out;
		}
		rep.tables[rep.ntables++] = x;
		rep.rows += x.rows;
	}
	if (ret)
		*ret = rep;
out:
	store_destroy(b);
	store_destroy(a);
	return r;
}
