#!/usr/bin/python3
"""coll_list_elems.py - a large list's out-of-line elements (server/coll_list_elem.c) through real
server processes and real files, with python3-redis: a list of 100 B, 5 KB, 300 KB, 900 KB and
3 MB elements mixed among short ones, pushed, popped, LSET, LTRIMmed and read (LRANGE, LINDEX)
against a Python model and against redis-server running the same commands (every reply
compared); a restart from a checkpoint and an AOF replay after a SIGKILL; an element too big for
one record (--page 4m) failing with nothing written; compaction dropping the element parts LTRIM
left outside [lo, hi).

Run: coll_list_elems.py [Elems|Whole|Compaction|ColdAlone] (ctest runs each class). Environment: SPW_BIN.

Notes:
 1. --page 4m, --memory 128m: a group's records must each fit a page (the 3 MB elements do, a 5 MB
    one is written alone before its group) and a record at most 31 pages (124 MB: a 126 MB element
    fails, nothing written). The default coll-record-max (4096): elements past 1 KiB are out of line.
 2. Proofs from INFO: coll_list_elem_writes, coll_list_elem_drops (pops and LSETs tombstoned
    references), coll_list_elem_reads (reads resolved them; after a restart too),
    aof_replayed_records, compact_parts_dropped.
"""
import os
import random
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coll_large_persist import Store, info, AOF  # noqa: E402
from diff_random import Server  # noqa: E402

import redis  # noqa: E402

FLAGS = ["--threads", "2", "--memory", "128m", "--page", "4m", "--index", "1m"]
SIZES = (100, 5000, 300000, 900000, 3000000)
WEIGHTS = (60, 25, 8, 4, 3)
SHORT = 0.5   # share of short (< 64 B) elements


class Ops:
	"""A seeded sequence of list commands, run on any number of clients; the model follows."""

	def __init__(self, seed):
		self.rng = random.Random(seed)
		self.model = []
		self.n = 0

	def elem(self):
		self.n += 1
		if self.rng.random() < SHORT:
			return b"s%d" % self.n
		size = self.rng.choices(SIZES, WEIGHTS)[0]
		return (b"%d:" % self.n) + bytes([65 + self.n % 26]) * (size - 8) + b"\x00\xff\r\n:"[:6]

	def one(self):
		"""(command args, model update function)"""
		r, m = self.rng, self.model
		k = r.random()
		if k < 0.35 or len(m) < 8:
			els = [self.elem() for _ in range(r.choice((1, 1, 2, 3)))]
			if r.random() < 0.5:
				return ("LPUSH", b"L") + tuple(els), lambda: m.__setitem__(slice(0, 0), els[::-1])
			return ("RPUSH", b"L") + tuple(els), lambda: m.extend(els)
		if k < 0.55:
			cnt = r.choice((1, 1, 2, 3))
			if r.random() < 0.5:
				return ("LPOP", b"L", cnt), lambda: m.__delitem__(slice(0, cnt))
			return ("RPOP", b"L", cnt), lambda: m.__delitem__(slice(max(0, len(m) - cnt), len(m)))
		if k < 0.70:
			i, e = r.randrange(-len(m), len(m)), self.elem()
			return ("LSET", b"L", i, e), lambda: m.__setitem__(i, e)
		if k < 0.75 and len(m) > 30:
			a, b = r.randrange(0, 3), -1 - r.randrange(0, 3)
			return ("LTRIM", b"L", a, b), lambda: m.__setitem__(slice(None), m[a:len(m) + b + 1])
		if k < 0.87:
			return ("LINDEX", b"L", r.randrange(-len(m) - 2, len(m) + 2)), None
		a = r.randrange(-len(m), len(m))
		return ("LRANGE", b"L", a, a + r.randrange(0, 12)), None


def run(cli, args):
	try:
		return cli.execute_command(*args)
	except redis.ResponseError as e:
		return "ERR " + str(e)


def check(tc, r, model):
	tc.assertEqual(r.llen(b"L"), len(model))
	got = r.lrange(b"L", 0, -1)
	tc.assertEqual(len(got), len(model))
	for i, (a, b) in enumerate(zip(got, model)):
		if a != b:
			tc.fail("element %d: %d bytes %r... != model's %d bytes %r..." % (i, len(a), a[:20], len(b), b[:20]))
	for i in range(0, len(model), max(1, len(model) // 17)):
		tc.assertEqual(r.lindex(b"L", i), model[i])


class Base(unittest.TestCase):
	def setUp(self):
		self.st, self.ref, self.done = None, None, False

	def tearDown(self):
		if self.st:
			self.st.close(self.done)
		if self.ref:
			self.ref.stop()


class Elems(Base):
	def test_mixed_elements_against_model_and_redis_then_restart_and_replay(self):
		self.st = st = Store(FLAGS + AOF)
		r = st.start()
		self.ref = Server("redis-server", lambda port, d: [
			"redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", d, "--daemonize", "no"])
		ref = redis.Redis(host="127.0.0.1", port=self.ref.port, socket_timeout=60)
		ops = Ops(11)
		w0, d0, r0 = (info(r, n) for n in ("coll_list_elem_writes", "coll_list_elem_drops", "coll_list_elem_reads"))
		for i in range(500):
			args, upd = ops.one()
			a, b = run(r, args), run(ref, args)
			if a != b:
				self.fail("op %d %s: spillway %r != redis %r" % (i, args[:3], str(a)[:200], str(b)[:200]))
			if upd:
				upd()
			if i % 100 == 99:
				check(self, r, ops.model)
		check(self, r, ops.model)
		self.assertEqual(r.lrange(b"L", 0, -1), ref.lrange(b"L", 0, -1))
		self.assertIn(r.object("encoding", b"L"), (b"quicklist", "quicklist"))
		self.assertGreater(info(r, "coll_list_elem_writes"), w0, "elements were written out of line")
		self.assertGreater(info(r, "coll_list_elem_drops"), d0, "pops and LSETs tombstoned references")
		self.assertGreater(info(r, "coll_list_elem_reads"), r0, "reads resolved references")
		sizes = sorted({len(e) for e in ops.model})
		print("coll_list_elems: %d elements, %d MB, sizes %d..%d" %
		      (len(ops.model), sum(sizes) >> 20, sizes[0], sizes[-1]), flush=True)

		# Past a page (4m) but within a record: written alone before the group (elem_alone).
		for args, upd in ((("RPUSH", b"L", b"p" * (5 << 20)), lambda: ops.model.append(b"p" * (5 << 20))),
		                  (("LSET", b"L", 2, b"q" * (6 << 20)), lambda: ops.model.__setitem__(2, b"q" * (6 << 20)))):
			self.assertEqual(run(r, args), run(ref, args))
			upd()
		check(self, r, ops.model)
		# Too big for one record (124 MB: 31 pages of 4m): an error, nothing written.
		big = b"x" * (126 << 20)
		for cmd in (("RPUSH", b"L", b"a", big), ("LPUSH", b"L", big), ("LSET", b"L", 3, big),
		            ("RPUSH", b"L2", big)):
			got = run(r, cmd)
			self.assertTrue(isinstance(got, str) and got.startswith("ERR"), "%s: %r" % (cmd[0], got))
		self.assertEqual(r.exists(b"L2"), 0)
		check(self, r, ops.model)

		# A restart (checkpoint at SHUTDOWN), then writes after a SAVE replayed from the AOF.
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		check(self, r, ops.model)
		self.assertGreater(info(r, "coll_list_elem_reads"), 0, "the recovered list read its elements")
		self.assertEqual(r.save(), True)
		for i in range(120):
			args, upd = ops.one()
			run(r, args)
			if upd:
				upd()
		st.kill()
		r = st.start()
		self.assertGreater(info(r, "aof_replayed_records"), 0, "the AOF replayed the writes after SAVE")
		check(self, r, ops.model)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


class Whole(Base):
	def test_whole_paths_and_two_key_moves_match_redis(self):
		"""LINSERT, LREM, LPOS, RENAME, COPY, LMOVE, RPOPLPUSH, LMPOP, DUMP / RESTORE on lists with
		out-of-line elements: every reply as redis-server's, RESTORE of either server's DUMP."""
		self.st = st = Store(FLAGS)
		r = st.start()
		self.ref = Server("redis-server", lambda port, d: [
			"redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", d, "--daemonize", "no"])
		ref = redis.Redis(host="127.0.0.1", port=self.ref.port, socket_timeout=60)
		els = [b"x%d" % i if i % 3 else (b"%d" % i) * (700 + i * 50) for i in range(60)]
		e0 = info(r, "coll_list_elem_writes")
		cmds = [("RPUSH", b"L") + tuple(els), ("LINSERT", b"L", b"BEFORE", els[3], b"B" * 5000),
		        ("LREM", b"L", 1, els[6]), ("LPOS", b"L", els[9]), ("RENAME", b"L", b"L2"),
		        ("COPY", b"L2", b"L3"), ("LRANGE", b"L3", 0, -1), ("LMOVE", b"L2", b"L4", b"LEFT", b"RIGHT"),
		        ("LMOVE", b"L2", b"L2", b"RIGHT", b"LEFT"), ("RPOPLPUSH", b"L3", b"L4"),
		        ("LRANGE", b"L4", 0, -1), ("LRANGE", b"L2", 0, -1), ("LMPOP", 2, b"L9", b"L3", b"RIGHT", b"COUNT", 3),
		        ("LRANGE", b"L3", 0, -1), ("LINDEX", b"L2", 4), ("LLEN", b"L2")]
		for cmd in cmds:
			self.assertEqual(run(r, cmd), run(ref, cmd), cmd[0])
		self.assertGreater(info(r, "coll_list_elem_writes"), e0, "the lists were written with elements out of line")
		want = ref.lrange(b"L2", 0, -1)
		r.restore(b"L5", 0, r.dump(b"L2"))
		self.assertEqual(r.lrange(b"L5", 0, -1), want)
		r.restore(b"L6", 0, ref.dump(b"L2"))
		self.assertEqual(r.lrange(b"L6", 0, -1), want)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


TIERF = ["--threads", "2", "--storage-tier", "yes", "--device-type", "posix", "--memory", "16m", "--page",
         "1m", "--segment", "2m", "--index", "4m", "--compaction-io-limit", "0", "--save", "",
         "--checkpoint-interval", "0", "--compaction-max-segments", "0"]


class Compaction(Base):
	def test_compaction_drops_the_trimmed_element_parts(self):
		"""40 elements of 5 KB: every one out of line, their references all in the head's one
		end node (C = 128: no node parts). LTRIM drops 20 by position and two pops tombstone 2;
		after they age onto the device COMPACT drops at least the 20 parts no position names."""
		self.st = st = Store(TIERF)
		r = st.start()
		model = [(b"%d:" % i) * 1700 for i in range(40)]
		for e in model:
			r.rpush(b"T", e)
		r.ltrim(b"T", 20, -1)
		r.lpop(b"T")
		r.rpop(b"T")
		model = model[21:39]
		p = r.pipeline(transaction=False)
		for i in range(30000):
			p.set(b"fill:%d" % i, b"%d:" % i * 250)
			if i % 64 == 63:
				p.execute()
		p.execute()
		dropped = info(r, "compact_parts_dropped")
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		now = info(r, "compact_parts_dropped")
		self.assertGreaterEqual(now - dropped, 20, "COMPACT dropped the trimmed elements' parts")
		self.assertEqual(r.lrange(b"T", 0, -1), model)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.assertEqual(r.lrange(b"T", 0, -1), model)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


class ColdAlone(Base):
	def test_cold_lset_and_push_of_an_element_past_a_page(self):
		"""An element past a page is written alone before its group (coll_list_elem.c note 5). When
		the key of that part has its newest version on the device (the part an LSET overwrites,
		gone cold), that upsert answers HLOG_PENDING; the command must park and run again, not take
		it for written (it answered OK, the head named the new element, the part held the old)."""
		self.st = st = Store(TIERF)
		r = st.start()
		model = [b"s%03d:" % i * 20 for i in range(100)]   # 10 KB: a large list
		r.rpush(b"L", *model)
		old = b"o" * (1100 << 10)   # past a page (1m): written alone
		r.rpush(b"L", old)
		model.append(old)
		p = r.pipeline(transaction=False)
		for i in range(30000):   # the element part ages onto the device (--memory 16m)
			p.set(b"fill:%d" % i, b"%d:" % i * 250)
			if i % 64 == 63:
				p.execute()
		p.execute()
		pend = info(r, "tier_pending_reads")
		r.lset(b"L", 0, b"hot")   # the head written again: in memory, only the part is cold
		model[0] = b"hot"
		new = b"n" * (1200 << 10)
		self.assertEqual(r.lset(b"L", -1, new), True)
		model[-1] = new
		self.assertGreater(info(r, "tier_pending_reads"), pend, "the LSET read the cold part")
		check(self, r, model)
		# LTRIM drops it by position (no tombstone); once that part is cold, an RPUSH takes the
		# position again: its upsert of the same key goes pending too.
		r.ltrim(b"L", 0, -2)
		model.pop()
		p = r.pipeline(transaction=False)
		for i in range(30000):
			p.set(b"fill:%d" % i, b"%d:" % i * 250)
			if i % 64 == 63:
				p.execute()
		p.execute()
		r.lset(b"L", 0, b"hot2")
		model[0] = b"hot2"
		pend = info(r, "tier_pending_reads")
		new = b"p" * (1300 << 10)
		self.assertEqual(r.rpush(b"L", new), len(model) + 1)
		model.append(new)
		self.assertGreater(info(r, "tier_pending_reads"), pend, "the RPUSH read the cold part")
		check(self, r, model)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		check(self, r, model)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


if __name__ == "__main__":
	unittest.main(verbosity=2)
