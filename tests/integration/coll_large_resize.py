#!/usr/bin/python3
"""coll_large_resize.py - CONFIG SET coll-record-max while large hashes and sets exist (server/coll_large.c
notes 5, 10 and 11: buckets split past 2 x BUCKET_MAX, a quarter of coll-record-max read at each
write), on a real spillway-server, every reply and the final contents checked against a Python model:

 1. At coll-record-max 4096 a hash and a set of 3000 members each become large (buckets of 0.5-2 KiB).
 2. Lowered to 128 (BUCKET_MAX 64): the writes that touch a bucket past 128 bytes split one bucket
    each, so INFO coll_bucket_splits grows by at least a hundred over the mix of writes below.
 3. Raised to 65536 (BUCKET_MAX 16384): no bucket is past 2 x BUCKET_MAX, so no write splits
    (coll_bucket_splits stays) and the collections stay large (no merges in v1).
 4. Lowered again, both drained (SPOP until empty, HDEL of every field): the heads are deleted.
The mix (each phase): HSET of one pair (new, other value, the same value), HSET of several pairs
with repeated fields, HDEL of several fields, HINCRBYFLOAT, SADD and SREM of one and of several
members (with repeats), SPOP. HLEN/SCARD (the head's count) after every phase.

Environment: SPW_BIN (the folder of spillway-server). Exit 77 (SKIP) without python3-redis.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_random import spillway_start  # noqa: E402

from spwcheck import redis, fail, check  # noqa: E402

FLAGS = ["--threads", "1", "--memory", "64m", "--page", "1m", "--index", "4m", "--coll-record-max", "4096"]
N = 3000


def splits(r):
	return int(r.info("stats")["coll_bucket_splits"])


def val(rnd):
	return str(rnd.randint(-99999, 99999)) if rnd.random() < 0.3 else "v" * rnd.randint(0, 70)


def mix(r, rnd, H, S, steps):
	"""steps random writes on h and s, every reply checked against the models H and S."""
	for step in range(steps):
		op = rnd.random()
		f = "f%d" % rnd.randint(0, 2 * N)
		m = "m%d" % rnd.randint(0, 2 * N)
		if op < 0.2:
			v = H.get(f, "x") if rnd.random() < 0.2 else val(rnd)
			check(r.hset("h", f, v) == (f not in H), "%d: HSET %s" % (step, f))
			H[f] = v
		elif op < 0.3:
			pairs = [("f%d" % rnd.randint(0, 2 * N), val(rnd)) for _ in range(rnd.randint(2, 6))]
			pairs += [(pairs[0][0], val(rnd))]   # a repeated field: the last value wins
			args = [x for p in pairs for x in p]
			new = len(set(p[0] for p in pairs) - set(H))
			check(r.execute_command("HSET", "h", *args) == new, "%d: HSET of %d pairs" % (step, len(pairs)))
			H.update(pairs)
		elif op < 0.4:
			fs = [f] + ["f%d" % rnd.randint(0, 2 * N) for _ in range(rnd.randint(0, 3))]
			check(r.hdel("h", *fs) == len(set(fs) & set(H)), "%d: HDEL" % step)
			for x in fs:
				H.pop(x, None)
		elif op < 0.45:
			g = "g%d" % rnd.randint(0, 40)
			got = r.hincrbyfloat("h", g, rnd.choice([0, 0.5, -2.25, 10]))
			H[g] = r.hget("h", g).decode()
			check(float(H[g]) == got, "%d: HINCRBYFLOAT" % step)
		elif op < 0.65:
			check(r.sadd("s", m) == (m not in S), "%d: SADD %s" % (step, m))
			S.add(m)
		elif op < 0.72:
			ms = [m] + ["m%d" % rnd.randint(0, 2 * N) for _ in range(rnd.randint(1, 4))] + [m]
			check(r.sadd("s", *ms) == len(set(ms) - S), "%d: SADD of %d" % (step, len(ms)))
			S.update(ms)
		elif op < 0.9:
			ms = [m] + ["m%d" % rnd.randint(0, 2 * N) for _ in range(rnd.choice([0, 0, 2]))]
			check(r.srem("s", *ms) == len(set(ms) & S), "%d: SREM" % step)
			S.difference_update(ms)
		else:
			got = r.spop("s").decode()
			check(got in S, "%d: SPOP %s is no member" % (step, got))
			S.discard(got)


def same(r, H, S, what):
	check(r.hlen("h") == len(H) and r.scard("s") == len(S), "%s: HLEN/SCARD" % what)
	got = {k.decode(): v.decode() for k, v in r.hgetall("h").items()}
	check(got == H, "%s: HGETALL differs from the model" % what)
	check(set(x.decode() for x in r.smembers("s")) == S, "%s: SMEMBERS differs from the model" % what)
	check(r.object("encoding", "h") == b"hashtable" and r.object("encoding", "s") == b"hashtable",
	      "%s: not large" % what)


def run(r, rnd):
	H = {"f%d" % i: "v%d" % i for i in range(N)}
	S = set("m%d" % i for i in range(N))
	pipe = r.pipeline(transaction=False)
	for f, v in H.items():
		pipe.hset("h", f, v)
	for m in S:
		pipe.sadd("s", m)
	pipe.execute()
	check(int(r.info("stats")["coll_large_conversions"]) >= 2, "h and s did not become large")
	mix(r, rnd, H, S, 500)
	same(r, H, S, "at 4096")
	r.config_set("coll-record-max", "128")
	s0 = splits(r)
	mix(r, rnd, H, S, 1500)
	check(splits(r) - s0 >= 100, "lowered to 128: only %d splits" % (splits(r) - s0))
	same(r, H, S, "lowered to 128")
	r.config_set("coll-record-max", "65536")
	s0 = splits(r)
	mix(r, rnd, H, S, 1500)
	check(splits(r) == s0, "raised to 65536: %d splits" % (splits(r) - s0))
	same(r, H, S, "raised to 65536")
	r.config_set("coll-record-max", "128")
	while S:
		got = r.spop("s").decode()
		check(got in S, "drain: SPOP %s is no member" % got)
		S.discard(got)
	check(r.exists("s") == 0 and r.spop("s") is None, "the drained set's head remains")
	for f in list(H):
		check(r.hdel("h", f) == 1, "drain: HDEL %s" % f)
		del H[f]
	check(r.exists("h") == 0, "the drained hash's head remains")


def main():
	exe = os.path.join(os.environ.get("SPW_BIN", "build/bin"), "spillway-server")
	if not os.access(exe, os.X_OK):
		fail("%s is missing (SPW_BIN)" % exe)
	srv = spillway_start(exe, FLAGS)
	try:
		r = redis.Redis(host="127.0.0.1", port=srv.port)
		r.config_set("hash-max-listpack-entries", "8")
		run(r, random.Random(13))
		r.close()
	finally:
		rc = srv.stop()
	check(rc == 0, "spillway-server exited with %s" % rc)
	print("coll_large_resize: PASS", flush=True)


if __name__ == "__main__":
	main()
