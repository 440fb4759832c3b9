/*
 * test_dev_mem_threads.c - the device conformance suite against LocalMemory with two copy threads
 * (--device-completion-threads 2): completions cross threads and must still be called back on the
 * owning queue's thread.
 */
#define CONF_TYPE "localmemory"
#define CONF_THREADS 2
#include "device/conformance.h"
