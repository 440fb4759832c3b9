/*
 * group_shim.c - a stand-in for log/group.c's hlog_group_rmw while the tree has no log/group.c
 * (the build defines SPW_HAVE_LOG_GROUP once it does, and this file compiles to nothing).
 *
 * Design notes:
 *  1. Not atomic: the head's hlog_rmw first, then each part as its own upsert or delete. It
 *     prefetches every part's key before the head, so that with a device nothing is written when
 *     a part's old record must be read first (HLOG_PENDING); a crash or a checkpoint between the
 *     head and its parts may still see one without the other. Enough for the large layout's
 *     commands to run and be tested on one server; the real group makes them one reservation.
 *  2. A part's write that answers HLOG_PENDING once the head is written (no frame until a page
 *     write finishes, or an old record to read) is driven to its end here, polling the session:
 *     stopping would leave the head without its parts.
 */
#include "server/server_int.h"

#include <sched.h>

#if !SPW_HAVE_LOG_GROUP

int hlog_group_rmw(hlog_session *s, const hlog_key *head, const hlog_rmw_ops *ops, void *ctx,
                   const hlog_group_part *parts, size_t nparts)
{
	int rc;
	bool pending = false;
	for (size_t i = 0; i < nparts; i++) {
		if ((rc = hlog_prefetch(s, &parts[i].key)) == HLOG_PENDING)
			pending = true;
		else if (rc < 0 && rc != HLOG_NOTFOUND)
			return rc;
	}
	if (pending)
		return HLOG_PENDING;
	if ((rc = hlog_rmw(s, head, ops, ctx)) != HLOG_OK)
		return rc;
	for (size_t i = 0; i < nparts; i++) {
		const hlog_group_part *p = &parts[i];
		for (;;) {   /* note 2 */
			rc = p->del ? hlog_delete(s, &p->key)
			            : hlog_upsert_typed(s, &p->key, p->val, p->len, HLOG_NO_EXPIRY, HLOG_T_PART);
			if (rc != HLOG_PENDING)
				break;
			hlog_session_poll(s);
			sched_yield();
		}
		if (rc != HLOG_OK && rc != HLOG_NOTFOUND)
			return rc;
	}
	return HLOG_OK;
}

uint64_t hlog_group_max_bytes(hlog *l)
{
	(void)l;
	return 64ull << 20;
}

#endif
