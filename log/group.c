/*
 * group.c - groups (hlog.h, hlog_group_rmw): several records made visible together, head first.
 */

#include "log/hlog_int.h"

#define GROUP_MAX_BYTES (64ULL << 20)

uint64_t hlog_group_max_bytes(hlog *l)
{
	/* A quarter of the memory region: the span's pages fit beside the pages being written and
	 * evicted at any time (alloc.c note 5: a span of N pages needs N <= max_pages - 1). */
	return SPW_MIN(l->max_pages * l->page_bytes / 4, GROUP_MAX_BYTES);
}
