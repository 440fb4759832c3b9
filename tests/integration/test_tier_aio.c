/*
 * test_tier_aio.c - the storage tier suite (test_tier.c) on the native device with the libaio
 * backend (O_DIRECT segment files, completions through the aio eventfd in each worker's epoll).
 */
#define TIER_DEVICE "native"
#define TIER_IO "libaio"
#include "integration/test_tier.c"
