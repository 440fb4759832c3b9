/*
 * test_tier_mem.c - the storage tier suite (test_tier.c) on the LocalMemory device with its copy
 * threads (--device-completion-threads 4, the default): completions come from other threads.
 */
#define TIER_DEVICE "localmemory"
#include "integration/test_tier.c"
