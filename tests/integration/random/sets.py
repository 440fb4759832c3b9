"""sets: every set command Spillway has (server/cmd_set.c, cmd_set_multi.c), over the shared key
space (so strings answer WRONGTYPE and STORE forms overwrite them). The module format is the one
strings.py describes.

A set holding a non-integer is a dict in Redis and replies in an order Spillway does not share, so
whole-set replies compare SORTED; an intset replies ascending on both. Random picks change no state
here: SRANDMEMBER compares lengths and types, SPOP only pops the whole set (a count past any set
this stream builds) or a missing / wrong-type key."""
from diffgen import cmd, key, keys, integer, oneof, some, seq, options, SORTED, LENGTH, TYPE, SKIP

FAMILY = "sets"
WEIGHT = 1.0

# Mostly integers (intsets, their widths and the 512-entry limit stay reachable with SADD of many),
# some strings (dict sets), integer-looking strings that are not integers, a value past 64 bytes.
member = oneof(b"1", b"2", b"3", b"4", b"5", b"-7", b"100000", b"9223372036854775807",
               b"-9223372036854775808", b"a", b"b", b"c", b"007", b"+1", b"1.0", b"", b"x" * 70,
               b"\x00\xff")
count = oneof(0, 1, 2, 3, 10, -1, -3, b"x", b"1.5", 2 ** 63 - 1, -2 ** 63)
sscan_opts = options(seq(b"MATCH", oneof(b"*", b"1*", b"a", b"[0-9]", b"")),
                     seq(b"COUNT", oneof(1, 10, 0, -1, b"x")), most=2)

TEMPLATES = [
	cmd("SADD", key, some(member, 1, 6), weight=4),
	cmd("SADD", key, some(oneof(*[b"%d" % i for i in range(600)]), 100, 200), weight=0.1),
	cmd("SREM", key, some(member, 1, 4), weight=2),
	cmd("SCARD", key, weight=1.5),
	cmd("SISMEMBER", key, member, weight=1.5),
	cmd("SMISMEMBER", key, some(member, 1, 4)),
	cmd("SMEMBERS", key, cmp=SORTED, weight=1.5),
	cmd("SRANDMEMBER", key, cmp=TYPE, weight=0.5),
	cmd("SRANDMEMBER", key, count, cmp=LENGTH),
	cmd("SPOP", key, oneof(100000, 0, -1, b"x"), cmp=SORTED),
	cmd("SMOVE", key, key, member, weight=1.5),
	cmd("SINTER", keys(1, 3), cmp=SORTED, weight=1.5),
	cmd("SUNION", keys(1, 3), cmp=SORTED, weight=1.5),
	cmd("SDIFF", keys(1, 3), cmp=SORTED, weight=1.5),
	cmd("SINTERCARD", oneof(1, 2, 3), keys(1, 3), options(seq(b"LIMIT", oneof(0, 1, 2, -1, b"x"))),
	    weight=1),
	cmd("SINTERSTORE", key, keys(1, 3)),
	cmd("SUNIONSTORE", key, keys(1, 3)),
	cmd("SDIFFSTORE", key, keys(1, 3)),
	cmd("SSCAN", key, oneof(b"0", b"0", b"7", b"x"), sscan_opts, cmp=SKIP, weight=0.3),
	cmd("SSCAN", key, oneof(b"x", b"-"), sscan_opts, weight=0.1),
]

VOLATILE = {
	"SRANDMEMBER": "random picks (compared by length and type)",
}

EXCLUDED = {
	"SPOP key": "a random member of a set of several leaves the servers with different sets",
}
