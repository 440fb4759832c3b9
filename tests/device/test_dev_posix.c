/*
 * test_dev_posix.c - the device conformance suite against the posix backend (pread/pwrite through the page cache).
 * Exits 77 (SKIP) when this build or machine lacks it.
 */
#define CONF_TYPE "posix"
#include "device/conformance.h"
