/*
 * test_tier_uring.c - the storage tier suite (test_tier.c) on the native device with the io_uring
 * backend. Exits 77 (SKIP) only when the kernel refuses io_uring (asked through dev_open, as the
 * server asks).
 */
#define TIER_DEVICE "native"
#define TIER_IO "uring"
#define TIER_SKIP_URING 1
#include "integration/test_tier.c"
