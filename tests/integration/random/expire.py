"""expire: EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX/XX/GT/LT, PERSIST, TTL/PTTL, EXPIRETIME/
PEXPIRETIME, with large TTLs only: no sleeps, and no reply may depend on the clock.

Notes:
 1. Relative TTLs are at least 1000 s (TTL rounds to seconds) and absolute times are decades away
    (EXPIREAT 4102444800 is 2100), so the two kinds never come within the few ms that separate the two
    servers' clocks; GT/LT go only with absolute times, since two relative deadlines of the same
    amount compare by the millisecond each server received them in.
 2. Zero, negative and past times delete the key at once on both servers.
 3. What reads a relative deadline back (TTL, PTTL, EXPIRETIME, PEXPIRETIME) compares within a
    tolerance (diffgen.near); -1 and -2 exactly.
The module format is the one strings.py describes.
"""
from diffgen import cmd, key, oneof, maybe, seq, options, near

FAMILY = "expire"
WEIGHT = 0.8

rel_s = oneof(1000, 5000, 86400, 123457, 0, -1, -100, b"abc", b"", b"1.5", 2 ** 63 - 1,
              9223372036854776, -2 ** 63, 4611686018427387904)
rel_ms = oneof(1000500, 86400700, 123456789, 0, -1, b"abc", 2 ** 63 - 1, -2 ** 63)
abs_s = oneof(4102444800, 4102444801, 32503680000, 1, 0, -1, b"x", 2 ** 63 - 1)
abs_ms = oneof(4102444800000, 4102444800500, 32503680000999, 1, -1, 9223372036854775807)
flag = oneof(b"NX", b"XX", b"GT", b"LT", b"nx", b"BOGUS")
safe_flag = oneof(b"NX", b"XX")

TEMPLATES = [
	cmd("EXPIRE", key, rel_s, maybe(safe_flag, 0.3), weight=2),
	cmd("PEXPIRE", key, rel_ms, maybe(safe_flag, 0.3), weight=1.5),
	cmd("EXPIREAT", key, abs_s, maybe(flag, 0.4), weight=1.5),
	cmd("PEXPIREAT", key, abs_ms, maybe(flag, 0.4), weight=1.5),
	cmd("EXPIREAT", key, abs_s, options(b"NX", b"XX", b"GT", b"LT", most=2), weight=0.3),
	cmd("PERSIST", key),
	cmd("TTL", key, cmp=near(30), weight=1.5),
	cmd("PTTL", key, cmp=near(30000), weight=1.5),
	cmd("EXPIRETIME", key, cmp=near(30), weight=1.5),
	cmd("PEXPIRETIME", key, cmp=near(30000), weight=1.5),
	cmd("TTL", maybe(seq(key, key), 0.5), weight=0.05),   # arity errors only
	cmd("EXPIRE", key, weight=0.05),
]

VOLATILE = {}

EXCLUDED = {}
