#!/usr/bin/python3
"""coll_list_persist.py - large lists (server/coll_list_large.c) through real server processes and
real files, with python3-redis: what restarts bring back (a checkpoint at SHUTDOWN; a SIGKILL after
a SAVE, so that the AOF replays the heads, groups and node parts written since), and what
compaction does with node parts: the nodes of a DELeted list are dropped, and so are the nodes a
live list popped or trimmed (coll/deque.h dq_part_live: a node part lives only strictly between
the end nodes), while the live ones are kept whole.

Run: coll_list_persist.py [Durability|Compaction] (unittest's selection; ctest runs each class as its
own test). Environment: SPW_BIN. The servers and folders are coll_large_persist.py's (Store).

Notes:
 1. --coll-record-max 128: a list past 256 bytes is large, with about 10 elements per node here.
 2. A model (key -> Python list) holds what was written; after each restart every list's LLEN,
    LRANGE 0 -1 and a sample of LINDEX are compared with it, and DBSIZE.
 3. Proofs from INFO: coll_large_conversions and coll_list_node_writes while building;
    checkpoint_last_id, aof_replayed_records; coll_list_node_reads after a restart (the recovered
    lists are read as node parts); compact_parts_dropped.
"""
import os
import random
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coll_large_persist import Store, info, store_bytes, AOF, MEMORY, TIER, COMPACT, PIPE  # noqa: E402

import redis  # noqa: E402,F401  (coll_large_persist fails without it)

LARGE = ["--coll-record-max", "128"]


def flush(pipe):
	for res in pipe.execute(raise_on_error=True):
		if isinstance(res, Exception):
			raise res


class Model:
	def __init__(self, seed):
		self.rng = random.Random(seed)
		self.keys = {}

	def elem(self):
		n = self.rng.choice((1, 3, 8, 20))
		if self.rng.random() < 0.3:
			return b"%d" % self.rng.randrange(-10 ** 6, 10 ** 6)
		return bytes(self.rng.getrandbits(8) for _ in range(n))

	def push(self, pipe, key, n, left):
		lst = self.keys.setdefault(key, [])
		for i in range(0, n, 50):
			els = [self.elem() for _ in range(min(50, n - i))]
			if left:
				lst[:0] = list(reversed(els))
				pipe.lpush(key, *els)
			else:
				lst.extend(els)
				pipe.rpush(key, *els)

	def pop(self, pipe, key, n, left):
		lst = self.keys[key]
		n = min(n, len(lst))
		if left:
			del lst[:n]
			pipe.lpop(key, n)
		else:
			del lst[len(lst) - n:]
			pipe.rpop(key, n)
		if not lst:
			del self.keys[key]

	def lset(self, pipe, key, i, v):
		self.keys[key][i] = v
		pipe.lset(key, i, v)

	def ltrim(self, pipe, key, a, z):
		lst = self.keys[key]
		self.keys[key] = lst[a:len(lst) + z + 1 if z < 0 else z + 1]
		pipe.ltrim(key, a, z)

	def delete(self, pipe, key):
		self.keys.pop(key, None)
		pipe.delete(key)


def build(r, m, prefix, nlists, n):
	p = r.pipeline(transaction=False)
	for j in range(nlists):
		k = prefix + b":%d" % j
		for step in range(0, n, 500):
			m.push(p, k, min(500, n - step), left=(step // 500) % 2 == 1)
			flush(p)


def churn(r, m, prefix):
	p = r.pipeline(transaction=False)
	for k in sorted(k for k in m.keys if k.startswith(prefix + b":")):
		lst = m.keys[k]
		m.pop(p, k, 37, left=True)
		m.pop(p, k, 111, left=False)
		for i in (0, -1, len(lst) // 2, len(lst) // 3):
			m.lset(p, k, i, m.elem())
		m.ltrim(p, k, 5, -6)
		m.push(p, k, 200, left=True)
		flush(p)


def check(tc, r, m):
	tc.assertEqual(r.dbsize(), len(m.keys))
	rng = random.Random(len(m.keys))
	for k in sorted(m.keys):
		want = m.keys[k]
		if isinstance(want, bytes):
			tc.assertEqual(r.get(k), want, k)
			continue
		tc.assertEqual(r.type(k), b"list", k)
		tc.assertEqual(r.llen(k), len(want), k)
		tc.assertTrue(r.lrange(k, 0, -1) == want, "%r: LRANGE 0 -1 differs from what was written" % k)
		for i in rng.sample(range(len(want)), min(20, len(want))):
			tc.assertEqual(r.lindex(k, i), want[i], (k, i))


class Base(unittest.TestCase):
	def setUp(self):
		self.stores = []

	def store(self, flags):
		st = Store(flags + LARGE)
		self.stores.append(st)
		return st

	def tearDown(self):
		for st in self.stores:
			st.close(getattr(self, "done", False))

	def assertGrew(self, r, name, before, what):
		now = info(r, name)
		self.assertGreater(now, before, "INFO %s did not grow (%d): %s" % (name, before, what))
		return now

	def built(self, r, m, prefix, nlists, n):
		conv, nw = info(r, "coll_large_conversions"), info(r, "coll_list_node_writes")
		build(r, m, prefix, nlists, n)
		self.assertGreaterEqual(info(r, "coll_large_conversions") - conv, nlists, "every list became large")
		self.assertGrew(r, "coll_list_node_writes", nw, "lists of %d elements" % n)
		self.assertEqual(r.object("encoding", prefix + b":0"), b"quicklist")

	def recovered(self, r, m):
		reads = info(r, "coll_list_node_reads")
		check(self, r, m)
		self.assertGrew(r, "coll_list_node_reads", reads, "reads of recovered large lists")


class Durability(Base):
	def shutdown_restart(self, flags):
		st = self.store(flags + AOF)
		m = Model(1)
		r = st.start()
		self.built(r, m, b"d", 3, 3000)
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.assertGreater(info(r, "checkpoint_last_id"), 0, "the restart loaded a checkpoint")
		self.recovered(r, m)
		churn(r, m, b"d")
		self.built(r, m, b"e", 1, 1500)
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_a_checkpoint_at_shutdown_brings_large_lists_back(self):
		self.shutdown_restart(MEMORY)

	def test_a_checkpoint_at_shutdown_brings_large_lists_back_with_a_storage_tier(self):
		self.shutdown_restart(TIER)

	def sigkill_replay(self, flags):
		st = self.store(flags + AOF)
		m = Model(2)
		r = st.start()
		self.built(r, m, b"k", 2, 2500)
		self.assertTrue(r.save())
		churn(r, m, b"k")
		self.built(r, m, b"n", 2, 2000)   # converted after the SAVE: only the AOF has them
		check(self, r, m)
		self.assertEqual(st.kill(), -signal.SIGKILL)
		r = st.start()
		self.assertGreater(info(r, "checkpoint_last_id"), 0, "the restart loaded the SAVE's checkpoint")
		self.assertGreater(info(r, "aof_replayed_records"), 0, "the AOF replayed the writes after the SAVE")
		self.recovered(r, m)
		churn(r, m, b"n")
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_a_sigkill_after_a_save_replays_large_lists_from_the_aof(self):
		self.sigkill_replay(MEMORY)

	def test_a_sigkill_after_a_save_replays_large_lists_from_the_aof_with_a_storage_tier(self):
		self.sigkill_replay(TIER)


def fill(r, m, tag, mb):
	p = r.pipeline(transaction=False)
	for i in range(0, mb * 1000, PIPE):
		for j in range(i, i + PIPE):
			k = b"fill:%s:%d" % (tag, j)
			m.keys[k] = (b"%d:" % j) * 250
			p.set(k, m.keys[k])
		flush(p)


class Compaction(Base):
	def test_compaction_drops_the_nodes_of_a_deleted_large_list(self):
		st = self.store(COMPACT)
		m = Model(3)
		r = st.start()
		self.built(r, m, b"doomed", 8, 15000)
		self.built(r, m, b"kept", 1, 4000)
		p = r.pipeline(transaction=False)
		for k in sorted(k for k in m.keys if k.startswith(b"doomed:")):
			m.delete(p, k)
		flush(p)
		fill(r, m, b"a", 6)   # 6 MB of strings push the dead nodes out of the 4 MB memory
		dropped, copied = info(r, "compact_parts_dropped"), info(r, "compaction_copied_records")
		before = store_bytes(st.data)
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		now = self.assertGrew(r, "compact_parts_dropped", dropped, "COMPACT over the nodes of DELeted lists")
		self.assertGrew(r, "compaction_copied_records", copied, "COMPACT copies the live nodes")
		print("coll_list_persist: %d parts dropped, store %d KiB before COMPACT, %d KiB after" %
		      (now - dropped, before >> 10, store_bytes(st.data) >> 10), flush=True)
		# 8 lists of 15000 elements, at most 128 elements a node: at least 937 node parts
		self.assertGreaterEqual(now - dropped, 8 * 15000 // 128, "COMPACT dropped the DELeted lists' nodes")
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_compaction_drops_the_nodes_a_live_list_popped(self):
		"""Nothing is deleted: one list of 20000 elements loses 15000 to LPOP and RPOP with counts
		and to LTRIM; its dead nodes age onto the device; COMPACT drops parts (only this list has
		any) and the list is whole, also after a restart."""
		st = self.store(COMPACT)
		m = Model(4)
		r = st.start()
		self.built(r, m, b"q", 1, 20000)
		p = r.pipeline(transaction=False)
		for _ in range(20):
			m.pop(p, b"q:0", 250, left=True)
			m.pop(p, b"q:0", 250, left=False)
		m.ltrim(p, b"q:0", 2500, -2501)
		flush(p)
		self.assertEqual(r.llen(b"q:0"), 5000)
		fill(r, m, b"b", 6)
		dropped = info(r, "compact_parts_dropped")
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		self.assertGrew(r, "compact_parts_dropped", dropped, "COMPACT over the nodes the list popped")
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


if __name__ == "__main__":
	unittest.main(verbosity=2)
