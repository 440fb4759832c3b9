/*
 * test_tier_localmemory.c - the storage tier's suite (tier_suite.h) on the LocalMemory device:
 * the whole pending path with no device latency. The huge-value test uses 16 MB values here, to
 * keep the device's RAM small.
 */
#define TIER_TYPE "localmemory"
#define TIER_BIG_VALUE (16u << 20)
#include "tier_suite.h"
