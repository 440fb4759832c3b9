"""diffgen.py - the pieces of the randomized differential test (diff_random.py): RESP2/RESP3 bytes
(encoding commands, finding where a reply ends), the reply comparators, and the argument generators
that the family modules in tests/integration/random/*.py build their command templates from.

Notes:
 1. Raw bytes throughout: a command is a list of bytes arguments, a reply the exact bytes the server
    sent. Client libraries reshape replies (a RESP3 double, a map, a null), so the comparison works
    below them.
 2. A generator is any callable g(r) -> part, r a random.Random; a part is bytes, str (UTF-8), int,
    None (no argument) or a list/tuple of parts (several arguments). Literals in a template stand for
    themselves. Everything a template draws comes from r, so a seed gives the same stream every time.
 3. The key space is small on purpose (HOT keys, most picks) so that commands collide on the same keys
    and meet each other's values; a wider set (WIDE keys) makes data outgrow a small --memory so that
    the storage-tier round reads values back from the device.
 4. A comparator says how two replies are compared: EXACT bytes (default), SORTED (an aggregate as a
    multiset), LENGTH (type and length or element count), TYPE (type only, null told apart), SKIP
    (read, not compared), SCANALL (a SCAN-like cursor followed to the end on each server, the sets compared)
    or check(fn), a property function. Error replies are compared exactly by every comparator but
    SKIP: an error is never random. directive is the line a diff/*.txt script needs before the
    command (test_differential.c's syntax) when a reproduction is printed.
"""

# ---------------- RESP ----------------


def to_bytes(x):
	if isinstance(x, bytes):
		return x
	if isinstance(x, str):
		return x.encode("utf-8", "surrogateescape")
	if isinstance(x, int):
		return str(x).encode()
	raise TypeError("argument of type %s" % type(x).__name__)


def encode(argv):
	"""A command as a RESP array of bulk strings."""
	out = [b"*%d\r\n" % len(argv)]
	for a in argv:
		out.append(b"$%d\r\n%s\r\n" % (len(a), a))
	return b"".join(out)


class ProtocolError(Exception):
	pass


_SIMPLE = b"+-:_,#("        # one line
_BLOB = b"$!="              # length line, then bytes and CRLF; a negative length is a RESP2 null
_AGG = b"*~>"               # n elements
_PAIRS = b"%"               # n key/value pairs
_ATTR = b"|"                # n pairs of attributes, then the reply they annotate


def reply_end(b, pos=0):
	"""Where the reply starting at b[pos] ends (the index after it), or -1 when b holds only part of
	it. Raises ProtocolError on bytes that are not RESP."""
	need = 1
	n_b = len(b)
	while need:
		if pos >= n_b:
			return -1
		nl = b.find(b"\r\n", pos)
		if nl < 0:
			return -1
		t = b[pos:pos + 1]
		need -= 1
		if t in (b"",) or t not in _SIMPLE + _BLOB + _AGG + _PAIRS + _ATTR:
			raise ProtocolError("type byte %r at offset %d" % (t, pos))
		if t in _SIMPLE:
			pos = nl + 2
			continue
		try:
			n = int(b[pos + 1:nl])
		except ValueError:
			raise ProtocolError("length %r at offset %d" % (b[pos + 1:nl], pos))
		pos = nl + 2
		if t in _BLOB:
			if n >= 0:
				pos += n + 2
				if pos > n_b:
					return -1
		elif n > 0:
			need += n if t in _AGG else 2 * n
		if t in _ATTR:
			need += 1
	return pos


def split_aggregate(r):
	"""(header, [elements]) of an aggregate reply (a map's elements are key+value pairs), or None when
	r is not an aggregate with a length >= 0."""
	if r[:1] not in (b"*", b"~", b"%", b">"):
		return None
	nl = r.find(b"\r\n")
	n = int(r[1:nl])
	if n < 0:
		return None
	per = 2 if r[:1] == b"%" else 1
	pos = nl + 2
	elems = []
	for _ in range(n):
		start = pos
		for _ in range(per):
			pos = reply_end(r, pos)
		elems.append(r[start:pos])
	return r[:nl + 2], elems


_ESCAPES = {ord("\r"): "\\r", ord("\n"): "\\n", ord("\t"): "\\t", ord("\\"): "\\\\", ord('"'): '\\"'}


def escape(b, most=None):
	"""Bytes as a readable one-line string: \\r \\n \\t \\\\ \\" and \\xHH, the escapes redis-cli and
	test_differential.c's script reader read back; at most most bytes, then "...(N more)"."""
	out = [_ESCAPES.get(c) or (chr(c) if 32 <= c < 127 else "\\x%02x" % c) for c in b[:most]]
	if most is not None and len(b) > most:
		out.append("...(%d more)" % (len(b) - most))
	return "".join(out)


_CLI_BARE = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+.:*?[]^/@%=,<>|!~")


def cli_quote(a):
	"""One argument as redis-cli (and test_differential.c's script reader) reads it back."""
	if a and all(c in _CLI_BARE for c in a) and not a.startswith(b"!") and not a.startswith(b"#"):
		return a.decode()
	return '"' + escape(a) + '"'


def cli_line(argv):
	return " ".join(cli_quote(a) for a in argv)


# ---------------- comparators (note 4) ----------------


class Comparator:
	"""compare(a, b, argv) -> None when the replies agree, else why not (a from redis-server)."""

	def __init__(self, name, fn, directive):
		self.name, self.fn, self.directive = name, fn, directive

	def compare(self, a, b, argv):
		if self.name != "skip" and (a[:1] == b"-" or b[:1] == b"-"):
			return None if a == b else "error replies differ"
		return self.fn(a, b, argv)

	def __repr__(self):
		return self.name


def _exact(a, b, argv):
	return None if a == b else "replies differ"


def sorted_reply(r):
	s = split_aggregate(r)
	if s is None:
		return r
	return s[0] + b"".join(sorted(s[1]))


def _sorted(a, b, argv):
	return None if sorted_reply(a) == sorted_reply(b) else "replies differ as multisets"


def _shape(r, with_length):
	t = r[:1]
	if t in (b"$", b"*", b"~", b"%", b"=", b"!"):
		n = int(r[1:r.find(b"\r\n")])
		if n < 0:
			return b"null"
		return t + (b"%d" % n if with_length else b"")
	return t


def _length(a, b, argv):
	return None if _shape(a, True) == _shape(b, True) else "types or lengths differ"


def _type(a, b, argv):
	return None if _shape(a, False) == _shape(b, False) else "reply types differ"


EXACT = Comparator("exact", _exact, None)
SORTED = Comparator("sorted", _sorted, "!sort")
LENGTH = Comparator("length", _length, "!skip")
TYPE = Comparator("type", _type, "!skip")
SKIP = Comparator("skip", lambda a, b, argv: None, "!skip")
# The harness follows the cursor (argv[1]) on each server and compares the sorted keys; here it only
# compares what it built.
SCANALL = Comparator("scanall", _exact, "!scanall")


def check(fn, directive="!skip", name=None):
	"""A property comparator: fn(a, b, argv) -> None or why the replies disagree. directive: what a
	diff/*.txt script needs before the command (None: compared exactly there)."""
	return Comparator(name or fn.__name__, fn, directive)


def int_reply(r):
	"""The integer of a ':' reply, or None."""
	if r[:1] != b":":
		return None
	return int(r[1:-2])


def near(tolerance):
	"""A property comparator for clock readings (TTL, PTTL, EXPIRETIME of a relative expiry): equal,
	or both positive integers within tolerance. The two servers see the same command a few ms apart,
	so a relative TTL's deadline differs by that much; -1 and -2 must match exactly."""
	def within(a, b, argv):
		x, y = int_reply(a), int_reply(b)
		if a == b:
			return None
		if x is None or y is None or x < 0 or y < 0 or abs(x - y) > tolerance:
			return "replies differ by more than the clock's %d" % tolerance
		return None
	return check(within, directive=None, name="near(%d)" % tolerance)


# ---------------- templates ----------------


class Template:
	def __init__(self, parts, cmp, weight, resp3):
		self.parts, self.cmp, self.weight, self.resp3 = parts, cmp, weight, resp3
		self.name = " ".join(p for p in parts[:2] if isinstance(p, str)).upper()
		self.family = None

	def make(self, r):
		argv = []
		for p in self.parts:
			_emit(argv, p, r)
		return argv

	def __repr__(self):
		return "<%s %s>" % (self.name, self.cmp)


def _emit(argv, part, r):
	while callable(part):
		part = part(r)
	if part is None:
		return
	if isinstance(part, (list, tuple)):
		for p in part:
			_emit(argv, p, r)
	else:
		argv.append(to_bytes(part))


def cmd(*parts, cmp=EXACT, weight=1.0, resp3=True):
	"""A command template: literals and generators (note 2). cmp: its comparator; weight: how often it
	is drawn within its family; resp3: also drawn in the RESP3 round."""
	return Template(list(parts), cmp, weight, resp3)


# ---------------- generators ----------------


def oneof(*choices):
	"""One of the parts, uniformly."""
	return lambda r: r.choice(choices)


def weighted(*pairs):
	"""oneof with weights: weighted((3, a), (1, b))."""
	ws = [w for w, _ in pairs]
	ps = [p for _, p in pairs]
	return lambda r: r.choices(ps, ws)[0]


def maybe(part, p=0.5):
	return lambda r: part if r.random() < p else None


def seq(*parts):
	return lambda r: list(parts)


def some(part, lo, hi):
	"""lo..hi draws of part."""
	return lambda r: [part] * r.randint(lo, hi)


def options(*opts, most=3):
	"""0..most distinct options in random order (conflicting ones too: the servers must reject the
	same combinations)."""
	def g(r):
		k = r.randint(0, min(most, len(opts)))
		return r.sample(opts, k)
	return g


HOT = [b"k0", b"k1", b"k2", b"k3", b"k4", b"k5", b"", b"\x00\xff", b"a b", b"k*"]
WIDE = [b"w:%d" % i for i in range(1000)]


def key(r):
	"""A key: a hot one most of the time (note 3)."""
	return r.choice(HOT) if r.random() < 0.88 else r.choice(WIDE)


def hot_key(r):
	return r.choice(HOT)


def keys(lo, hi):
	return some(key, lo, hi)


SMALL_VALUES = [
	b"", b"0", b"1", b"-1", b"a", b"abc", b"10", b"9223372036854775807", b"-9223372036854775808",
	b"9223372036854775808", b"1.5", b"1e3", b" 1", b"1 ", b"\x00\xff\r\n", b"inf", b"3.0", b"0x10",
	b"-0", b"007", b"+1", b"nan", b"1.7976931348623157e308",
]


def value(r):
	"""A value: small edge cases mostly, random short bytes, sometimes a large one (several KB, to fill
	pages)."""
	x = r.random()
	if x < 0.55:
		return r.choice(SMALL_VALUES)
	if x < 0.93:
		return bytes(r.choice(b"ab\x00\xff 1") for _ in range(r.randint(1, 12)))
	return r.choice([b"x", b"ab", b"\x00\xfe"]) * r.randint(500, 6000)


INTEGERS = [
	0, 1, -1, 2, 10, -10, 100, 1000, 2 ** 31, -2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 63, -2 ** 63 - 1,
	2 ** 64, b"abc", b"", b"1.5", b"0x10", b" 1", b"1 ", b"+1", b"1e3", b"-0", b"007", b"\x001",
]


def integer(r):
	"""An integer argument: small ones, both ends of int64, just past them, and text that is not an
	integer."""
	x = r.random()
	if x < 0.5:
		return r.randint(-20, 20)
	return r.choice(INTEGERS)


FLOATS = [
	b"1.5", b"-0.0", b"0", b"1e308", b"-1e308", b"1.7976931348623157e308", b"inf", b"-inf", b"+inf",
	b"nan", b"0.1", b"3", b"-3", b"abc", b"", b"1e-300", b"5.0e3", b" 1", b"1 ", b"0x10", b"1e",
	b"10000000000000000000000", b"-1.1", b"3.0000000000000001",
]


def float_(r):
	return r.choice(FLOATS) if r.random() < 0.7 else b"%.3f" % r.uniform(-1000, 1000)


def offset(r):
	"""A string offset or index: small, negative, past the end, huge, invalid. Not up to 512 MB where
	it would allocate it (536870912 is refused before any allocation)."""
	x = r.random()
	if x < 0.75:
		return r.randint(-15, 15)
	return r.choice([100, 6000, 100000, -100000, 2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 63, 536870912,
	                 b"abc", b"", b"1.5", b"1e3"])


def literal_choice(*words):
	return lambda r: r.choice(words)
