"""lists: the list commands Spillway has (server/cmd_list.c), blocking ones aside, over the shared key
space, so lists meet strings (WRONGTYPE both ways) and the generic key commands.
The module format is the one strings.py describes."""
from diffgen import (cmd, key, keys, value, integer, offset, oneof, maybe, seq, some, options)

FAMILY = "lists"
WEIGHT = 1.0

side = oneof(b"LEFT", b"RIGHT", b"left", b"right", b"MIDDLE")
# Pop counts: LPOP/RPOP take 0 and reject negatives; LMPOP's COUNT must be > 0.
count = oneof(0, 1, 2, 3, 5, 10, 1000, -1, b"x", b"", 2 ** 63 - 1, 2 ** 63)
element = oneof(b"a", b"b", b"1", b"01", b"", value)
lpos_opts = options(seq(b"RANK", oneof(1, 2, -1, -2, 0, 5, b"x", -2 ** 63)),
                    seq(b"COUNT", oneof(0, 1, 2, -1, b"x")),
                    seq(b"MAXLEN", oneof(0, 1, 3, 100, -1, b"x")), b"BOGUS", most=3)


def lmpop_keys(r):
	"""LMPOP's numkeys and keys: mostly agreeing, sometimes too many or too few, or not a number."""
	n = r.randint(1, 4)
	ks = [key] * n
	x = r.random()
	if x < 0.8:
		return [n] + ks
	if x < 0.9:
		return [n + r.randint(1, 3)] + ks
	return [r.choice([0, -1, b"x", 2 ** 63 - 1])] + ks


TEMPLATES = [
	cmd("LPUSH", key, some(element, 1, 5), weight=3),
	cmd("RPUSH", key, some(element, 1, 5), weight=3),
	cmd("LPUSHX", key, some(element, 1, 3)),
	cmd("RPUSHX", key, some(element, 1, 3)),
	cmd("LPOP", key, maybe(count, 0.4), weight=2),
	cmd("RPOP", key, maybe(count, 0.4), weight=2),
	cmd("LPOP", key, count, count, weight=0.1),
	cmd("LLEN", key, weight=1.5),
	cmd("LINDEX", key, offset, weight=1.5),
	cmd("LSET", key, offset, element),
	cmd("LRANGE", key, offset, offset, weight=2),
	cmd("LTRIM", key, offset, offset, weight=0.5),
	cmd("LREM", key, integer, element),
	cmd("LINSERT", key, oneof(b"BEFORE", b"AFTER", b"before", b"bogus"), element, element),
	cmd("LPOS", key, element, lpos_opts, weight=1.5),
	cmd("LMOVE", key, key, side, side, weight=1.5),
	cmd("RPOPLPUSH", key, key),
	cmd("LMPOP", lmpop_keys, side, maybe(seq(b"COUNT", count), 0.5), weight=1.5),
]

VOLATILE = {}

EXCLUDED = {
	"BLPOP": "blocking commands are not implemented",
	"BRPOP": "blocking commands are not implemented",
	"BLMOVE": "blocking commands are not implemented",
	"BRPOPLPUSH": "blocking commands are not implemented",
	"BLMPOP": "blocking commands are not implemented",
}
