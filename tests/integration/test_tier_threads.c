/*
 * test_tier_threads.c - the storage tier suite (test_tier.c) with 4 workers and 32 connections at
 * once on the native device (io_uring when the kernel allows it, else libaio): pending reads of
 * many connections in flight on every worker, each reaped by the worker that queued it.
 */
#define TIER_DEVICE "native"
#define TIER_THREADS "4"
#define TIER_CLIENTS 32
#include "integration/test_tier.c"
