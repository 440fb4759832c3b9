#!/usr/bin/python3
"""coll_large.py - large hashes and sets (server/coll_large.c) on a real spillway-server with
--coll-record-max 256 and hash-max-listpack-entries 8, so that a collection of a few dozen members
becomes large: a head and buckets under internal keys.

Checks, against a Python dict / set built by the same commands:
 1. A hash and a set of 20000 members built by HSET / SADD (and changed by HDEL, HINCRBY, HSETNX,
    HMSET, SREM): every point read (HGET, HMGET, HEXISTS, HSTRLEN, HLEN, SISMEMBER, SMISMEMBER,
    SCARD) and the whole reads (HGETALL, HKEYS, HVALS, SMEMBERS, compared sorted: bucket order is
    not insertion order), TYPE and OBJECT ENCODING; INFO's coll_large_conversions and
    coll_bucket_splits moved (the paths ran), coll_whole_reads moved by the whole reads.
 2. RENAME and COPY of a large hash give the same members under the new key; DUMP / RESTORE too.
 3. DEL of a large hash: the key is gone, a new hash under the same name starts empty.
 4. A collection emptied member by member is deleted (its head).
 5. Four clients (two worker threads) writing one large hash and one large set at once, with whole
    reads between: the members left are exactly the model's (the latches and the head plan's
    check: a lost race runs the command again, never loses a write). Four clients SPOP one large
    set of 6000 to the end, with SREMs of some members between: every member comes out exactly
    once (by one SPOP or one SREM), and the emptied set is gone.
 6. SPOP, SRANDMEMBER and SMOVE on a large set of 20000 are point operations (coll_large.c note 9,
    cmd_set_multi.c note 6): 5000 SPOPs each take a member that was there and is gone after, SCARD
    down by one each; SRANDMEMBER answers members; SMOVE between the large set and a small or
    absent one, both ways, and between two large sets, against a Python model, with Redis's
    WRONGTYPE checks (nothing moved). coll_whole_reads does not move during those loops,
    coll_part_reads does (the path ran).
 7. With --storage-tier and a small --memory, a large hash whose records went to the device: a cold
    HGET reads the head and one bucket (coll_part_reads moves by exactly 1 per HGET); SPOP and
    SRANDMEMBER of a cold large set park and answer members, with no whole read.

Environment: SPW_BIN (the folder of spillway-server, as ctest sets it). Exit 77 (SKIP) without
python3-redis.
"""
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_random import spillway_start  # noqa: E402

from spwcheck import redis, fail, check  # noqa: E402

N = 20000
FLAGS = ["--threads", "2", "--memory", "256m", "--page", "1m", "--index", "4m", "--coll-record-max", "256"]
TIER_FLAGS = ["--storage-tier", "--device-type", "posix", "--threads", "1", "--memory", "1m",
              "--page", "64k", "--segment", "1m", "--index", "1m", "--coll-record-max", "256"]


def stats(r):
	return r.info("stats")


def build_hash(r, model):
	pipe = r.pipeline(transaction=False)
	for i in range(N):
		f, v = "f:%d" % i, "v%d" % (i * 3)
		if i % 5 == 0:
			f = str(i)                       # an int-encoded field
		model[f] = v
		pipe.hset("h", f, v)
		if i % 1000 == 999:
			pipe.execute()
	pipe.execute()


def check_hash(r, model, key="h"):
	check(r.hlen(key) == len(model), "HLEN %d, expected %d" % (r.hlen(key), len(model)))
	check(r.type(key) == b"hash", "TYPE %r" % r.type(key))
	check(r.object("encoding", key) == b"hashtable", "OBJECT ENCODING %r" % r.object("encoding", key))
	pipe = r.pipeline(transaction=False)
	fields = list(model)
	for f in fields:
		pipe.hget(key, f)
	got = pipe.execute()
	for f, g in zip(fields, got):
		check(g == model[f].encode(), "HGET %s %s: %r, expected %r" % (key, f, g, model[f]))
	sample = random.sample(fields, 50) + ["nosuch1", "nosuch2"]
	got = r.hmget(key, sample)
	check(got == [model[f].encode() if f in model else None for f in sample], "HMGET")
	for f in sample[:20] + ["nosuch3"]:
		check(r.hexists(key, f) == (f in model), "HEXISTS %s" % f)
		check(r.hstrlen(key, f) == len(model.get(f, "")), "HSTRLEN %s" % f)
	all_ = r.hgetall(key)
	check({k.decode(): v.decode() for k, v in all_.items()} == model, "HGETALL differs")
	check(sorted(x.decode() for x in r.hkeys(key)) == sorted(model), "HKEYS differs")
	check(sorted(x.decode() for x in r.hvals(key)) == sorted(model.values()), "HVALS differs")


def hash_phase(r):
	model = {}
	before = stats(r)
	build_hash(r, model)
	s = stats(r)
	check(s["coll_large_conversions"] > before["coll_large_conversions"], "no conversion counted")
	check(s["coll_bucket_splits"] > 0, "no bucket split counted")
	check(s["coll_group_writes"] > 0, "no group write counted")
	# point writes of every kind
	for i in range(0, N, 97):
		f = "f:%d" % i if i % 5 else str(i)
		if i % 2:
			check(r.hdel("h", f, "nosuch") == 1, "HDEL %s" % f)
			del model[f]
		else:
			check(r.hincrby("h", "ctr:%d" % i, 5) == 5, "HINCRBY new")
			model["ctr:%d" % i] = "5"
			check(r.hsetnx("h", f, "x") == 0, "HSETNX existing")
	r.hset("h", mapping={"m1": "a", "m2": "b", "f:1": "changed"})
	model.update({"m1": "a", "m2": "b", "f:1": "changed"})
	w0 = stats(r)["coll_whole_reads"]
	check_hash(r, model)
	check(stats(r)["coll_whole_reads"] >= w0 + 3, "HGETALL/HKEYS/HVALS did not read whole")
	# MEMORY USAGE counts the parts
	check(r.memory_usage("h") > 200000, "MEMORY USAGE %r" % r.memory_usage("h"))
	# HSCAN returns every field
	seen, cur = {}, 0
	while True:
		cur, part = r.hscan("h", cur, count=500)
		seen.update({k.decode(): v.decode() for k, v in part.items()})
		if cur == 0:
			break
	check(seen == model, "HSCAN missed fields")
	# RENAME, COPY, DUMP/RESTORE: whole reads into small records, converted on the next write
	r.rename("h", "h2")
	check(r.exists("h") == 0, "RENAME left the source")
	check_hash(r, model, "h2")
	check(r.copy("h2", "h3") is True, "COPY")
	r.hset("h3", "after", "copy")
	check(r.hget("h3", "after") == b"copy" and r.hlen("h3") == len(model) + 1, "COPY's hash")
	check(r.hget("h2", "after") is None, "COPY shares members with its source")
	d = r.dump("h2")
	r.restore("h4", 0, d)
	check_hash(r, model, "h4")
	# DEL: the head only, the key is gone
	for k in ("h2", "h3", "h4"):
		check(r.delete(k) == 1, "DEL %s" % k)
		check(r.exists(k) == 0 and r.hlen(k) == 0 and r.hget(k, "f:1") is None, "%s after DEL" % k)
	r.hset("h2", "x", "y")
	check(r.hgetall("h2") == {b"x": b"y"}, "a new hash under a deleted large one's name")
	r.delete("h2")
	# emptied member by member: the head goes
	small = {"e%d" % i: "v" for i in range(60)}
	r.hset("e", mapping=small)
	check(r.object("encoding", "e") == b"hashtable", "e not hashtable")
	for f in small:
		r.hdel("e", f)
	check(r.exists("e") == 0, "an emptied large hash still exists")
	print("coll_large: hash phase passed (%d fields)" % len(model), flush=True)


def set_phase(r):
	model = set()
	before = stats(r)
	pipe = r.pipeline(transaction=False)
	for i in range(N):
		m = "m:%d" % i if i % 3 else str(i * 7)
		model.add(m)
		pipe.sadd("s", m)
		if i % 1000 == 999:
			pipe.execute()
	pipe.execute()
	check(stats(r)["coll_large_conversions"] > before["coll_large_conversions"], "set not converted")
	for i in range(0, N, 89):
		m = "m:%d" % i if i % 3 else str(i * 7)
		check(r.srem("s", m) == 1, "SREM %s" % m)
		model.discard(m)
	want = len({"new1", "new2", "m:1"} - model)
	check(r.sadd("s", "new1", "new2", "m:1") == want, "SADD of three")
	model.update({"new1", "new2", "m:1"})
	check(r.scard("s") == len(model), "SCARD %d, expected %d" % (r.scard("s"), len(model)))
	check(r.type("s") == b"set" and r.object("encoding", "s") == b"hashtable", "TYPE/ENCODING of s")
	pipe = r.pipeline(transaction=False)
	probe = list(model)[:3000] + ["absent:%d" % i for i in range(300)]
	for m in probe:
		pipe.sismember("s", m)
	for m, g in zip(probe, pipe.execute()):
		check(bool(g) == (m in model), "SISMEMBER %s" % m)
	check(r.smismember("s", probe[:40]) == [1 if m in model else 0 for m in probe[:40]], "SMISMEMBER")
	check({x.decode() for x in r.smembers("s")} == model, "SMEMBERS differs")
	check(len(r.srandmember("s", 10)) == 10, "SRANDMEMBER")
	popped = r.spop("s", 5)
	check(len(popped) == 5 and all(p.decode() in model for p in popped), "SPOP")
	model -= {p.decode() for p in popped}
	check(r.scard("s") == len(model), "SCARD after SPOP")
	check({x.decode() for x in r.smembers("s")} == model, "SMEMBERS after SPOP")
	check(r.sinterstore("si", "s", "s") == len(model), "SINTERSTORE")
	check(r.smove("s", "other", "new1") is True and r.sismember("s", "new1") == 0, "SMOVE")
	model.discard("new1")
	check(r.scard("s") == len(model), "SCARD after SMOVE")
	check(r.delete("s") == 1 and r.exists("s") == 0, "DEL of a large set")
	print("coll_large: set phase passed (%d members)" % len(model), flush=True)


def point_random_phase(r):
	model = {"p:%d" % i for i in range(N)}
	pipe = r.pipeline(transaction=False)
	for i, m in enumerate(sorted(model)):
		pipe.sadd("ps", m)
		if i % 1000 == 999:
			pipe.execute()
	pipe.execute()
	check(r.object("encoding", "ps") == b"hashtable" and r.scard("ps") == N, "ps not a large set")
	s0 = stats(r)
	for i in range(5000):
		m = r.spop("ps")
		check(m is not None and m.decode() in model, "SPOP %d answered %r, not a member" % (i, m))
		model.discard(m.decode())
		if i % 10 == 0:
			check(r.sismember("ps", m) == 0, "SPOP's %r is still a member" % m)
		check(r.scard("ps") == len(model), "SCARD %d after SPOP %d, expected %d" % (r.scard("ps"), i, len(model)))
	for _ in range(200):
		m = r.srandmember("ps")
		check(m is not None and m.decode() in model, "SRANDMEMBER %r" % m)
	check(r.scard("ps") == len(model), "SRANDMEMBER changed the set")
	s1 = stats(r)
	check(s1["coll_whole_reads"] == s0["coll_whole_reads"], "SPOP/SRANDMEMBER read the set whole (%d)" %
	      (s1["coll_whole_reads"] - s0["coll_whole_reads"]))
	check(s1["coll_part_reads"] >= s0["coll_part_reads"] + 5000, "SPOP did not read buckets")
	# SMOVE both ways: large -> absent / small, small -> large, large -> large
	small = {"a", "b", "7"}
	r.sadd("sm", *small)
	r.set("str", "x")
	big2 = {"q:%d" % i for i in range(300)}
	r.sadd("ps2", *big2)
	check(r.object("encoding", "ps2") == b"hashtable", "ps2 not large")
	sets = {"ps": model, "sm": small, "ps2": big2, "absent": set()}
	members = sorted(model)
	rnd = random.Random(5)
	for i in range(600):
		src, dst = rnd.choice([("ps", "sm"), ("sm", "ps"), ("ps", "absent"), ("absent", "ps"),
		                       ("ps", "ps2"), ("ps2", "ps"), ("ps", "ps")])
		pool = sorted(sets[src]) or ["none"]
		m = rnd.choice(pool) if rnd.random() < 0.8 else rnd.choice(members + ["nosuch"])
		want = m in sets[src]
		got = r.smove(src, dst, m)
		check(got == want, "SMOVE %s %s %s answered %r, expected %r" % (src, dst, m, got, want))
		if want and src != dst:
			sets[src].discard(m)
			sets[dst].add(m)
	for k, v in sets.items():
		check(r.scard(k) == len(v), "SCARD %s %d, expected %d" % (k, r.scard(k), len(v)))
		check(all(r.smismember(k, sorted(v)[:200] or ["x"])) or not v, "SMISMEMBER %s" % k)
	s2 = stats(r)
	check(s2["coll_whole_reads"] == s1["coll_whole_reads"], "SMOVE read a set whole")
	m = next(iter(model))
	for src, dst in (("ps", "str"), ("str", "ps")):
		try:
			r.smove(src, dst, m)
			fail("SMOVE %s %s: no WRONGTYPE" % (src, dst))
		except redis.ResponseError as e:
			check(str(e).startswith("WRONGTYPE"), "SMOVE %s %s: %s" % (src, dst, e))
	check(r.sismember("ps", m) == 1 and r.get("str") == b"x", "a WRONGTYPE SMOVE moved")
	check({x.decode() for x in r.smembers("ps")} == model, "SMEMBERS of ps after SPOP/SMOVE")
	check({x.decode() for x in r.smembers("sm")} == sets["sm"], "SMEMBERS of sm")
	check({x.decode() for x in r.smembers("ps2")} == sets["ps2"], "SMEMBERS of ps2")
	r.delete("ps", "ps2", "sm", "str", "absent")
	print("coll_large: point SPOP/SRANDMEMBER/SMOVE phase passed (%d members left)" % len(model), flush=True)


def hscan_conversion_phase(r):
	"""An HSCAN begun on a small hashtable hash (cursor: a position) and continued after the hash
	became large returns every field present throughout (the cursor of the other layout restarts
	the walk: some fields twice, none missed)."""
	r.delete("hsc")
	orig = {("f%d" % i).encode() for i in range(9)}   # 9 fields: hashtable, still small
	for f in sorted(orig):
		r.hset("hsc", f, "v")
	check(r.object("encoding", "hsc") == b"hashtable", "hsc is hashtable")
	conv = stats(r)["coll_large_conversions"]
	cur, got = r.hscan("hsc", 0, count=3)
	check(cur != 0, "a small hashtable hash scans by position")
	seen = set(got)
	for i in range(200):
		r.hset("hsc", "new%d" % i, "x" * 20)
	check(stats(r)["coll_large_conversions"] > conv, "hsc became large")
	while cur != 0:
		cur, got = r.hscan("hsc", cur, count=3)
		seen |= set(got)
	check(orig <= seen, "HSCAN across a conversion missed %s" % sorted(orig - seen))
	r.delete("hsc")


def concurrent_phase(r, port):
	errs = []

	def writer(t):
		c = redis.Redis(host="127.0.0.1", port=port)
		try:
			for i in range(3000):
				c.hset("ch", "t%d:%d" % (t, i), "v%d" % i)
				c.sadd("cs", "t%d:%d" % (t, i))
				if i % 3 == 0:
					c.hdel("ch", "t%d:%d" % (t, i // 2))
					c.srem("cs", "t%d:%d" % (t, i // 2))
				if i % 500 == 0:
					c.hgetall("ch")
					c.smembers("cs")
			c.close()
		except Exception as e:   # noqa: BLE001 (reported below)
			errs.append(repr(e))

	th = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
	for x in th:
		x.start()
	for x in th:
		x.join()
	check(not errs, "concurrent writers: %s" % errs[:3])
	model = set()
	for t in range(4):
		for i in range(3000):
			model.add("t%d:%d" % (t, i))
		for i in range(0, 3000, 3):
			model.discard("t%d:%d" % (t, i // 2))
	check({k.decode() for k in r.hkeys("ch")} == model and r.hlen("ch") == len(model), "concurrent hash")
	check({k.decode() for k in r.smembers("cs")} == model and r.scard("cs") == len(model), "concurrent set")
	concurrent_spop(port)
	print("coll_large: concurrent phase passed (%d members)" % len(model), flush=True)


def concurrent_spop(port):
	c0 = redis.Redis(host="127.0.0.1", port=port)
	members = ["cp:%d" % i for i in range(6000)]
	for i in range(0, len(members), 1000):
		c0.sadd("cp", *members[i:i + 1000])
	check(c0.object("encoding", "cp") == b"hashtable", "cp not large")
	w0 = stats(c0)["coll_whole_reads"]
	got, errs = [[] for _ in range(4)], []

	def popper(t):
		c = redis.Redis(host="127.0.0.1", port=port)
		try:
			while True:
				if t == 0:
					m = "cp:%d" % random.randrange(6000)
					if c.srem("cp", m):
						got[t].append(m.encode())
				m = c.spop("cp")
				if m is None:
					break
				got[t].append(m)
			c.close()
		except Exception as e:   # noqa: BLE001 (reported below)
			errs.append(repr(e))

	th = [threading.Thread(target=popper, args=(t,)) for t in range(4)]
	for x in th:
		x.start()
	for x in th:
		x.join()
	check(not errs, "concurrent SPOP: %s" % errs[:3])
	allgot = sorted(m.decode() for g in got for m in g)
	check(allgot == sorted(members), "concurrent SPOP: %d taken, %d distinct, of %d" %
	      (len(allgot), len(set(allgot)), len(members)))
	check(c0.exists("cp") == 0, "a set emptied by SPOP still exists")
	# drained to the end: random probes up to the bucket count (coll_large.c note 9) find the
	# few non-empty buckets of the sparse tail; only the last few picks may read the set whole
	w1 = stats(c0)["coll_whole_reads"]
	check(w1 - w0 <= 60, "draining 6000 SPOPs read the set whole %d times" % (w1 - w0))
	print("coll_large: concurrent SPOP passed", flush=True)
	c0.close()


def tier_phase(exe):
	srv = spillway_start(exe, TIER_FLAGS)
	try:
		r = redis.Redis(host="127.0.0.1", port=srv.port)
		r.config_set("hash-max-listpack-entries", "8")
		model = {}
		pipe = r.pipeline(transaction=False)
		for i in range(4000):
			model["f:%d" % i] = "x" * 40 + str(i)
			pipe.hset("cold", "f:%d" % i, model["f:%d" % i])
			if i % 500 == 499:
				pipe.execute()
		pipe.execute()
		# push everything out of memory: many other keys
		for j in range(40):
			r.mset({"pad:%d:%d" % (j, i): "p" * 200 for i in range(200)})
		cold_set = {"cs:%d" % i for i in range(3000)}
		members = sorted(cold_set)
		for i in range(0, len(members), 500):
			r.sadd("coldset", *members[i:i + 500])
		# push everything out of memory: many other keys
		for j in range(40):
			r.mset({"pad:%d:%d" % (j, i): "p" * 200 for i in range(200)})
		w0, k0 = stats(r)["coll_whole_reads"], r.info("all").get("tier_parked_commands", 0)
		for _ in range(100):   # cold buckets: the pick parks, its re-run reads the same bucket
			m = r.spop("coldset")
			check(m is not None and m.decode() in cold_set, "cold SPOP %r" % m)
			cold_set.discard(m.decode())
			m = r.srandmember("coldset")
			check(m is not None and m.decode() in cold_set, "cold SRANDMEMBER %r" % m)
		check(r.scard("coldset") == len(cold_set), "SCARD after cold SPOPs")
		check(stats(r)["coll_whole_reads"] == w0, "a cold SPOP read the set whole")
		check(r.info("all").get("tier_parked_commands", 0) > k0, "the cold SPOPs never parked")
		check({x.decode() for x in r.smembers("coldset")} == cold_set, "SMEMBERS after cold SPOPs")
		for f in random.sample(list(model), 30):
			p0 = stats(r)["coll_part_reads"]
			check(r.hget("cold", f) == model[f].encode(), "cold HGET %s" % f)
			p1 = stats(r)["coll_part_reads"]
			check(p1 - p0 == 1, "a cold HGET read %d parts, expected 1" % (p1 - p0))
		tier = r.info("all")
		check(tier.get("tier_parked_commands", 0) > 0, "nothing went to the device")
		check(r.hlen("cold") == len(model), "HLEN of the cold hash")
		r.close()
	finally:
		rc = srv.stop()
	check(rc == 0, "the tier server exited with %s" % rc)
	print("coll_large: tier phase passed", flush=True)


def main():
	exe = os.path.join(os.environ.get("SPW_BIN", "build/bin"), "spillway-server")
	if not os.access(exe, os.X_OK):
		fail("%s is missing (SPW_BIN)" % exe)
	random.seed(13)
	srv = spillway_start(exe, FLAGS)
	try:
		r = redis.Redis(host="127.0.0.1", port=srv.port)
		r.config_set("hash-max-listpack-entries", "8")
		check(r.config_get("coll-record-max") == {"coll-record-max": "256"}, "coll-record-max")
		hash_phase(r)
		set_phase(r)
		point_random_phase(r)
		hscan_conversion_phase(r)
		concurrent_phase(r, srv.port)
		r.close()
	finally:
		rc = srv.stop()
	check(rc == 0, "spillway-server exited with %s" % rc)
	tier_phase(exe)
	print("coll_large: PASS", flush=True)


if __name__ == "__main__":
	main()
