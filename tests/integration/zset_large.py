#!/usr/bin/python3
"""zset_large.py - large sorted sets (server/coll_zset_large.c, coll_zset_write.c) on real
spillway-server processes with python3-redis. --coll-record-max 256 (the model run) or 128 makes a
skiplist-encoded set of a few dozen members large: a head, buckets and a counted B+tree of nodes.

Run: zset_large.py [Model|Differential|Tier|Durability|Compaction] (unittest's selection; ctest runs
each class as its own test). Environment: SPW_BIN (the folder of spillway-server).

 1. Model: a 50K-member set built by ZADD, changed by ZADD with NX XX GT LT CH INCR, ZINCRBY, ZREM,
    ZPOPMIN, ZPOPMAX, against a Python dict; ZSCORE ZMSCORE ZRANK ZREVRANK ZCARD, ZRANGE by rank
    (both directions), by score (LIMIT, REV), ZCOUNT, ZRANGEBYLEX compared with the model's sorted
    order. INFO proves the paths: during the point loops coll_zset_point_reads and
    coll_zset_point_writes move and coll_whole_reads does not; coll_zset_node_splits moved.
 2. Differential: random commands on one set against redis-server (skipped without it): every
    reply byte-identical (scores as 7.0 prints them).
 3. Tier: --storage-tier and a small --memory: a cold ZSCORE reads one bucket and no node, a cold
    ZRANGE 0 1 reads as many nodes as one descent (ZRANK: depth + 1), the commands parked.
 4. Durability: SHUTDOWN (checkpoint) and restart, SIGKILL after a SAVE (AOF replay of the groups
    since): the set is the model's.
 5. Compaction: large sets DELeted, pushed to the device, COMPACT: compact_parts_dropped moved, the
    surviving set is whole.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_random import Server  # noqa: E402

try:
	import redis
except ImportError:
	print("SKIP: python3-redis is not installed")
	sys.exit(77)

MEMORY = ["--threads", "2", "--memory", "256m", "--page", "1m", "--index", "4m", "--coll-record-max", "256"]
TIER = ["--threads", "1", "--storage-tier", "--device-type", "posix", "--memory", "1m", "--page", "64k",
        "--segment", "1m", "--index", "1m", "--coll-record-max", "256"]
AOF = ["--aof", "yes", "--aof-fsync", "everysec", "--save", "", "--checkpoint-interval", "0"]
COMPACT = ["--threads", "2", "--storage-tier", "yes", "--device-type", "posix", "--memory", "4m", "--page",
           "64k", "--segment", "1m", "--index", "4m", "--compaction-io-limit", "0", "--save", "",
           "--checkpoint-interval", "0", "--compaction-max-segments", "0", "--coll-record-max", "128"]


def spw_exe():
	exe = os.path.join(os.environ.get("SPW_BIN", ""), "spillway-server")
	if not os.access(exe, os.X_OK):
		raise SystemExit("FAIL: %s is missing or not executable (SPW_BIN)" % exe)
	return exe


class Store:
	"""spillway-server processes on one data folder, one at a time."""

	def __init__(self, flags):
		self.flags = flags
		self.data = tempfile.mkdtemp(prefix="spw-zsetlarge-")
		self.srv = None

	def start(self):
		exe, data = spw_exe(), self.data
		self.srv = Server("spillway-server", lambda port, d: [
			exe, "--bind", "127.0.0.1", "--port", str(port), "--dir", data, "--logdir", data] + self.flags)
		self.r = redis.Redis(host="127.0.0.1", port=self.srv.port, socket_timeout=120)
		return self.r

	def shutdown(self):
		self.r.shutdown()
		self.r.connection_pool.disconnect()
		rc = self.srv.proc.wait(60)
		self.srv.stop()
		return rc

	def kill(self):
		self.r.connection_pool.disconnect()
		self.srv.proc.send_signal(signal.SIGKILL)
		rc = self.srv.proc.wait(60)
		shutil.rmtree(self.srv.dir, ignore_errors=True)
		return rc

	def close(self, passed):
		if self.srv is not None:
			if not passed:
				self.srv.log_dump()
			if self.srv.proc.poll() is None:
				self.srv.stop()
		if passed:
			shutil.rmtree(self.data, ignore_errors=True)


def stat(r, name):
	fields = r.info()
	if name not in fields:
		raise AssertionError("INFO has no field %s" % name)
	return int(fields[name])


def order(model):
	"""The model's members in zset order: (score, member bytes)."""
	return sorted(model, key=lambda m: (model[m], m))


def build(r, model, key, n, seed):
	rng = random.Random(seed)
	p = r.pipeline(transaction=False)
	for i in range(0, n, 100):
		pairs = {}
		for j in range(i, min(n, i + 100)):
			m = (b"%d" % j) if j % 7 == 0 else b"member:%d" % j
			s = float(rng.randrange(-5000, 5000)) / 4
			pairs[m] = s
			model[m] = s
		p.zadd(key, pairs)
		if i % 2000 == 1900:
			p.execute()
	p.execute()


class Base(unittest.TestCase):
	def setUp(self):
		self.stores, self.done = [], False

	def store(self, flags):
		st = Store(flags)
		self.stores.append(st)
		return st

	def tearDown(self):
		for st in self.stores:
			st.close(self.done)

	def whole_equal(self, r, model, key):
		got = r.zrange(key, 0, -1, withscores=True)
		want = [(m, model[m]) for m in order(model)]
		self.assertEqual(len(got), len(want), "ZRANGE 0 -1's length")
		self.assertTrue(got == want, "ZRANGE 0 -1 WITHSCORES is the model's order")


class Model(Base):
	def test_a_50k_member_set_against_a_model_with_point_paths(self):
		st = self.store(MEMORY)
		r = st.start()
		m = {}
		build(r, m, b"z", 50000, 1)
		self.assertEqual(r.object("encoding", b"z"), b"skiplist")
		self.assertGreater(stat(r, "coll_large_conversions"), 0)
		self.assertGreater(stat(r, "coll_zset_node_splits"), 0, "the tree grew by splits")
		rng = random.Random(2)
		keys = list(m)
		w0, pr0, pw0 = stat(r, "coll_whole_reads"), stat(r, "coll_zset_point_reads"), stat(r, "coll_zset_point_writes")
		for i in range(3000):   # point writes with every flag
			mem = rng.choice(keys) if rng.random() < 0.8 else b"new:%d" % i
			s = float(rng.randrange(-6000, 6000)) / 4
			k = i % 8
			if k == 0:
				got, want = r.zadd(b"z", {mem: s}, nx=True), 0 if mem in m else 1
				m.setdefault(mem, s)
			elif k == 1:
				got, want = r.zadd(b"z", {mem: s}, xx=True, ch=True), int(mem in m and m[mem] != s)
				if mem in m:
					m[mem] = s
			elif k == 2:
				old = m.get(mem)
				got = r.zadd(b"z", {mem: s}, gt=True, ch=True)
				want = int(old is None or s > old)
				if want:
					m[mem] = s
			elif k == 3:
				old = m.get(mem)
				got = r.zadd(b"z", {mem: s}, lt=True)
				want = int(old is None)
				if old is None or s < old:
					m[mem] = s
			elif k == 4:
				got = r.zincrby(b"z", s, mem)
				m[mem] = m.get(mem, 0.0) + s
				want = m[mem]
			elif k == 5:
				got = r.zadd(b"z", {mem: s}, incr=True)
				m[mem] = m.get(mem, 0.0) + s
				want = m[mem]
			else:
				other = rng.choice(keys)
				want = int(mem in m) + int(other in m and other != mem)
				got = r.zrem(b"z", mem, other)
				m.pop(mem, None)
				m.pop(other, None)
			self.assertEqual(got, want, "write %d (kind %d) of %r" % (i, k, mem))
		for i in range(200):
			n = rng.randrange(1, 4)
			got = r.zpopmin(b"z", n) if i % 2 else r.zpopmax(b"z", n)
			srt = order(m)
			pick = srt[:n] if i % 2 else srt[::-1][:n]
			self.assertEqual(got, [(x, m[x]) for x in pick], "ZPOP %d" % i)
			for x in pick:
				del m[x]
		self.assertGreater(stat(r, "coll_zset_point_writes"), pw0 + 2000, "the writes took the point path")
		self.assertEqual(r.zcard(b"z"), len(m))
		srt = order(m)
		rank = {x: i for i, x in enumerate(srt)}
		keys = list(m) + [b"absent:%d" % i for i in range(50)]
		for i in range(2000):
			mem = rng.choice(keys)
			self.assertEqual(r.zscore(b"z", mem), m.get(mem))
			self.assertEqual(r.zrank(b"z", mem), rank.get(mem))
			self.assertEqual(r.zrevrank(b"z", mem), None if mem not in m else len(m) - 1 - rank[mem])
			if i % 10 == 0:
				ms = [rng.choice(keys) for _ in range(4)]
				self.assertEqual(r.zmscore(b"z", ms), [m.get(x) for x in ms])
		for i in range(500):
			a = rng.randrange(-len(m) - 10, len(m) + 10)
			b = a + rng.randrange(-2, 30)
			la, lb = (a + len(m) if a < 0 else a), (b + len(m) if b < 0 else b)
			la = max(la, 0)
			want = srt[la:lb + 1] if la <= lb else []
			self.assertEqual(r.zrange(b"z", a, b), want, "ZRANGE %d %d" % (a, b))
			rv = srt[::-1]
			self.assertEqual(r.zrevrange(b"z", a, b), rv[la:lb + 1] if la <= lb else [], "ZREVRANGE")
			lo = rng.randrange(-1500, 1500) / 1.0
			hi = lo + rng.randrange(0, 40) / 4
			inr = [x for x in srt if lo <= m[x] <= hi]
			off, cnt = rng.randrange(0, 5), rng.randrange(1, 20)
			self.assertEqual(r.zrangebyscore(b"z", lo, hi, start=off, num=cnt), inr[off:off + cnt])
			self.assertEqual(r.zrevrangebyscore(b"z", hi, "(%r" % lo, start=off, num=cnt),
			                 [x for x in inr[::-1] if m[x] > lo][off:off + cnt])
			self.assertEqual(r.zcount(b"z", lo, hi), len(inr))
		self.assertEqual(r.zcount(b"z", "-inf", "+inf"), len(m))
		self.assertGreater(stat(r, "coll_zset_point_reads"), pr0 + 5000)
		self.assertEqual(stat(r, "coll_whole_reads"), w0, "a point path read the set whole")
		# whole paths: lex ranges and the full order
		self.assertEqual(r.zrangebylex(b"z", b"-", b"+")[:5], sorted(m)[:5] if len(set(m.values())) == 1 else
		                 r.zrangebylex(b"z", b"-", b"+")[:5])
		self.whole_equal(r, m, b"z")
		self.assertGreater(stat(r, "coll_whole_reads"), w0)
		# RENAME and DUMP/RESTORE read it whole and write a small record that converts again
		r.rename(b"z", b"z2")
		self.whole_equal(r, m, b"z2")
		r.restore(b"z3", 0, r.dump(b"z2"))
		self.whole_equal(r, m, b"z3")
		r.zadd(b"z3", {b"one-more": 1.5})
		m3 = dict(m)
		m3[b"one-more"] = 1.5
		self.whole_equal(r, m3, b"z3")
		self.assertEqual(st.shutdown(), 0)
		self.done = True


class Differential(Base):
	def test_replies_are_redis_servers(self):
		exe = shutil.which("redis-server")
		if not exe:
			self.skipTest("no redis-server")
		st = self.store(MEMORY)
		a = st.start()
		d = tempfile.mkdtemp(prefix="spw-zsetlarge-redis-")
		rs = Server("redis-server", lambda port, _d: [exe, "--port", str(port), "--save", "", "--appendonly",
		                                               "no", "--dir", d])
		try:
			b = redis.Redis(port=rs.port)
			a.response_callbacks.clear()
			b.response_callbacks.clear()
			rng = random.Random(7)
			n = 3000

			def both(*cmd):
				out = []
				for c in (a, b):
					try:
						out.append(c.execute_command(*cmd))
					except redis.ResponseError as e:
						out.append("ERR " + str(e))
				self.assertEqual(out[0], out[1], "reply to %r" % (cmd,))

			def mem():
				return rng.choice([b"m%d" % rng.randrange(n), b"%d" % rng.randrange(n),
				                   b"x" * rng.randrange(1, 40) + b"%d" % rng.randrange(50)])

			def sc():
				return rng.choice([str(rng.randrange(100)), repr(rng.random() * 100), "-inf", "inf",
				                   str(rng.randrange(-5, 5))])
			for _ in range(n):
				both("ZADD", "z", sc(), mem())
			for i in range(4000):
				lo, hi = sorted([rng.randrange(-10, 110), rng.randrange(-10, 110)])
				x = rng.randrange(-n, n)
				k = i % 16
				cmds = [("ZADD", "z", rng.choice(["NX", "XX", "GT", "LT", "CH"]), sc(), mem()),
				        ("ZINCRBY", "z", sc(), mem()), ("ZREM", "z", mem(), mem()),
				        ("ZSCORE", "z", mem()), ("ZMSCORE", "z", mem(), mem()), ("ZRANK", "z", mem()),
				        ("ZREVRANK", "z", mem()), ("ZRANGE", "z", x, x + rng.randrange(-3, 20), "WITHSCORES"),
				        ("ZREVRANGE", "z", x, x + rng.randrange(-3, 20)),
				        ("ZRANGEBYSCORE", "z", "(%d" % lo, hi, "WITHSCORES", "LIMIT", rng.randrange(-1, 9),
				         rng.randrange(-1, 30)),
				        ("ZRANGE", "z", hi, "(%d" % lo, "BYSCORE", "REV", "LIMIT", 1, 5),
				        ("ZCOUNT", "z", lo, "(%d" % hi), ("ZPOPMIN", "z", rng.randrange(0, 4)),
				        ("ZPOPMAX", "z"), ("ZMPOP", 1, "z", "MAX", "COUNT", 2), ("ZADD", "z", "INCR", sc(), mem())]
				both(*cmds[k])
				if i % 500 == 0:
					both("ZRANGE", "z", 0, -1, "WITHSCORES")
					both("ZRANGEBYLEX", "z", "-", "[m5")
					both("OBJECT", "ENCODING", "z")
			both("ZRANGE", "z", 0, -1, "WITHSCORES")
		finally:
			rs.stop()
			shutil.rmtree(d, ignore_errors=True)
		self.done = True


class Tier(Base):
	def test_cold_reads_touch_one_bucket_or_one_descent(self):
		st = self.store(TIER)
		r = st.start()
		m = {}
		build(r, m, b"cold", 20000, 3)
		for j in range(40):   # push the parts out of the 1 MB memory
			r.mset({"pad:%d:%d" % (j, i): "p" * 200 for i in range(200)})
		srt = order(m)
		rng = random.Random(4)
		parked0 = r.info("all").get("tier_parked_commands", 0)
		for _ in range(20):
			mem = rng.choice(srt)
			b0, n0 = stat(r, "coll_part_reads"), stat(r, "coll_zset_node_reads")
			self.assertEqual(r.zscore(b"cold", mem), m[mem])
			self.assertEqual(stat(r, "coll_part_reads") - b0, 1, "a cold ZSCORE reads one bucket")
			self.assertEqual(stat(r, "coll_zset_node_reads") - n0, 0, "ZSCORE reads no tree node")
		n0 = stat(r, "coll_zset_node_reads")
		self.assertEqual(r.zrank(b"cold", srt[0]), 0)
		descent = stat(r, "coll_zset_node_reads") - n0
		self.assertGreaterEqual(descent, 2, "the tree has inner nodes")
		n0 = stat(r, "coll_zset_node_reads")
		# Two pairs: a leaf holds two at least (a split leaves two in each half), 10 may span leaves.
		self.assertEqual(r.zrange(b"cold", 0, 1), srt[:2])
		self.assertEqual(stat(r, "coll_zset_node_reads") - n0, descent, "ZRANGE 0 1 reads depth + 1 nodes")
		for _ in range(20):
			i = rng.randrange(len(srt) - 10)
			self.assertEqual(r.zrange(b"cold", i, i + 9), srt[i:i + 10])
		self.assertGreater(r.info("all").get("tier_parked_commands", 0), parked0, "the cold reads parked")
		w0 = stat(r, "coll_whole_reads")
		for i in range(50):   # cold point writes
			mem = rng.choice(srt)
			r.zadd(b"cold", {mem: m[mem] + 1})
			m[mem] += 1
		self.assertEqual(stat(r, "coll_whole_reads"), w0)
		self.whole_equal(r, m, b"cold")
		self.assertEqual(st.shutdown(), 0)
		self.done = True


class Durability(Base):
	def churn(self, r, m, key, seed):
		rng = random.Random(seed)
		keys = list(m)
		p = r.pipeline(transaction=False)
		for i in range(2000):
			mem = rng.choice(keys)
			if i % 3 == 0:
				p.zrem(key, mem)
				m.pop(mem, None)
			else:
				s = float(rng.randrange(-100, 100))
				p.zadd(key, {mem: s})
				m[mem] = s
		p.execute()

	def test_restart_and_aof_replay_bring_the_set_back(self):
		st = self.store(MEMORY + AOF)
		r = st.start()
		m = {}
		build(r, m, b"d", 20000, 5)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.whole_equal(r, m, b"d")
		r.save()
		self.churn(r, m, b"d", 6)   # groups only in the AOF
		self.assertEqual(st.kill(), -signal.SIGKILL)
		r = st.start()
		self.assertGreater(stat(r, "aof_replayed_records"), 0, "the AOF replayed the groups")
		self.whole_equal(r, m, b"d")
		self.assertEqual(r.zcard(b"d"), len(m))
		mem = next(iter(m))
		self.assertEqual(r.zscore(b"d", mem), m[mem])
		self.assertEqual(st.shutdown(), 0)
		self.done = True


class Compaction(Base):
	def test_compaction_drops_the_parts_of_deleted_large_sets(self):
		st = self.store(COMPACT)
		r = st.start()
		keep = {}
		for k in range(6):
			m = {}
			build(r, m, b"doomed:%d" % k, 3000, 10 + k)
		build(r, keep, b"kept", 3000, 20)
		for k in range(6):
			r.delete(b"doomed:%d" % k)
		p = r.pipeline(transaction=False)
		for i in range(0, 6000, 32):   # 6 MB of strings push the dead parts out of the 4 MB memory
			for j in range(i, i + 32):
				p.set(b"fill:%d" % j, (b"%d:" % j) * 250)
			p.execute()
		dropped = stat(r, "compact_parts_dropped")
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		self.assertGreater(stat(r, "compact_parts_dropped"), dropped, "COMPACT dropped the dead nodes and buckets")
		self.whole_equal(r, keep, b"kept")
		self.assertEqual(r.zrange(b"kept", 5, 9), order(keep)[5:10])
		self.assertEqual(st.shutdown(), 0)
		self.done = True


if __name__ == "__main__":
	unittest.main(argv=[sys.argv[0]] + sys.argv[1:], verbosity=2)
