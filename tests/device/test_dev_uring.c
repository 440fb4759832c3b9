/*
 * test_dev_uring.c - the device conformance suite against the io_uring backend (liburing), one ring per thread.
 * Exits 77 (SKIP) when this build or machine lacks it.
 */
#define CONF_TYPE "uring"
#include "device/conformance.h"
