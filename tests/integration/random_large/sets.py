"""sets (large layout): the set commands over the handful of keys hash.py shares, with a member
space of hundreds (integers, so intsets stay reachable below set-max-intset-entries, and strings),
so that with set-max-intset-entries 4 and --coll-record-max 128 (diff_random.py's "large" rounds)
most sets are hashtable-encoded and large, and grow through bucket splits. The STORE forms write
whole results (a large destination replaced, a new one converting), SMOVE moves between two large
sets, SPOP empties one (a large collection stays large until it is empty). The module format is the
one tests/integration/random/strings.py describes.

Whole-set replies compare sorted (bucket order against Redis's dict order); SSCAN walks compare as
sets (SCANALL); random picks by length and type; SPOP only pops a whole set (a count past any set
here), as random/sets.py."""
from diffgen import cmd, oneof, weighted, some, seq, options, SORTED, LENGTH, TYPE, SCANALL

FAMILY = "sets-large"
WEIGHT = 1.0

KEYS = [b"L0", b"L1", b"L2", b"L3", b"L4", b"L5"]
COLD = [b"C%d" % i for i in range(16)]   # drawn seldom: their parts age out of a small --memory
key = weighted((9, oneof(*KEYS)), (1, oneof(*COLD)))
keys = lambda lo, hi: some(key, lo, hi)  # noqa: E731
INTS = [b"%d" % i for i in range(400)] + [b"-9223372036854775808", b"9223372036854775807"]
STRS = [b"m%d" % i for i in range(400)] + [b"", b"a b", b"\x00\xff", b"x" * 70, b"007", b"1.0"]
member = weighted((3, oneof(*STRS)), (2, oneof(*INTS)))
count = oneof(0, 1, 3, 50, 500, 2000, -1, -5, -600, b"x")
scan_opts = lambda r: r.sample([[b"COUNT", r.choice([1, 7, 50, 1000])],  # noqa: E731
                                [b"MATCH", r.choice([b"m1*", b"*", b"1?", b"[0-4]*"])]],
                               r.randint(0, 2))

TEMPLATES = [
	cmd("SADD", key, some(member, 1, 8), weight=5),
	cmd("SADD", key, some(member, 40, 150), weight=0.6),
	cmd("SADD", key, some(oneof(*INTS), 3, 12), weight=0.3),
	cmd("SREM", key, some(member, 1, 5), weight=2),
	cmd("SREM", key, some(member, 50, 250), weight=0.15),
	cmd("SCARD", key, weight=1.5),
	cmd("SISMEMBER", key, member, weight=4),
	cmd("SMISMEMBER", key, some(member, 1, 8), weight=1.5),
	cmd("SMEMBERS", key, cmp=SORTED, weight=0.5),
	cmd("SRANDMEMBER", key, cmp=TYPE, weight=0.3),
	cmd("SRANDMEMBER", key, count, cmp=LENGTH, weight=0.5),
	cmd("SPOP", key, oneof(100000, 0, -1), cmp=SORTED, weight=0.05),
	cmd("SMOVE", key, key, member, weight=1.5),
	cmd("SINTER", keys(1, 3), cmp=SORTED, weight=0.4),
	cmd("SUNION", keys(1, 3), cmp=SORTED, weight=0.3),
	cmd("SDIFF", keys(1, 3), cmp=SORTED, weight=0.4),
	cmd("SINTERCARD", oneof(1, 2, 3), keys(1, 3), options(seq(b"LIMIT", oneof(0, 1, 20, -1)))),
	cmd("SINTERSTORE", key, keys(1, 3), weight=0.15),
	cmd("SUNIONSTORE", key, keys(1, 3), weight=0.15),
	cmd("SDIFFSTORE", key, keys(1, 3), weight=0.15),
	cmd("SSCAN", key, b"0", scan_opts, cmp=SCANALL, weight=0.3),
]

VOLATILE = {
	"SRANDMEMBER": "random picks (compared by length and type)",
}

EXCLUDED = {
	"SPOP key": "a random member of a set of several leaves the servers with different sets",
}
