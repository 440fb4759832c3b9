"""bits: the bitmap commands and LCS (server/cmd_bits.c, server/cmd_lcs.c), over the shared key space.

Bitmaps are strings, so these commands meet the values the strings family writes and the other way
round. Bit offsets stay small (a SETBIT at 2^32-1 makes Redis allocate 512 MB) but reach past the
end, and the refused ones (negative, 2^32, not a number) are drawn too. See strings.py for what a
family module defines.
"""
from diffgen import cmd, key, keys, integer, oneof, maybe, seq, some, weighted

FAMILY = "bits"
WEIGHT = 0.8

bit_offset = weighted((6, oneof(0, 1, 7, 8, 9, 15, 63, 64, 100, 333, 1000, 4095)),
                      (1, oneof(-1, 4294967296, 2 ** 63, b"abc", b"", b"1.5", b"+1", b"007")))
bit = weighted((8, oneof(0, 1)), (1, oneof(2, -1, b"x", b"01", b"")))
index = weighted((6, oneof(0, 1, 2, 3, -1, -2, -3, 5, 7, 8, 15, 40, -40, 100)),
                 (1, oneof(2 ** 63 - 1, -2 ** 63, b"abc", b"")))
unit = oneof(b"BIT", b"BYTE", b"bit", b"byte", b"NIBBLE")
ftype = weighted((8, oneof(b"u1", b"u4", b"u8", b"i8", b"u13", b"i16", b"u32", b"i32", b"i63", b"u63",
                           b"i64")),
                 (1, oneof(b"u64", b"i65", b"u0", b"x8", b"U8", b"")))
field_offset = weighted((5, oneof(0, 1, 3, 7, 8, 21, 64, 200, b"#0", b"#1", b"#3", b"#10")),
                        (1, oneof(-1, b"#", b"#-1", 4294967296, b"abc")))
overflow = seq(b"OVERFLOW", weighted((6, oneof(b"WRAP", b"SAT", b"FAIL", b"sat")), (1, oneof(b"BAD",))))
subcommand = weighted((4, seq(b"GET", ftype, field_offset)),
                      (3, seq(b"SET", ftype, field_offset, integer)),
                      (3, seq(b"INCRBY", ftype, field_offset, integer)),
                      (2, overflow),
                      (0.2, oneof(b"FOO", b"GET")))
get_only = weighted((5, seq(b"GET", ftype, field_offset)), (1, overflow), (0.3, seq(b"SET", ftype, field_offset, integer)))

TEMPLATES = [
	cmd("SETBIT", key, bit_offset, bit, weight=4),
	cmd("GETBIT", key, bit_offset, weight=2),
	cmd("BITCOUNT", key, weight=1.5),
	cmd("BITCOUNT", key, index, index, maybe(unit, 0.6), weight=2),
	cmd("BITCOUNT", key, maybe(index, 0.7), maybe(index), maybe(unit), maybe(b"extra", 0.1), weight=0.3),
	cmd("BITPOS", key, bit, weight=1.5),
	cmd("BITPOS", key, bit, index, maybe(index, 0.6), weight=1.5),
	cmd("BITPOS", key, bit, index, index, unit, weight=1.5),
	cmd("BITOP", oneof(b"AND", b"OR", b"XOR", b"and"), key, keys(1, 4), weight=1.5),
	cmd("BITOP", b"NOT", key, key, weight=0.7),
	cmd("BITOP", oneof(b"NOT", b"NAND", b""), key, keys(0, 2), weight=0.2),
	cmd("BITFIELD", key, some(subcommand, 0, 4), weight=3),
	cmd("BITFIELD_RO", key, some(get_only, 0, 3), weight=1),
	cmd("LCS", key, key, weight=0.5),
	cmd("LCS", key, key, oneof(b"LEN", b"IDX", b"WITHMATCHLEN", b"LEN IDX"), weight=0.4),
	cmd("LCS", key, key, b"IDX", maybe(seq(b"MINMATCHLEN", oneof(0, 1, 2, 4, -1, b"x"))), maybe(b"WITHMATCHLEN"),
	    weight=0.5),
	cmd("LCS", key, key, maybe(b"LEN"), maybe(b"IDX"), maybe(b"BOGUS", 0.2), weight=0.1),
]

VOLATILE = {}

EXCLUDED = {}
