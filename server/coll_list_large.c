/*
 * coll_list_large.c - the large layout of lists (docs/ARCHITECTURE.md "Large collections"): not
 * built yet. coll_list_large_wanted says no, so no large list head is ever written and the entries
 * below are reached only by a corrupt record.
 */
#include "server/server_int.h"

bool coll_list_large_wanted(int enc, size_t used)
{
	(void)enc;
	(void)used;
	return false;
}

int coll_list_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx)
{
	(void)c, (void)k, (void)type, (void)hint, (void)fn, (void)ctx;
	return SPW_E_CORRUPT;
}

int coll_list_large_rmw(client *c, const hlog_key *k, coll_edit *e)
{
	(void)c, (void)k, (void)e;
	return SPW_E_CORRUPT;
}

int coll_list_large_convert(client *c, const hlog_key *k, coll_edit *e)
{
	(void)c, (void)k, (void)e;
	return SPW_E_CORRUPT;
}
