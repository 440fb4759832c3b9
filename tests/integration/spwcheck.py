"""spwcheck.py - what the large-collection scripts share: python3-redis or exit 77 (ctest's SKIP),
fail/check that end the run with a message, and an INFO stats counter.
"""
import sys

try:
	import redis  # noqa: F401  (re-exported: `from spwcheck import redis`)
except ImportError:
	print("SKIP: python3-redis is not installed")
	sys.exit(77)


def fail(msg):
	print("FAIL: " + msg, flush=True)
	sys.exit(1)


def check(cond, msg):
	if not cond:
		fail(msg)


def ctr(r, name):
	"""INFO stats counter name (0 when the server has no such field)."""
	return int(r.info("stats").get(name, 0))
