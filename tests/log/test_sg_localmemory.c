/*
 * test_sg_localmemory.c - scatter-gather reads (sg_suite.h) on the LocalMemory device: merging,
 * sharing and the throttle with no device latency.
 */
#define SG_TYPE "localmemory"
#include "sg_suite.h"
