"""hash: every hash command Spillway has (server/cmd_hash.c), over the shared key space.

Fields come from a small set (ints, a 65-byte field that makes a hash a hashtable, the empty one)
so that commands meet each other's fields. Replies that list a whole hash compare sorted: a hash
that got a long value, or more than 128 fields, is in dict order in Redis (cmd_hash.c note 3).
HRANDFIELD's picks are random: only their count is compared, its errors exactly.
"""
from diffgen import (cmd, key, value, integer, float_, oneof, maybe, some, seq, SORTED, LENGTH,
                     TYPE)

FAMILY = "hash"
WEIGHT = 1.0

field = oneof(b"f0", b"f1", b"f2", b"f3", b"1", b"-3", b"01", b"", b"a b", b"\x00\xff", b"n" * 65)
pairs = some(seq(field, value), 1, 4)
count = oneof(0, 1, 2, 5, 200, -1, -3, -50, b"x", b"1.5", -9223372036854775808, 4611686018427387904)

TEMPLATES = [
	cmd("HSET", key, pairs, weight=4),
	cmd("HSET", key, field, weight=0.1),
	cmd("HMSET", key, pairs),
	cmd("HSETNX", key, field, value),
	cmd("HGET", key, field, weight=3),
	cmd("HMGET", key, some(field, 1, 4), weight=1.5),
	cmd("HDEL", key, some(field, 1, 3), weight=2),
	cmd("HEXISTS", key, field),
	cmd("HLEN", key, weight=1.5),
	cmd("HSTRLEN", key, field),
	cmd("HKEYS", key, cmp=SORTED),
	cmd("HVALS", key, cmp=SORTED),
	cmd("HGETALL", key, cmp=SORTED, weight=1.5),
	cmd("HINCRBY", key, field, integer, weight=1.5),
	cmd("HINCRBYFLOAT", key, field, float_, weight=1.5),
	cmd("HRANDFIELD", key, weight=0.3, cmp=TYPE),
	cmd("HRANDFIELD", key, count, maybe(oneof(b"WITHVALUES", b"withvalues", b"bogus"), 0.5),
	    cmp=LENGTH),
]

VOLATILE = {}

EXCLUDED = {
	"HSCAN": "a hashtable-encoded hash's cursor walk differs by design (cmd_hash.c note 5); "
	         "diff/hash.txt compares whole walks with !scanall",
}
