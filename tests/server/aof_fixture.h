/*
 * aof_fixture.h - what the AOF unit tests share: a temporary folder per test (setup/teardown: the
 * process-wide registry of closed files never mixes two tests' files), the path of a worker's file
 * and a file's size. Included by one test file each, after cmocka and server/aof.h.
 */
#ifndef SPW_TEST_AOF_FIXTURE_H
#define SPW_TEST_AOF_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct fixture {
	char dir[64];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/spw_test_aof_XXXXXX");
	if (!mkdtemp(f->dir)) return -1;
	*state = f;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	fixture *f = *state;
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void file_path(char *out, size_t cap, const char *dir, uint64_t gen, int worker)
{
	snprintf(out, cap, "%s/%s/spillway.%llu.%d.aof", dir, AOF_DIR_NAME, (unsigned long long)gen,
	         worker);
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

#endif
