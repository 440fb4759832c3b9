"""lists (large layout): the list commands over the handful of keys hash.py and sets.py share, with
pushes of many elements at once, so that with spillway's --coll-record-max 128 (the "large" rounds
of diff_random.py) a list past 256 bytes becomes a deque of node parts (server/coll_list_large.c)
and grows over many nodes. Indexes reach hundreds in both directions, so LINDEX, LSET, LRANGE and
LTRIM land in interior nodes and in the end nodes held in the head; pops with counts cross node
boundaries; LINSERT, LREM and LPOS take the whole path and rewrite the list afresh; LMOVE,
RPOPLPUSH and LMPOP move between large, small and absent lists; RENAME and COPY read it whole.
Replies compare exactly: a large list answers in Redis's order. The module format is the one
tests/integration/random/strings.py describes."""
from diffgen import cmd, oneof, weighted, some, seq, maybe, options

FAMILY = "lists-large"
WEIGHT = 1.0

KEYS = [b"L0", b"L1", b"L2", b"L3", b"L4", b"L5"]
COLD = [b"C%d" % i for i in range(16)]   # drawn seldom: their nodes age out of a small --memory
key = weighted((9, oneof(*KEYS)), (1, oneof(*COLD)))
ELEMS = [b"e%d" % i for i in range(60)] + [b"%d" % i for i in range(40)]
element = weighted((30, oneof(*ELEMS)), (1, oneof(b"", b"a b", b"\x00\xff", b"n" * 90, b"-7", b"007")))
side = oneof(b"LEFT", b"RIGHT")


def index(r):
	"""An index: near either end mostly, anywhere in a few hundred, sometimes past any list here."""
	x = r.random()
	if x < 0.4:
		return r.randint(-12, 12)
	if x < 0.9:
		return r.randint(-700, 700)
	return r.choice([5000, -5000, 2 ** 63 - 1, -2 ** 63, b"x"])


count = oneof(1, 2, 5, 17, 60, 200, 1000, 0)
lpos_opts = options(seq(b"RANK", oneof(1, 2, -1, -3)), seq(b"COUNT", oneof(0, 1, 4)),
                    seq(b"MAXLEN", oneof(0, 10, 300)), most=3)

TEMPLATES = [
	cmd("RPUSH", key, some(element, 1, 6), weight=3),
	cmd("LPUSH", key, some(element, 1, 6), weight=3),
	cmd("RPUSH", key, some(element, 20, 90), weight=0.8),
	cmd("LPUSH", key, some(element, 20, 90), weight=0.8),
	cmd("LPUSHX", key, some(element, 1, 4), weight=0.5),
	cmd("RPUSHX", key, some(element, 1, 4), weight=0.5),
	cmd("LPOP", key, maybe(count, 0.5), weight=2),
	cmd("RPOP", key, maybe(count, 0.5), weight=2),
	cmd("LLEN", key, weight=1),
	cmd("LINDEX", key, index, weight=3),
	cmd("LSET", key, index, element, weight=1.5),
	cmd("LRANGE", key, index, index, weight=2),
	cmd("LRANGE", key, 0, -1, weight=0.3),
	cmd("LTRIM", key, index, index, weight=0.2),
	cmd("LTRIM", key, oneof(0, 1, 5, 30), oneof(-1, -2, -40, 400), weight=0.3),
	cmd("LREM", key, oneof(0, 1, 2, -1, -3), element, weight=0.4),
	cmd("LINSERT", key, oneof(b"BEFORE", b"AFTER"), element, element, weight=0.4),
	cmd("LPOS", key, element, lpos_opts, weight=0.8),
	cmd("LMOVE", key, key, side, side, weight=1),
	cmd("RPOPLPUSH", key, key, weight=0.5),
	cmd("LMPOP", oneof(1, 2), key, key, side, maybe(seq(b"COUNT", count), 0.5), weight=0.5),
	cmd("RENAME", key, key, weight=0.05),
	cmd("COPY", key, key, weight=0.05),
]

VOLATILE = {}

EXCLUDED = {}
