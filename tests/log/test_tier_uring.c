/*
 * test_tier_uring.c - the storage tier's suite (tier_suite.h) on the native io_uring device, O_DIRECT
 * segment files under /tmp (libaio, then posix, when the kernel refuses io_uring).
 */
#define TIER_TYPE "uring"
#include "tier_suite.h"
