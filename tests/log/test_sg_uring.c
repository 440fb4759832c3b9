/*
 * test_sg_uring.c - scatter-gather reads (sg_suite.h) on the native device: io_uring, or libaio or
 * posix where the kernel refuses it (the suite prints which one opened).
 */
#define SG_TYPE "uring"
#include "sg_suite.h"
