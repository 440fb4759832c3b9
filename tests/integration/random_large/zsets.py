"""zsets (large layout): the sorted-set commands over a handful of keys, with a member space of
hundreds, so that with zset-max-listpack-entries 4 and --coll-record-max 128 (diff_random.py's
"large" rounds) most sets are skiplist-encoded and large (server/coll_zset_large.c): buckets and
a counted B+tree that splits. Point paths (ZADD with its flags, ZINCRBY, ZREM, ZSCORE, ZMSCORE,
ZRANK, ZREVRANK, ZRANGE by rank and by score with LIMIT, ZCOUNT, ZPOPMIN, ZPOPMAX) and whole ones
(ZRANGESTORE, ZREMRANGEBY*, the algebra's STORE forms writing a large result afresh). The
module format is the one tests/integration/random/strings.py describes.

Replies compare exactly (a sorted set's order is Redis's), except ZRANDMEMBER (random: by length)
and ZSCAN (Redis walks its dict: compared as sets)."""
from diffgen import cmd, oneof, weighted, some, seq, options, LENGTH, TYPE, SCANALL

FAMILY = "zsets-large"
WEIGHT = 1.0

KEYS = [b"Z0", b"Z1", b"Z2", b"Z3"]
COLD = [b"ZC%d" % i for i in range(8)]   # drawn seldom: their parts age out of a small --memory
key = weighted((9, oneof(*KEYS)), (1, oneof(*COLD)))
STRS = [b"m%d" % i for i in range(300)] + [b"", b"a b", b"\x00\xff", b"x" * 70, b"007", b"1.0"]
member = weighted((3, oneof(*STRS)), (1, oneof(*[b"%d" % i for i in range(100)])))
score = oneof(b"0", b"1", b"-1", b"2.5", b"100", b"-inf", b"+inf", b"1e3", b"0.1", b"3", b"7", b"-0")
pairs = lambda lo, hi: lambda r: [x for _ in range(r.randint(lo, hi)) for x in (score(r), member(r))]  # noqa: E731
rank = oneof(0, 1, 5, -1, -3, 20, 100, -100, 1000)
smin = oneof(b"-inf", b"0", b"(0", b"1", b"(2.5", b"-1", b"3")
smax = oneof(b"+inf", b"100", b"(100", b"7", b"3", b"(3", b"0")
limit = options(seq(b"LIMIT", oneof(0, 1, 3, -1), oneof(1, 5, 20, -1)))

TEMPLATES = [
	cmd("ZADD", key, pairs(1, 6), weight=5),
	cmd("ZADD", key, pairs(30, 120), weight=0.6),
	cmd("ZADD", key, oneof(b"NX", b"XX", b"GT", b"LT", b"CH"), pairs(1, 3), weight=1.5),
	cmd("ZADD", key, b"INCR", score, member, weight=0.5),
	cmd("ZINCRBY", key, score, member, weight=1),
	cmd("ZREM", key, some(member, 1, 5), weight=2),
	cmd("ZSCORE", key, member, weight=3),
	cmd("ZMSCORE", key, some(member, 1, 6), weight=1),
	cmd("ZRANK", key, member, weight=2),
	cmd("ZREVRANK", key, member, weight=1),
	cmd("ZCARD", key, weight=1),
	cmd("ZRANGE", key, rank, rank, options(b"WITHSCORES"), weight=2),
	cmd("ZREVRANGE", key, rank, rank, options(b"WITHSCORES"), weight=1),
	cmd("ZRANGEBYSCORE", key, smin, smax, options(b"WITHSCORES"), limit, weight=1.5),
	cmd("ZREVRANGEBYSCORE", key, smax, smin, limit, weight=1),
	cmd("ZRANGE", key, smin, smax, b"BYSCORE", options(b"REV"), limit, weight=0.5),
	cmd("ZCOUNT", key, smin, smax, weight=1),
	cmd("ZPOPMIN", key, options(oneof(0, 1, 3, 10)), weight=1),
	cmd("ZPOPMAX", key, options(oneof(0, 1, 3, 10)), weight=1),
	cmd("ZREMRANGEBYRANK", key, rank, rank, weight=0.1),
	cmd("ZREMRANGEBYSCORE", key, smin, smax, weight=0.05),
	cmd("ZRANGESTORE", key, key, rank, rank, weight=0.15),
	cmd("ZUNIONSTORE", key, 2, key, key, options(seq(b"WEIGHTS", 2, 1)), weight=0.1),
	cmd("ZINTERSTORE", key, 2, key, key, weight=0.1),
	cmd("ZRANDMEMBER", key, oneof(1, 3, -5), cmp=LENGTH, weight=0.3),
	cmd("ZRANDMEMBER", key, cmp=TYPE, weight=0.2),
	cmd("ZSCAN", key, b"0", cmp=SCANALL, weight=0.2),
]

VOLATILE = {
	"ZRANDMEMBER": "random picks (compared by length and type)",
}

EXCLUDED = {
	"ZRANGEBYLEX": "lex ranges over mixed scores: Redis's skiplist descent and the listpack walk differ (coll/zset.c note 4)",
	"ZLEXCOUNT": "the same",
}
