"""hll: PFADD PFCOUNT PFMERGE (server/cmd_hll.c) over the shared key space, with GET to compare the
HLLs' bytes. Keys other families left as plain strings answer "WRONGTYPE Key is not a valid
HyperLogLog string value."; SETRANGE at the header and the first opcodes corrupts some HLLs
(INVALIDOBJ, a bogus cached cardinality); hll-sparse-max-bytes moves between a few values so that
promotions to dense happen at other sizes.

Notes:
 1. Elements come from a pool of a few thousand, so repeated PFADDs on a hot key grow it from
    sparse through the promotion to dense (3000 bytes by default) within a round, and re-adding
    answers 0.
 2. hll-sparse-max-bytes is set on both servers alike; a round's FLUSHALL does not reset it, which
    changes nothing for the comparison.
The module format is the one strings.py describes.
"""
from diffgen import cmd, key, keys, oneof, some, weighted

FAMILY = "hll"
WEIGHT = 0.6


def element(r):
	"""An element: mostly from a pool of 4000, sometimes binary or empty."""
	x = r.random()
	if x < 0.9:
		return b"e%d" % r.randint(0, 3999)
	return r.choice([b"", b"\x00", b"\xff\xfe", b"a b", b"e1", b"\r\n"])


corrupt_at = oneof(4, 8, 15, 16, 17, 18, 20, 40, 12303)
corrupt_with = oneof(b"\x80", b"\x00", b"\x7f", b"\xff\xff", b"\x40", b"\x02", b"\x05\x00\x00")

TEMPLATES = [
	cmd("PFADD", key, some(element, 0, 8), weight=4),
	cmd("PFADD", key, some(element, 50, 400), weight=1.5),
	cmd("PFCOUNT", key, weight=3),
	cmd("PFCOUNT", keys(2, 4), weight=1.5),
	cmd("PFMERGE", key, keys(0, 4), weight=1.5),
	cmd("GET", key, weight=1.5),
	cmd("SETRANGE", key, corrupt_at, corrupt_with, weight=0.3),
	cmd("APPEND", key, oneof(b"\x80", b"\x01", b"\x7f", b"x"), weight=0.15),
	cmd("CONFIG", "SET", b"hll-sparse-max-bytes",
	    weighted((3, 3000), (1, 0), (1, 100), (1, 1000), (1, 20000)), weight=0.1),
	cmd("PFADD", weight=0.05),
	cmd("PFCOUNT", weight=0.05),
	cmd("PFMERGE", weight=0.05),
]

VOLATILE = {}

EXCLUDED = {
	"PFDEBUG": "not implemented (a debugging command, not in issue 13's list)",
	"PFSELFTEST": "not implemented (coll/hll.c's unit tests check the registers instead)",
}
