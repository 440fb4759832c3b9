/*
 * test_dev_mem.c - the device conformance suite against the LocalMemory backend with --device-completion-threads 0 (the submitter copies).
 * Exits 77 (SKIP) when this build or machine lacks it.
 */
#define CONF_TYPE "localmemory"
#include "device/conformance.h"
