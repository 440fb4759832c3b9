"""zsets: the sorted-set commands Spillway has (server/cmd_zset*.c), blocking ones aside, over the
shared key space, so sorted sets meet strings and the other types (WRONGTYPE both ways) and the
generic key commands. Members are drawn from a small pool (so commands meet the members earlier
ones added) plus the shared value generator (long members move a set to the skiplist encoding);
scores from integers, Redis's float edge cases and range syntax.
The module format is the one strings.py describes."""
from diffgen import (cmd, key, keys, value, integer, float_, offset, oneof, maybe, seq, some, options,
                     LENGTH, TYPE, SCANALL)

FAMILY = "zsets"
WEIGHT = 1.0

MEMBERS = [b"a", b"b", b"c", b"d", b"ab", b"abc", b"1", b"2", b"10", b"-1", b"", b"x" * 64, b"y" * 65,
           b"\x00\xff"]


def member(r):
	return r.choice(MEMBERS) if r.random() < 0.85 else value(r)


def score(r):
	x = r.random()
	if x < 0.5:
		return r.randint(-5, 5)
	if x < 0.7:
		return r.choice([b"1.5", b"-2.5", b"0.1", b"inf", b"-inf", b"+inf", b"1e18", b"-0"])
	return float_(r)


def range_end(r):
	"""A score range end: a score, exclusive or not, or junk."""
	x = r.random()
	if x < 0.3:
		return b"(" + str(r.randint(-5, 5)).encode()
	if x < 0.45:
		return r.choice([b"-inf", b"+inf", b"(-inf", b"(+inf", b"(", b"", b"x", b"(x", b"nan", b"1.5"])
	return score(r)


def lex_end(r):
	x = r.random()
	if x < 0.2:
		return r.choice([b"-", b"+", b"", b"a", b"-x", b"+x"])
	return (b"[" if r.random() < 0.5 else b"(") + r.choice(MEMBERS[:10])


rank = oneof(0, 1, 2, -1, -2, 3, 5, 100, -100, b"x", 2 ** 63 - 1, -2 ** 63)
limit = seq(b"LIMIT", oneof(0, 1, 2, -1, 5, b"x"), oneof(0, 1, 3, -1, 10, b"x"))
count = oneof(0, 1, 2, 3, 5, 10, 1000, -1, -3, b"x", b"", 2 ** 63 - 1)
zadd_opts = options(b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR", most=3)
zrange_opts = options(b"BYSCORE", b"BYLEX", b"REV", limit, b"WITHSCORES", most=3)
aggregate = seq(b"AGGREGATE", oneof(b"SUM", b"MIN", b"MAX", b"max", b"avg"))


def numkeys_keys(r):
	"""numkeys and its keys: mostly agreeing, sometimes too many or too few, or not a number."""
	n = r.randint(1, 3)
	ks = [key] * n
	x = r.random()
	if x < 0.85:
		return [n] + ks
	if x < 0.93:
		return [n + r.randint(1, 2)] + ks
	return [r.choice([0, -1, b"x"])] + ks


def algebra_opts(r):
	"""WEIGHTS (as many as there are keys, mostly), AGGREGATE, WITHSCORES, in any order."""
	out = []
	for _ in range(r.randint(0, 2)):
		x = r.random()
		if x < 0.4:
			out += [b"WEIGHTS"] + [r.choice([1, 2, -1, 0, b"1.5", b"inf", b"x"]) for _ in range(r.randint(1, 3))]
		elif x < 0.7:
			out.append(aggregate)
		else:
			out.append(b"WITHSCORES")
	return out


TEMPLATES = [
	cmd("ZADD", key, zadd_opts, some(seq(score, member), 1, 4), weight=4),
	cmd("ZADD", key, some(seq(score, member), 1, 3), weight=3),
	cmd("ZINCRBY", key, score, member, weight=1.5),
	cmd("ZREM", key, some(member, 1, 3), weight=1.5),
	cmd("ZCARD", key, weight=1.5),
	cmd("ZSCORE", key, member, weight=1.5),
	cmd("ZMSCORE", key, some(member, 1, 3)),
	cmd("ZRANK", key, member),
	cmd("ZREVRANK", key, member),
	cmd("ZCOUNT", key, range_end, range_end),
	cmd("ZLEXCOUNT", key, lex_end, lex_end),
	cmd("ZRANGE", key, rank, rank, maybe(b"WITHSCORES"), weight=2),
	cmd("ZRANGE", key, range_end, range_end, zrange_opts, weight=2),
	cmd("ZRANGE", key, lex_end, lex_end, b"BYLEX", zrange_opts),
	cmd("ZRANGESTORE", key, key, rank, rank, zrange_opts),
	cmd("ZREVRANGE", key, rank, rank, maybe(b"WITHSCORES")),
	cmd("ZRANGEBYSCORE", key, range_end, range_end, options(b"WITHSCORES", limit, most=2), weight=1.5),
	cmd("ZREVRANGEBYSCORE", key, range_end, range_end, options(b"WITHSCORES", limit, most=2)),
	cmd("ZRANGEBYLEX", key, lex_end, lex_end, maybe(limit)),
	cmd("ZREVRANGEBYLEX", key, lex_end, lex_end, maybe(limit)),
	cmd("ZREMRANGEBYRANK", key, rank, rank, weight=0.5),
	cmd("ZREMRANGEBYSCORE", key, range_end, range_end, weight=0.5),
	cmd("ZREMRANGEBYLEX", key, lex_end, lex_end, weight=0.5),
	cmd("ZPOPMIN", key, maybe(count, 0.5)),
	cmd("ZPOPMAX", key, maybe(count, 0.5)),
	cmd("ZMPOP", numkeys_keys, oneof(b"MIN", b"MAX", b"max", b"bogus"), maybe(seq(b"COUNT", count), 0.5)),
	cmd("ZRANDMEMBER", key, cmp=TYPE, weight=0.5),
	cmd("ZRANDMEMBER", key, count, maybe(b"WITHSCORES"), cmp=LENGTH, weight=0.5),
	cmd("ZSCAN", key, 0, options(seq(b"COUNT", oneof(1, 5, 100, 0, b"x")), seq(b"MATCH", oneof(b"*", b"a*", b"?")),
	                         most=2), cmp=SCANALL, weight=0.5),
	cmd("ZUNION", numkeys_keys, algebra_opts),
	cmd("ZINTER", numkeys_keys, algebra_opts),
	cmd("ZDIFF", numkeys_keys, maybe(b"WITHSCORES")),
	cmd("ZINTERCARD", numkeys_keys, maybe(seq(b"LIMIT", oneof(0, 1, 2, -1, b"x")))),
	cmd("ZUNIONSTORE", key, numkeys_keys, algebra_opts),
	cmd("ZINTERSTORE", key, numkeys_keys, algebra_opts),
	cmd("ZDIFFSTORE", key, numkeys_keys),
]

VOLATILE = {}

EXCLUDED = {
	"BZPOPMIN": "blocking commands are not implemented",
	"BZPOPMAX": "blocking commands are not implemented",
	"BZMPOP": "blocking commands are not implemented",
}
