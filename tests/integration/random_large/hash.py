"""hash (large layout): the hash commands over a handful of keys, with a field space of hundreds, so
that with hash-max-listpack-entries 4 and spillway's --coll-record-max 128 (the "large" rounds of
diff_random.py, docs/ARCHITECTURE.md "Large collections") most hashes are hashtable-encoded, become
large, and grow through many bucket splits; bulk HDELs and DELs empty some again (a large collection
stays large until it is empty, then its head goes). The module format is the one
tests/integration/random/strings.py describes.

Whole-hash replies compare sorted: a large hash answers in bucket order, redis-server in dict
order. HSCAN is followed to its end on each server and the walks compared as sets (SCANALL): the
cursor over buckets differs by design, what a whole walk returns does not. RENAME and COPY of a
large hash go through the whole-read path (they write a small-layout record that converts again on
its next write): they are drawn here so that this path meets the others.
"""
from diffgen import (cmd, oneof, weighted, maybe, some, seq, integer, float_, near, SORTED, LENGTH,
                     TYPE, SCANALL)

FAMILY = "hash-large"
WEIGHT = 1.0

# A few keys shared with the sets module (WRONGTYPE, STORE forms overwriting a large hash).
KEYS = [b"L0", b"L1", b"L2", b"L3", b"L4", b"L5"]
COLD = [b"C%d" % i for i in range(16)]   # drawn seldom: their parts age out of a small --memory
key = weighted((9, oneof(*KEYS)), (1, oneof(*COLD)))
FIELDS = [b"f%d" % i for i in range(500)] + [b"%d" % i for i in range(100)]
field = weighted((30, oneof(*FIELDS)), (1, oneof(b"", b"a b", b"\x00\xff", b"n" * 70, b"-3", b"01")))


def value(r):
	"""Short values mostly; now and then one of a few hundred bytes (a pair bigger than a bucket's
	usual share), never the several KB of diffgen.value (the tier round would only wait on them)."""
	x = r.random()
	if x < 0.5:
		return r.choice([b"", b"0", b"1", b"-1", b"10", b"1.5", b"abc", b"9223372036854775807"])
	if x < 0.95:
		return bytes(r.choice(b"ab\x00\xff 1") for _ in range(r.randint(1, 24)))
	return r.choice([b"x", b"\x00\xfe"]) * r.randint(100, 700)


pairs = some(seq(field, value), 1, 6)
bulk_pairs = some(seq(field, value), 30, 90)
count = oneof(0, 1, 2, 5, 50, 400, 1000, -1, -7, -300, b"x")
scan_opts = lambda r: r.sample([[b"COUNT", r.choice([1, 7, 50, 1000])],  # noqa: E731
                                [b"MATCH", r.choice([b"f1*", b"*", b"1?", b"[a-f]*"])]],
                               r.randint(0, 2))

TEMPLATES = [
	cmd("HSET", key, pairs, weight=5),
	cmd("HSET", key, bulk_pairs, weight=0.6),
	cmd("HMSET", key, pairs),
	cmd("HSETNX", key, field, value),
	cmd("HGET", key, field, weight=4),
	cmd("HMGET", key, some(field, 1, 8), weight=1.5),
	cmd("HDEL", key, some(field, 1, 4), weight=2),
	cmd("HDEL", key, some(field, 40, 200), weight=0.15),
	cmd("HEXISTS", key, field, weight=1.5),
	cmd("HLEN", key, weight=1.5),
	cmd("HSTRLEN", key, field),
	cmd("HKEYS", key, cmp=SORTED, weight=0.4),
	cmd("HVALS", key, cmp=SORTED, weight=0.4),
	cmd("HGETALL", key, cmp=SORTED, weight=0.6),
	cmd("HINCRBY", key, field, integer, weight=1.5),
	cmd("HINCRBYFLOAT", key, field, float_),
	cmd("HRANDFIELD", key, weight=0.3, cmp=TYPE),
	cmd("HRANDFIELD", key, count, maybe(b"WITHVALUES", 0.5), weight=0.5, cmp=LENGTH),
	cmd("HSCAN", key, b"0", scan_opts, cmp=SCANALL, weight=0.3),
	cmd("TYPE", key, weight=0.3),
	cmd("EXISTS", some(key, 1, 3), weight=0.3),
	cmd("DEL", key, weight=0.08),
	cmd("UNLINK", key, weight=0.04),
	cmd("RENAME", key, key, weight=0.08),
	cmd("COPY", key, key, maybe(b"REPLACE", 0.7), weight=0.08),
	cmd("EXPIRE", key, oneof(100000, 200000), weight=0.05),
	cmd("PERSIST", key, weight=0.05),
	cmd("TTL", key, cmp=near(30), weight=0.1),
	cmd("DBSIZE", weight=0.1),
]

VOLATILE = {}

EXCLUDED = {}
