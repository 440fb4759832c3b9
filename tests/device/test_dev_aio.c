/*
 * test_dev_aio.c - the device conformance suite against the libaio backend, one aio context per thread.
 * Exits 77 (SKIP) when this build or machine lacks it.
 */
#define CONF_TYPE "libaio"
#include "device/conformance.h"
