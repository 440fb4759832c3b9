/*
 * test_expire.c - active expiry through a real server (server/expire.c, log/expire.c): keys with
 * a TTL go from DBSIZE without being read, and nothing comes back after its expiry.
 *
 * Notes:
 *  1. TTL churn. One connection writes keys with TTLs of 1-5 s (SET k v PX ttl, pipelined) over a
 *     fixed key space, continuously (paced: BATCH_MS), for SPW_TTL_CHURN_SECONDS (default
 *     CHURN_SECONDS_DEFAULT),
 *     with keys without a TTL beside them and keys first set with a TTL then set again without
 *     one. Between write batches it reads random keys: each value names the write it came from,
 *     and a GET sent after that write's TTL had passed, counted from the write's reply, must not
 *     return it (the server set its expiry before it replied, so its expiry is earlier still).
 *     No assertion on time: only "definitely expired" is checked.
 *  2. Once the writers stop, the test reads nothing but DBSIZE and INFO until DBSIZE is the keys
 *     without a TTL (bounded polling, a generous deadline). keyspace_hits + keyspace_misses do not
 *     move meanwhile (no key was read), and expired_keys grows by at least what DBSIZE lost: the
 *     proof that the expirer removed them, not a read.
 *  3. Memory stays bounded: a value's size is fixed, so a key's new value fits its record while the
 *     record is mutable and is written in place, and an expired mutable record becomes a tombstone
 *     in place. The log's tail in the second half of the run grows by no more than its whole
 *     growth up to the middle (the key space being written in for the first time), and the RSS at
 *     the end is within the RSS at the middle plus the log's growth plus RSS_SLACK.
 *  4. Both tests run memory-only and with a storage tier whose memory holds the whole key space
 *     (the expirer's session is then attached and polled; what lies on the device is compaction's,
 *     see log/expire.c note 1).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/itest.h"

#define CHURN_SECONDS_DEFAULT 8
#define CHURN_KEYS   100000         /* the TTL key space */
#define PERM_KEYS    500            /* keys without a TTL */
#define SAVED_KEYS   200            /* set with a TTL, then again without one */
#define BATCH_SETS   200
#define BATCH_GETS   50
#define BATCH_MS     10             /* at most one batch per 10 ms: 20000 SETs/s, so that a key waits
                                     * 5 s between writes on average and many expire first */
#define DRAIN_DEADLINE_MS 60000     /* after the last TTL passed: the expirer's bounded wait */
#define RSS_SLACK (32LL << 20)

static const char *const base_flags[] = { "--threads", "2", "--memory", "64m", "--page", "1m",
	"--index", "8m", "--save", "", "--checkpoint-interval", "0", NULL };
static const char *const tier_flags[] = { "--threads", "2", "--storage-tier", "--device-type",
	"posix", "--memory", "64m", "--page", "1m", "--segment", "8m", "--index", "8m", "--save", "",
	"--checkpoint-interval", "0", NULL };

/* Wall-clock ms, the clock the server's expiry uses. */
static long long wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int churn_seconds(void)
{
	const char *e = getenv("SPW_TTL_CHURN_SECONDS");
	int n = e ? atoi(e) : 0;
	return n > 0 ? n : CHURN_SECONDS_DEFAULT;
}

static void server_start(itest_server *s, const char *const *flags)
{
	if (itest_spillway_start(s, flags) != 0)
		fail_msg("spillway-server did not start");
}

static void cmd_add(itest_buf *b, int argc, const char *const *argv)
{
	itest_buf_fmt(b, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++)
		itest_buf_bulk(b, argv[i], strlen(argv[i]));
}

/* Send the pipeline and read its n replies; each must be want when want is not NULL. */
static void pipeline_run(itest_conn *c, itest_buf *b, int n, const char *want)
{
	assert_int_equal(itest_conn_send(c, b->p, b->len), 0);
	for (int i = 0; i < n; i++) {
		const char *r;
		ssize_t len = itest_conn_read_reply(c, &r, NULL);
		assert_true(len > 0);
		if (want)
			itest_bytes_expect("reply", r, (size_t)len, want, strlen(want));
	}
	b->len = 0;
}

/* The churn's state: for each TTL key, the number of its last write and when that write's TTL had
 * passed for sure (its reply's time + ttl). */
typedef struct churn {
	int *seq;
	long long *dead_after;
	unsigned seed;
	long long sets, gets, hits, stale;
} churn;

/* One batch of SETs with TTLs of 1-5 s over the key space (note 1). */
static void churn_sets(itest_conn *c, churn *ch)
{
	itest_buf b = { 0 };
	int keys[BATCH_SETS], ttls[BATCH_SETS];
	for (int i = 0; i < BATCH_SETS; i++) {
		char k[32], v[32], px[16];
		keys[i] = (int)(rand_r(&ch->seed) % CHURN_KEYS);
		ttls[i] = 1000 + (int)(rand_r(&ch->seed) % 4001);
		snprintf(k, sizeof(k), "ttl:%d", keys[i]);
		snprintf(v, sizeof(v), "%08d:%08d", keys[i], ++ch->seq[keys[i]]);
		snprintf(px, sizeof(px), "%d", ttls[i]);
		const char *argv[] = { "SET", k, v, "PX", px };
		cmd_add(&b, 5, argv);
	}
	pipeline_run(c, &b, BATCH_SETS, "+OK\r\n");
	long long acked = wall_ms();
	for (int i = 0; i < BATCH_SETS; i++)
		ch->dead_after[keys[i]] = acked + ttls[i];
	ch->sets += BATCH_SETS;
	free(b.p);
}

/* One batch of GETs of random keys: a value whose write's TTL had passed when the GET was sent
 * is a stale read (note 1). */
static void churn_gets(itest_conn *c, churn *ch)
{
	itest_buf b = { 0 };
	int keys[BATCH_GETS];
	for (int i = 0; i < BATCH_GETS; i++) {
		char k[32];
		keys[i] = (int)(rand_r(&ch->seed) % CHURN_KEYS);
		snprintf(k, sizeof(k), "ttl:%d", keys[i]);
		const char *argv[] = { "GET", k };
		cmd_add(&b, 2, argv);
	}
	long long sent = wall_ms();
	assert_int_equal(itest_conn_send(c, b.p, b.len), 0);
	for (int i = 0; i < BATCH_GETS; i++) {
		const char *r;
		ssize_t len = itest_conn_read_reply(c, &r, NULL);
		assert_true(len > 0);
		if (r[0] != '$' || r[1] == '-')
			continue;
		ch->hits++;
		int key = -1, seq = -1;
		const char *v = memchr(r, '\n', (size_t)len);
		assert_non_null(v);
		assert_int_equal(sscanf(v + 1, "%d:%d", &key, &seq), 2);
		assert_int_equal(key, keys[i]);
		/* Only the last write of a key can be returned (one connection writes them all). */
		assert_int_equal(seq, ch->seq[key]);
		if (ch->dead_after[key] < sent) {
			ch->stale++;
			fprintf(stderr, "GET ttl:%d returned write %d %lld ms after its TTL had passed\n", key,
			        seq, sent - ch->dead_after[key]);
		}
	}
	ch->gets += BATCH_GETS;
	free(b.p);
}

/* n keys prefix:i = "v" with extra args (NULL-terminated pair or none). */
static void keys_set(itest_conn *c, const char *prefix, int n, const char *value, const char *px)
{
	itest_buf b = { 0 };
	for (int i = 0; i < n; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s:%d", prefix, i);
		const char *argv[] = { "SET", k, value, "PX", px };
		cmd_add(&b, px ? 5 : 3, argv);
	}
	pipeline_run(c, &b, n, "+OK\r\n");
	free(b.p);
}

typedef struct mem_sample {
	long long tail, begin, rss;
} mem_sample;

static mem_sample mem_now(itest_conn *c)
{
	mem_sample m;
	m.tail = itest_info_field(c, "store", "Log.TailAddress");
	m.begin = itest_info_field(c, "store", "Log.BeginAddress");
	m.rss = itest_info_field(c, "memory", "used_memory_rss");
	assert_true(m.tail > 0 && m.begin > 0 && m.rss > 0);
	return m;
}

static long long reads_now(itest_conn *c)
{
	return itest_info_stat(c, "keyspace_hits") + itest_info_stat(c, "keyspace_misses");
}

/* After the writers: DBSIZE falls to the keys without a TTL with no key read (note 2). */
static void drain_check(itest_conn *c, long long last_dead)
{
	const long long want = PERM_KEYS + SAVED_KEYS;
	long long reads0 = reads_now(c);
	long long expired0 = itest_info_stat(c, "expired_keys");
	char *r = itest_call(c, "dbsize", NULL);
	long long size0 = atoll(r + 1);
	free(r);
	long long size = size0;
	while (size != want) {
		if (wall_ms() > last_dead + DRAIN_DEADLINE_MS)
			fail_msg("DBSIZE is %lld, %lld ms after the last TTL passed (want %lld)", size,
			         wall_ms() - last_dead, want);
		itest_sleep_ms(50);
		r = itest_call(c, "dbsize", NULL);
		size = atoll(r + 1);
		free(r);
	}
	assert_int_equal(reads_now(c), reads0);
	itest_stat_grew(c, "expired_keys", expired0, size0 - want, "the expirer removing keys nobody read");
	r = itest_call(c, "info", "keyspace", NULL);
	char want_ks[96];
	snprintf(want_ks, sizeof(want_ks), "db0:keys=%lld,expires=0,", want);
	if (!strstr(r, want_ks))
		fail_msg("INFO keyspace: %s (want %s)", r, want_ks);
	free(r);
	fprintf(stderr, "drain: DBSIZE %lld -> %lld without reads, expired_keys %lld -> %lld\n", size0, size,
	        expired0, itest_info_stat(c, "expired_keys"));
}

/* The keys without a TTL and the ones set again without one are all there, values intact. */
static void survivors_check(itest_conn *c)
{
	for (int i = 0; i < SAVED_KEYS; i++) {
		char k[32];
		snprintf(k, sizeof(k), "saved:%d", i);
		itest_expect_bulk(c, "kept", "get", k, NULL);
		itest_expect(c, ":-1\r\n", "pttl", k, NULL);
	}
	for (int i = 0; i < PERM_KEYS; i += 50) {
		char k[32];
		snprintf(k, sizeof(k), "perm:%d", i);
		itest_expect_bulk(c, "p", "get", k, NULL);
	}
}

static void ttl_churn(const char *const *flags)
{
	itest_server s;
	itest_conn c;
	server_start(&s, flags);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	churn ch = { .seed = 4242 };
	ch.seq = calloc(CHURN_KEYS, sizeof(int));
	ch.dead_after = calloc(CHURN_KEYS, sizeof(long long));
	assert_non_null(ch.seq);
	assert_non_null(ch.dead_after);

	keys_set(&c, "perm", PERM_KEYS, "p", NULL);
	keys_set(&c, "saved", SAVED_KEYS, "doomed", "1000");
	keys_set(&c, "saved", SAVED_KEYS, "kept", NULL);
	long long secs = churn_seconds();
	long long t0 = wall_ms(), half = t0 + secs * 500, end = t0 + secs * 1000;
	mem_sample start = mem_now(&c), mid = { 0 };
	long long expired_start = itest_info_stat(&c, "expired_keys");
	for (long long batch = 1; wall_ms() < end; batch++) {
		churn_sets(&c, &ch);
		churn_gets(&c, &ch);
		if (!mid.tail && wall_ms() >= half)
			mid = mem_now(&c);
		long long ahead = t0 + batch * BATCH_MS - wall_ms();
		if (ahead > 0)
			itest_sleep_ms((int)ahead);
	}
	mem_sample fin = mem_now(&c);
	fprintf(stderr, "churn: %lld SETs, %lld GETs (%lld hits) in %lld s; log tail +%lld bytes in the "
	        "first half, +%lld in the second; RSS %lld -> %lld -> %lld\n", ch.sets, ch.gets, ch.hits,
	        secs, mid.tail - start.tail, fin.tail - mid.tail, start.rss, mid.rss, fin.rss);
	assert_int_equal(ch.stale, 0);
	assert_true(mid.tail > 0);
	itest_stat_grew(&c, "expired_keys", expired_start, 1, "keys expiring during the churn");
	/* Note 3. */
	assert_true(fin.tail - mid.tail <= mid.tail - start.begin);
	assert_true(fin.rss <= mid.rss + (fin.tail - mid.tail) + RSS_SLACK);

	long long last_dead = 0;
	for (int i = 0; i < CHURN_KEYS; i++)
		if (ch.dead_after[i] > last_dead)
			last_dead = ch.dead_after[i];
	drain_check(&c, last_dead);
	survivors_check(&c);
	free(ch.seq);
	free(ch.dead_after);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_ttl_churn_expired_keys_go_without_reads(void **state)
{
	(void)state;
	ttl_churn(base_flags);
}

static void test_ttl_churn_expired_keys_go_without_reads_with_a_storage_tier(void **state)
{
	(void)state;
	ttl_churn(tier_flags);
}

/* A key set with a TTL, then again without one, outlives the TTL; a key beside it that keeps its
 * TTL is removed by the expirer without a read (expired_keys grows, keyspace reads do not). */
static void reset_survives(const char *const *flags)
{
	itest_server s;
	itest_conn c;
	server_start(&s, flags);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	long long reads0 = reads_now(&c);
	long long expired0 = itest_info_stat(&c, "expired_keys");
	itest_expect(&c, "+OK\r\n", "set", "k", "v1", "px", "300", NULL);
	itest_expect(&c, "+OK\r\n", "set", "k", "v2", NULL);
	itest_expect(&c, "+OK\r\n", "set", "gone", "x", "px", "300", NULL);
	long long t0 = itest_now_ms();
	for (;;) {
		char *r = itest_call(&c, "dbsize", NULL);
		bool one = strcmp(r, ":1\r\n") == 0;
		free(r);
		if (one)
			break;
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("the key with a TTL was not removed");
		itest_sleep_ms(20);
	}
	assert_int_equal(reads_now(&c), reads0);
	itest_stat_grew(&c, "expired_keys", expired0, 1, "the expirer removing 'gone'");
	itest_expect_bulk(&c, "v2", "get", "k", NULL);
	itest_expect(&c, ":-1\r\n", "ttl", "k", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_a_key_set_again_without_a_ttl_survives_active_expiry(void **state)
{
	(void)state;
	reset_survives(base_flags);
}

static void test_a_key_set_again_without_a_ttl_survives_active_expiry_with_a_storage_tier(void **state)
{
	(void)state;
	reset_survives(tier_flags);
}

/* INFO # Stats has Redis 7.0's expiry fields, in its order, right after expired_keys. */
static void test_info_shows_the_expiry_fields_in_redis_order(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	server_start(&s, base_flags);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	char *r = itest_call(&c, "info", "stats", NULL);
	const char *p = strstr(r, "\r\nexpired_keys:");
	assert_non_null(p);
	const char *q = strstr(p, "\r\nexpired_stale_perc:0.00\r\nexpired_time_cap_reached_count:0\r\n"
	                       "expire_cycle_cpu_milliseconds:");
	assert_true(q != NULL && q == strchr(p + 2, '\r'));
	free(r);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_info_shows_the_expiry_fields_in_redis_order),
		cmocka_unit_test(test_a_key_set_again_without_a_ttl_survives_active_expiry),
		cmocka_unit_test(test_a_key_set_again_without_a_ttl_survives_active_expiry_with_a_storage_tier),
		cmocka_unit_test(test_ttl_churn_expired_keys_go_without_reads),
		cmocka_unit_test(test_ttl_churn_expired_keys_go_without_reads_with_a_storage_tier),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
