/*
 * conf_disk.h - the conformance suite's tests of disk use (included by conformance.h, so they run
 * on every backend): segment files are preallocated ahead of the writes (a first step, then
 * doubling), not a whole segment at creation, and dev_disk_usage says what the segments take
 * (st_blocks * 512 for files, resident pages for localmemory).
 *
 * The bounds are generous on purpose (a file system may allocate a little more than asked, in
 * whole blocks and extents); what they pin is the order of magnitude: about a step, never the
 * segment.
 */
#ifndef SPW_TEST_DEVICE_CONF_DISK_H
#define SPW_TEST_DEVICE_CONF_DISK_H

#include <fcntl.h>
#include <sys/stat.h>

#define MiB (1ULL << 20)

/* Reopen the fixture's device on the same folder with other segment and step sizes. */
static void conf_reopen_sized(conf *c, uint64_t segment, uint64_t step)
{
	conf_close(c);
	c->cfg.segment_bytes = segment;
	c->cfg.prealloc_step = step;
	assert_int_equal(conf_open(c), 0);
}

static bool conf_is_files(const conf *c)
{
	return (c->d->caps & DEV_CAP_PERSISTENT) != 0;
}

/* Can the file system under the fixture's folder preallocate (fallocate KEEP_SIZE)? */
static bool conf_fs_preallocates(const conf *c)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/prealloc.probe", c->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	bool ok = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == 0;
	close(fd);
	unlink(path);
	return ok;
}

static uint64_t conf_usage(conf *c)
{
	uint64_t bytes = UINT64_MAX;
	assert_int_equal(dev_disk_usage(c->d, &bytes), 0);
	return bytes;
}

/* st_blocks * 512 and st_size of segment seg's file. */
static uint64_t conf_seg_blocks(conf *c, uint64_t seg, uint64_t *size /* out */)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/hlog.%llu", c->dir, (unsigned long long)seg);
	assert_int_equal(stat(path, &st), 0);
	if (size)
		*size = (uint64_t)st.st_size;
	return (uint64_t)st.st_blocks * 512;
}

/* Write [off, off + len) with conf_fill(seed) data in writes of chunk bytes. */
static void conf_write_span(conf *c, uint64_t off, uint64_t len, uint64_t chunk, uint64_t seed)
{
	uint8_t *buf = conf_buf(chunk);
	for (uint64_t at = off; at < off + len; at += chunk) {
		conf_fill(buf, chunk, at, seed);
		assert_int_equal(conf_write(c->q, at, buf, chunk), (int64_t)chunk);
	}
	free(buf);
}

/* Read [off, off + len) back and compare it with conf_fill(seed) data. */
static void conf_check_span(conf *c, uint64_t off, uint64_t len, uint64_t chunk, uint64_t seed)
{
	uint8_t *buf = conf_buf(chunk), *want = conf_buf(chunk);
	for (uint64_t at = off; at < off + len; at += chunk) {
		conf_fill(want, chunk, at, seed);
		assert_int_equal(conf_read(c->q, at, buf, chunk), (int64_t)chunk);
		assert_memory_equal(buf, want, chunk);
	}
	free(buf);
	free(want);
}

static void test_device_large_segment_written_a_few_mib_uses_about_one_step_of_disk(void **state)
{
	conf *c = *state;
	const uint64_t seg = 1024 * MiB, step = DEV_PREALLOC_STEP_DEFAULT, data = 4 * MiB;

	conf_reopen_sized(c, seg, 0);
	assert_int_equal(conf_usage(c), 0);   /* nothing written, nothing held */
	conf_write_span(c, 0, data, MiB, 21);
	uint64_t used = conf_usage(c);
	assert_true(used >= data);
	if (conf_is_files(c)) {
		uint64_t size, blocks = conf_seg_blocks(c, 0, &size);
		assert_int_equal(size, data);                  /* the size is the written end */
		assert_int_equal(blocks, used);                /* one file: what du shows */
		assert_true(used <= step + data + MiB);        /* about a step, ... */
		if (conf_fs_preallocates(c))
			assert_true(used >= step);                 /* ... reserved ahead of the writes */
	} else {
		assert_true(used <= data + MiB);               /* memory: the pages written */
	}
	assert_true(used < seg / 4);                       /* never the segment */
	conf_check_span(c, 0, data, MiB, 21);
}

static void test_device_writes_past_many_steps_read_back_and_usage_follows_the_data(void **state)
{
	conf *c = *state;
	const uint64_t seg = 256 * MiB, step = MiB, chunk = 256 * 1024;
	uint64_t last = 0;
	uint8_t *buf = conf_scratch(c, chunk);

	conf_reopen_sized(c, seg, step);
	for (uint64_t at = 0; at < 12 * MiB; at += chunk) {
		conf_write_span(c, at, chunk, chunk, 22);
		uint64_t used = conf_usage(c);
		/* Grows with the data (give or take a block of the file system's own: ext4 counts the
		 * blocks of a file's extent tree, which come and go as extents split and merge). */
		assert_true(used + 64 * 1024 >= last);
		assert_true(used >= at + chunk);
		assert_true(used <= 2 * (at + chunk) + 2 * step);   /* reserved: at most twice the data */
		last = used;
	}
	conf_check_span(c, 0, 12 * MiB, MiB, 22);
	/* A read past the written end is short, preallocated blocks or not. */
	assert_int_equal(conf_read(c->q, 12 * MiB - 4096, buf, 8192), 4096);
	if (conf_is_files(c) && conf_fs_preallocates(c)) {
		/* The next step is reserved ahead of the written end, by the preallocation thread: give it
		 * time (a bounded wait, never a timed assertion). */
		uint64_t size, blocks = conf_seg_blocks(c, 0, &size);
		for (int i = 0; i < 1000 && blocks < size + step / 2; i++) {
			usleep(10000);
			blocks = conf_seg_blocks(c, 0, &size);
		}
		assert_int_equal(size, 12 * MiB);
		assert_true(blocks >= size + step / 2);
	}
	/* A write that jumps far ahead reserves around itself: the gap stays a hole. */
	conf_write_span(c, 100 * MiB, chunk, chunk, 23);
	assert_true(conf_usage(c) <= last + chunk + 2 * step);
	conf_check_span(c, 100 * MiB, chunk, chunk, 23);
	assert_int_equal(conf_read(c->q, 100 * MiB + chunk, buf, 4096), 0);
}

/* One writer of test_device_threads_writing_one_segment_share_its_steps: every nth block of the
 * segment, on its own queue. */
typedef struct conf_seg_writer {
	dev *d;
	int index, n;
	uint64_t blocks, block;
	int failures;
	pthread_t thread;
} conf_seg_writer;

static void *conf_seg_writer_main(void *arg)
{
	conf_seg_writer *w = arg;
	dev_queue *q = NULL;
	uint8_t *buf = NULL;
	if (dev_queue_open(w->d, &q) != 0 || posix_memalign((void **)&buf, CONF_ALIGN, w->block) != 0) {
		w->failures++;
		dev_queue_close(q);
		return NULL;
	}
	for (uint64_t b = (uint64_t)w->index; b < w->blocks; b += (uint64_t)w->n) {
		tio t;
		conf_fill(buf, w->block, b * w->block, 24);
		tio_init(&t, b * w->block, buf, w->block);
		int rc;
		while ((rc = dev_write(q, &t.req)) == -EAGAIN) {
			dev_submit(q);
			dev_wait(q, 1, 100000000LL);
			dev_reap(q, 64);
		}
		if (rc != 0) {
			w->failures++;
			break;
		}
		while (!t.done) {
			dev_submit(q);
			if (dev_reap(q, 64) == 0)
				dev_wait(q, 1, 100000000LL);
		}
		if (t.res != (int64_t)w->block)
			w->failures++;
	}
	free(buf);
	dev_queue_close(q);
	return NULL;
}

static void test_device_threads_writing_one_segment_share_its_steps(void **state)
{
	conf *c = *state;
	enum { WRITERS = 4 };
	const uint64_t seg = 64 * MiB, step = MiB, block = 64 * 1024, data = 16 * MiB;
	conf_seg_writer w[WRITERS];

	conf_reopen_sized(c, seg, step);
	for (int i = 0; i < WRITERS; i++) {
		w[i] = (conf_seg_writer){ .d = c->d, .index = i, .n = WRITERS, .blocks = data / block,
		                          .block = block };
		assert_int_equal(pthread_create(&w[i].thread, NULL, conf_seg_writer_main, &w[i]), 0);
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(w[i].thread, NULL);
		assert_int_equal(w[i].failures, 0);
	}
	conf_check_span(c, 0, data, MiB, 24);
	uint64_t used = conf_usage(c);
	assert_true(used >= data);
	assert_true(used <= 2 * data + 2 * step);
}

static void test_device_usage_drops_after_truncation_and_holds_after_reopen(void **state)
{
	conf *c = *state;
	const uint64_t seg = 4 * MiB, step = MiB;

	conf_reopen_sized(c, seg, step);
	conf_write_span(c, 0, 3 * seg + MiB, MiB, 25);   /* three full segments and a bit */
	uint64_t before = conf_usage(c);
	assert_true(before >= 3 * seg + MiB);
	assert_true(before <= 3 * seg + 2 * MiB + 2 * step);
	assert_int_equal(dev_truncate_until(c->d, 2 * seg), 0);
	uint64_t after = conf_usage(c);
	assert_true(after + 2 * seg <= before);          /* two segments' worth went */
	assert_true(after >= seg + MiB);
	if (!conf_is_files(c))
		return;   /* memory: nothing outlives the device */
	conf_close(c);
	assert_int_equal(conf_open(c), 0);
	assert_int_equal(conf_usage(c), after);          /* the files are what they were */
	/* The tail goes on from its written end: its first write after the reopen claims a step. */
	conf_write_span(c, 3 * seg + MiB, 2 * MiB, MiB, 25);
	conf_check_span(c, 2 * seg, seg + 3 * MiB, MiB, 25);
	uint64_t size;
	conf_seg_blocks(c, 3, &size);
	assert_int_equal(size, 3 * MiB);
	assert_true(conf_usage(c) <= 2 * seg + MiB);      /* segment 3 reserved at most whole */
}

#define CONF_DISK_TESTS                                                                          \
	cmocka_unit_test_setup_teardown(test_device_large_segment_written_a_few_mib_uses_about_one_step_of_disk, \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_device_writes_past_many_steps_read_back_and_usage_follows_the_data, \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_device_threads_writing_one_segment_share_its_steps,     \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_device_usage_drops_after_truncation_and_holds_after_reopen, \
	                                conf_setup, conf_teardown),

#endif
