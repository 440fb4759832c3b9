/*
 * dev_test.h - what the device tests share besides the conformance suite: the scratch directory
 * each test's device lives in.
 */
#ifndef SPW_TEST_DEVICE_DEV_TEST_H
#define SPW_TEST_DEVICE_DEV_TEST_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "device/device.h"

static int dev_test_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A fresh directory name.XXXXXX on the real file system (the working directory, the build's),
 * else under /tmp. 0, or -1 when neither can be made. */
static int dev_test_dir_make(char *dir, size_t len, const char *name)
{
	snprintf(dir, len, "%s.XXXXXX", name);
	if (mkdtemp(dir))
		return 0;
	snprintf(dir, len, "/tmp/%s.XXXXXX", name);
	return mkdtemp(dir) ? 0 : -1;
}

static void dev_test_dir_remove(const char *dir)
{
	nftw(dir, dev_test_rm, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
