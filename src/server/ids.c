/*
 * Job ids are never given twice. The store's rows say which ids exist, but
 * a store can go back: a journal removed or lost with its last commits, a
 * backup restored, old jobs removed by retention. So the ids handed out are
 * reserved ahead in DATA/tenk.ids, a file beside the store written durably
 * before an id in a new block is given: at start the next id is past both
 * the store's last job and the reservation, so an id acknowledged once is
 * never acknowledged again for another job.
 *
 * A clean stop writes the reservation down to the last id given, so only
 * a crash skips ids (at most a block).
 */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define IDS_BLOCK 256 /* ids reserved beyond what a submission needs */

static char *ids_path(const struct server *s)
{
	return xasprintf("%s/tenk.ids", s->data_dir);
}

static int ids_write(struct server *s, int64_t reserved, struct tk_error *err)
{
	_cleanup_free_ char *path = ids_path(s);
	char line[64];
	int len = snprintf(line, sizeof(line), "reserved %" PRId64 "\n", reserved);
	int r = tk_write_file(path, line, (size_t)len, 0600);
	if (r < 0)
		return tk_errorf(err, r, "cannot write %s: %s", path, strerror(-r));
	s->ids_reserved = reserved;
	return 0;
}

int server_ids_load(struct server *s, struct tk_error *err)
{
	_cleanup_free_ char *path = ids_path(s), *text = NULL;
	size_t len = 0;
	int r = tk_read_file(path, 4096, &text, &len);
	int64_t reserved = 0; /* (no file: nothing reserved) */
	if (r < 0 && r != -ENOENT) {
		return tk_errorf(err, r, "cannot read %s: %s", path, strerror(-r));
	} else if (r == 0) {
		char *end = NULL;
		errno = 0;
		if (strncmp(text, "reserved ", 9) == 0)
			reserved = strtoll(text + 9, &end, 10);
		if (!end || end == text + 9 || errno || reserved < 0 ||
		    reserved > STATE_MAX_JOB_ID || (*end != '\n' && *end))
			return tk_errorf(
				err, -EINVAL,
				"%s is not \"reserved N\" (the last job id handed out); "
				"remove it only when no id was given past the store's last "
				"job",
				path);
	}
	int64_t last = (int64_t)s->st.njobs;
	if (reserved > last && s->cfg.init && last == 0) {
		/* --init on an empty store: a new cluster, whose ids start at 1 */
		log_info("a new cluster (--init): job ids start again at 1");
		return ids_write(s, 0, err);
	}
	if (reserved > last) {
		/* the store lost ids it gave (or the server stopped without
		 * writing the reservation down): never give them again */
		log_warn("job ids up to %" PRId64 " were reserved before the last stop and the "
			 "store's last job is %" PRId64 ": the next job is %" PRId64,
			 reserved, last, reserved + 1);
		state_slots_reserve(&s->st, (size_t)reserved);
	}
	s->ids_reserved = MAX(reserved, last);
	return 0;
}

int server_ids_reserve(struct server *s, int64_t n, struct tk_error *err)
{
	int64_t need = (int64_t)s->st.njobs + n;
	if (need <= s->ids_reserved)
		return 0;
	return ids_write(s, MIN(need + IDS_BLOCK, (int64_t)STATE_MAX_JOB_ID), err);
}

void server_ids_close(struct server *s)
{
	/* a clean stop: the ids not given are free again */
	struct tk_error err;
	if (s->ids_reserved > (int64_t)s->st.njobs && ids_write(s, (int64_t)s->st.njobs, &err) < 0)
		log_warn("%s", err.text);
}
