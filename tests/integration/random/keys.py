"""keys: the generic key commands Spillway has (server/cmd_keys.c): existence, deletion, renames,
copies, KEYS and SCAN, TYPE, DBSIZE, RANDOMKEY, FLUSHDB/FLUSHALL, over the shared key space.
The module format is the one strings.py describes."""
from diffgen import (cmd, key, keys, hot_key, integer, oneof, maybe, seq, options, SORTED, TYPE,
                     SCANALL)

FAMILY = "keys"
WEIGHT = 1.0

# KEYS/SCAN MATCH patterns: globs that match some hot keys, none, all, and malformed ones (an open
# class, a trailing backslash) whose matching quirks Spillway must reproduce.
pattern = oneof(b"*", b"k*", b"k[0-3]", b"k[^0-3]", b"?", b"??", b"w:1*", b"w:99?", b"\x00*", b"[",
                b"k\\", b"k\\*", b"*a*b*", b"", b"a b", b"[a-", b"k[1-]", b"[]]", b"K*", b"*\xff")
scan_cursor = oneof(b"0", b"0", b"0", b"abc", b"", b"1.5", b"18446744073709551616")
scan_opts = options(seq(b"MATCH", pattern), seq(b"COUNT", oneof(1, 5, 100, 1000, 0, -1, b"x")),
                    seq(b"TYPE", oneof(b"string", b"hash", b"list", b"none", b"STRING", b"bogus")),
                    most=3)

TEMPLATES = [
	cmd("EXISTS", keys(1, 4), weight=2),
	cmd("DEL", keys(1, 3), weight=1.5),
	cmd("UNLINK", keys(1, 3)),
	cmd("TYPE", key, weight=1.5),
	cmd("TOUCH", keys(1, 3)),
	cmd("RENAME", key, key, weight=1.5),
	cmd("RENAMENX", key, key),
	cmd("COPY", key, key, options(b"REPLACE", seq(b"DB", oneof(0, 1, -1, b"x")), most=2), weight=1.5),
	cmd("KEYS", pattern, cmp=SORTED, weight=0.25),
	cmd("SCAN", scan_cursor, scan_opts, cmp=SCANALL, weight=0.15),
	cmd("RANDOMKEY", cmp=TYPE, weight=0.3),
	cmd("DBSIZE", weight=0.5),
	cmd("FLUSHDB", maybe(oneof(b"ASYNC", b"SYNC", b"bogus"), 0.3), weight=0.002),
	cmd("FLUSHALL", maybe(oneof(b"ASYNC", b"SYNC"), 0.3), weight=0.002),
	cmd("SELECT", oneof(0, 1, -1, b"x", 16)),
	cmd("PING", maybe(oneof(b"hello", b"", b"\x00\r\n")), weight=0.3),
	cmd("ECHO", oneof(b"hello", b"", b"\x00\r\n", b"a b"), weight=0.3),
	cmd("EXISTS", hot_key, hot_key, hot_key, weight=0.5),
	cmd("DEL", integer, weight=0.1),
]

VOLATILE = {}

EXCLUDED = {
	"SWAPDB": "Spillway has one database and no SWAPDB",
	"MOVE": "Spillway has one database and no MOVE",
	"OBJECT": "encodings and idle times differ by design (volatile in test_differential.c)",
}
