"""strings: every string command Spillway has (server/cmd_string.c), over the shared key space.

A family module (docs/ARCHITECTURE.md, "The randomized differential test") defines:
  FAMILY     its name, printed with each mismatch;
  TEMPLATES  a list of diffgen.cmd(...) templates, each with its comparator (EXACT by default);
  VOLATILE   {command: why} for commands whose replies differ by design (a template using one must
             not compare exactly);
  EXCLUDED   {command: why} for commands of this family that are never generated;
  WEIGHT     (optional, default 1) how often this family is drawn against the others.
"""
from diffgen import (cmd, key, keys, value, integer, float_, offset, oneof, maybe, seq, some, options,
                     near)

FAMILY = "strings"
WEIGHT = 1.0

# Relative TTLs only large ones (no reply may depend on the clock); GET/SET's options are drawn in
# any order and combination, conflicting ones included.
ttl_s = oneof(1000, 86400, 123456, 0, -1, b"abc", 2 ** 63 - 1, 9223372036854776, b"1.5")
ttl_ms = oneof(1000000, 86400000, 123456789, 0, -1, b"abc", 2 ** 63 - 1, b"")
# SET ... EXAT/PXAT with a time in the past stores a key that is already expired: DBSIZE counts it
# until the active expiry cycle removes it, a moment that differs between the servers. So SET gets
# only future or invalid absolute times; GETEX (which deletes at once) gets past ones too.
set_at_s = oneof(4102444800, 32503680000, 0, -5, 2 ** 62)
set_at_ms = oneof(4102444800000, 32503680000123, -5, 9223372036854775807)
at_s = oneof(4102444800, 32503680000, 1, 0, -5, 2 ** 62)
at_ms = oneof(4102444800000, 32503680000123, 1, -5, 9223372036854775807)

set_opts = options(b"NX", b"XX", b"GET", b"KEEPTTL", seq(b"EX", ttl_s), seq(b"PX", ttl_ms),
                   seq(b"EXAT", set_at_s), seq(b"PXAT", set_at_ms), most=3)
getex_opts = options(seq(b"EX", ttl_s), seq(b"PX", ttl_ms), seq(b"EXAT", at_s), seq(b"PXAT", at_ms),
                     b"PERSIST", most=2)

TEMPLATES = [
	cmd("GET", key, weight=4),
	cmd("GET", key, key, weight=0.1),
	cmd("SET", key, value, weight=4),
	cmd("SET", key, value, set_opts, weight=3),
	cmd("SET", key, value, maybe(oneof(b"ex", b"px", b"nx", b"xx", b"get", b"bogus"), 0.8), maybe(ttl_s),
	    weight=0.5),
	cmd("SETNX", key, value),
	cmd("SETEX", key, ttl_s, value),
	cmd("PSETEX", key, ttl_ms, value),
	cmd("GETSET", key, value),
	cmd("GETDEL", key),
	cmd("GETEX", key, getex_opts),
	cmd("GETEX", key, oneof(b"EX", b"PX", b"PERSIST", b"NOPE"), maybe(ttl_s), weight=0.3),
	cmd("MGET", keys(1, 6), weight=2),
	cmd("MSET", some(seq(key, value), 1, 4), weight=1.5),
	cmd("MSET", keys(1, 3), weight=0.1),
	cmd("MSETNX", some(seq(key, value), 1, 3)),
	cmd("INCR", key, weight=2),
	cmd("DECR", key),
	cmd("INCRBY", key, integer, weight=1.5),
	cmd("DECRBY", key, integer),
	cmd("INCRBYFLOAT", key, float_, weight=1.5),
	cmd("APPEND", key, value, weight=1.5),
	cmd("STRLEN", key),
	cmd("GETRANGE", key, offset, offset, weight=1.5),
	cmd("SUBSTR", key, offset, offset),
	cmd("SETRANGE", key, offset, value, weight=1.5),
	cmd("SET", key, oneof(0, 1, -1, 10, 2 ** 63 - 1, -2 ** 63, b"1.5", b"2.5e3"), weight=1.5),
	# read a relative expiry back: a few ms apart on the two servers (diffgen.near)
	cmd("TTL", key, cmp=near(30), weight=0.5),
]

VOLATILE = {}

EXCLUDED = {
	"LCS": "not in Spillway's command table yet",
	"SETBIT": "the bitmap family's",
}
