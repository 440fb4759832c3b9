#!/usr/bin/python3
"""coll_large_persist.py - the large layout of hashes and sets (docs/ARCHITECTURE.md "Large collections")
through real server processes and real files, with python3-redis: what restarts bring back (a
checkpoint at SHUTDOWN with the AOF on; a SIGKILL after a SAVE, so that the AOF replays the groups
written since), and what compaction does with the parts of deleted large collections (drops them,
keeps the others whole).

Run: coll_large_persist.py [Option|Durability|Compaction] (unittest's selection; ctest runs each class as its own
test). Environment: SPW_BIN (the folder of spillway-server, as ctest sets it).

Notes:
 1. Every server of a test starts on the test's own data folder (--dir and --logdir), so a restart
    finds what the last process left; the folder goes at the test's end when it passed.
 2. The collections are forced large: --coll-record-max 128, and --hash-max-listpack-entries 4 /
    --set-max-intset-entries 4 on the command line (CONFIG SET would not outlive a restart), so a
    hash of more than 4 fields or a set of more than 4 members is hashtable-encoded and, past 128
    bytes, large. A small listpack hash and a small intset ride along (they stay small).
 3. A model (dict of key -> dict or set) holds what was written; after each restart every key's
    whole content (HGETALL, SMEMBERS), its TYPE and length, DBSIZE, and a sample of point reads
    (HGET, SISMEMBER, HMGET of absent fields) are compared with it.
 4. The proofs that the paths ran, from INFO: coll_large_conversions and coll_bucket_splits while
    building; checkpoint_last_id (a checkpoint was loaded); aof_replayed_records (the AOF replayed
    records: with the SIGKILL, the groups since the SAVE); coll_part_reads after a restart (the
    recovered collections are read as parts, not as one record); compact_parts_dropped.
 5. A SIGKILL loses nothing acknowledged even under --aof-fsync everysec: a worker write()s a pass's
    AOF records before that pass's replies leave (server/worker.c note 7), and the kernel keeps
    what a killed process wrote. The machine does not crash here.
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_random import Server  # noqa: E402

try:
	import redis
except ImportError:
	print("FAIL: python3-redis is not installed (Debian package python3-redis; run with /usr/bin/python3)")
	sys.exit(1)

LARGE = ["--coll-record-max", "128", "--hash-max-listpack-entries", "4", "--set-max-intset-entries", "4"]
MEMORY = ["--threads", "2", "--memory", "64m", "--page", "1m", "--index", "1m"]
TIER = ["--threads", "2", "--storage-tier", "--device-type", "posix", "--memory", "1m", "--page", "64k",
        "--segment", "4m", "--index", "1m"]
AOF = ["--aof", "yes", "--aof-fsync", "everysec", "--save", "", "--checkpoint-interval", "0"]
BATCH = 64          # fields or members per command
PIPE = 32           # commands per pipeline


def spw_exe():
	exe = os.path.join(os.environ.get("SPW_BIN", ""), "spillway-server")
	if not os.access(exe, os.X_OK):
		raise SystemExit("FAIL: %s is missing or not executable (SPW_BIN)" % exe)
	return exe


class Store:
	"""spillway-server processes on one data folder, one at a time (note 1)."""

	def __init__(self, flags):
		self.flags = flags
		self.data = tempfile.mkdtemp(prefix="spw-colllarge-")
		self.srv = None
		self.r = None

	def start(self):
		exe, data = spw_exe(), self.data
		self.srv = Server("spillway-server", lambda port, d: [
			exe, "--bind", "127.0.0.1", "--port", str(port), "--dir", data, "--logdir", data] + self.flags)
		self.r = redis.Redis(host="127.0.0.1", port=self.srv.port, socket_timeout=60)
		return self.r

	def shutdown(self):
		"""SHUTDOWN (a checkpoint first) and the exit status, which must be 0. An error reply (the
		checkpoint failed) raises."""
		self.r.shutdown()   # returns once the connection closes
		self.r.connection_pool.disconnect()
		rc = self.srv.proc.wait(60)
		self.srv.stop()
		return rc

	def kill(self):
		"""SIGKILL; the exit status (-9). Its log folder goes (the data folder stays)."""
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
		else:
			print("coll_large_persist: the data folder is kept in %s" % self.data, flush=True)


def info(r, name):
	"""An INFO field (any default section) as an int; fails when the field is missing (a renamed
	counter must not pass as 0)."""
	fields = r.info()
	if name not in fields:
		raise AssertionError("INFO has no field %s" % name)
	return int(fields[name])


class Model:
	"""What was written (note 3): key -> dict (a hash), set (a set) or bytes (a string), and the
	writes that keep it."""

	def __init__(self, seed):
		self.rng = random.Random(seed)
		self.keys = {}

	def value(self):
		n = self.rng.choice((1, 8, 20, 40, 90))
		return bytes(self.rng.getrandbits(8) for _ in range(n))

	def member(self, i):
		return b"%d" % (i * 7919) if i % 3 == 0 else b"m:%d:\x00\xff" % i

	def hset(self, pipe, key, fields):
		h = self.keys.setdefault(key, {})
		for i in range(0, len(fields), BATCH):
			pairs = {f: self.value() for f in fields[i:i + BATCH]}
			h.update(pairs)
			pipe.hset(key, mapping=pairs)

	def hdel(self, pipe, key, fields):
		h = self.keys[key]
		for f in fields:
			h.pop(f, None)
		pipe.hdel(key, *fields)
		if not h:
			del self.keys[key]

	def sadd(self, pipe, key, members):
		s = self.keys.setdefault(key, set())
		for i in range(0, len(members), BATCH):
			s.update(members[i:i + BATCH])
			pipe.sadd(key, *members[i:i + BATCH])

	def srem(self, pipe, key, members):
		s = self.keys[key]
		s.difference_update(members)
		pipe.srem(key, *members)
		if not s:
			del self.keys[key]

	def set(self, pipe, key, val):
		self.keys[key] = val
		pipe.set(key, val)

	def delete(self, pipe, key):
		self.keys.pop(key, None)
		pipe.delete(key)

	def rename(self, pipe, key, to):
		self.keys[to] = self.keys.pop(key)
		pipe.rename(key, to)

	def copy(self, pipe, key, to):
		self.keys[to] = self.keys[key].copy()
		pipe.copy(key, to)


def flush(pipe):
	"""Send what pipe holds (PIPE commands at a time); every reply must be a success."""
	for res in pipe.execute(raise_on_error=True):
		if isinstance(res, Exception):
			raise res


def build(r, m, prefix, nhash, nset, members):
	"""nhash hashes and nset sets of members fields/members each, plus a small hash and a small
	intset (note 2), pipelined."""
	p = r.pipeline(transaction=False)
	for k in range(nhash):
		m.hset(p, b"%s:h%d" % (prefix, k), [b"field:%d" % i for i in range(members)])
		flush(p)
	for k in range(nset):
		m.sadd(p, b"%s:s%d" % (prefix, k), [m.member(i) for i in range(members)])
		flush(p)
	m.hset(p, prefix + b":hsmall", [b"a", b"b"])
	m.sadd(p, prefix + b":ssmall", [b"1", b"2", b"3"])
	flush(p)


def churn(r, m, prefix, members):
	"""Changes to every collection of prefix: new fields/members (more splits), overwrites, deletes
	of some, one collection emptied member by member (its head goes), one DELeted whole, one
	RENAMEd and one COPYed (both through the whole-read path: a small-layout record, ARCHITECTURE
	"Large collections"), and a write to the renamed one (it converts again)."""
	p = r.pipeline(transaction=False)
	keys = sorted(k for k in m.keys if k.startswith(prefix + b":") and not isinstance(m.keys[k], bytes))
	for n, k in enumerate(keys):
		if isinstance(m.keys[k], dict):
			m.hset(p, k, [b"field:%d" % i for i in range(members // 2, members + members // 2)])
			m.hdel(p, k, [b"field:%d" % i for i in range(0, members, 5)] + [b"nosuch"])
		else:
			m.sadd(p, k, [m.member(i) for i in range(members, members + members // 2)])
			m.srem(p, k, [m.member(i) for i in range(1, members, 4)] + [b"nosuch"])
		if len(p) >= PIPE:
			flush(p)
	flush(p)
	big = [k for k in keys if k in m.keys and len(m.keys[k]) > 4]
	gone, renamed, copied, emptied = big[0], big[1], big[2], big[-1]
	m.delete(p, gone)
	m.rename(p, renamed, prefix + b":renamed")
	m.copy(p, copied, prefix + b":copied")
	if isinstance(m.keys[prefix + b":renamed"], dict):
		m.hset(p, prefix + b":renamed", [b"after-rename"])
	else:
		m.sadd(p, prefix + b":renamed", [b"after-rename"])
	coll = m.keys[emptied]
	items = sorted(coll)
	for i in range(0, len(items), BATCH):
		part = items[i:i + BATCH]
		(m.hdel if isinstance(coll, dict) else m.srem)(p, emptied, part)
	flush(p)


def check(tc, r, m):
	"""Every key of the model, whole and by point reads, and nothing else (note 3)."""
	tc.assertEqual(r.dbsize(), len(m.keys))
	rng = random.Random(len(m.keys))
	for k in sorted(m.keys):
		want = m.keys[k]
		if isinstance(want, bytes):
			tc.assertEqual(r.get(k), want, k)
		elif isinstance(want, dict):
			tc.assertEqual(r.type(k), b"hash", k)
			tc.assertEqual(r.hlen(k), len(want), k)
			got = r.hgetall(k)
			tc.assertEqual(len(got), len(want), k)
			tc.assertTrue(got == want, "%r: HGETALL differs from what was written" % k)
			fields = rng.sample(sorted(want), min(20, len(want)))
			tc.assertEqual(r.hmget(k, fields + [b"absent"]), [want[f] for f in fields] + [None], k)
			for f in fields[:5]:
				tc.assertEqual(r.hget(k, f), want[f], k)
		else:
			tc.assertEqual(r.type(k), b"set", k)
			tc.assertEqual(r.scard(k), len(want), k)
			tc.assertTrue(r.smembers(k) == want, "%r: SMEMBERS differs from what was written" % k)
			for mem in rng.sample(sorted(want), min(10, len(want))):
				tc.assertTrue(r.sismember(k, mem), (k, mem))
			tc.assertFalse(r.sismember(k, b"absent"), k)


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

	def built(self, r, m, prefix, nhash, nset, members):
		conv, splits = info(r, "coll_large_conversions"), info(r, "coll_bucket_splits")
		build(r, m, prefix, nhash, nset, members)
		self.assertGreaterEqual(info(r, "coll_large_conversions") - conv, nhash + nset,
		                        "every hash and set built should have become large")
		self.assertGrew(r, "coll_bucket_splits", splits, "large collections of %d members" % members)
		self.assertEqual(r.object("encoding", prefix + b":h0"), b"hashtable")
		self.assertEqual(r.object("encoding", prefix + b":s0"), b"hashtable")
		self.assertEqual(r.object("encoding", prefix + b":ssmall"), b"intset")
		h0 = m.keys[prefix + b":h0"]
		self.assertGreaterEqual(r.memory_usage(prefix + b":h0"), sum(len(f) + len(v) for f, v in h0.items()),
		                        "MEMORY USAGE of a large hash counts its parts")

	def recovered(self, r, m):
		"""After a restart: the model's keys, read as parts (note 4)."""
		parts = info(r, "coll_part_reads")
		check(self, r, m)
		self.assertGrew(r, "coll_part_reads", parts, "reads of recovered large collections")


class Durability(Base):
	def shutdown_restart(self, flags):
		"""Build, SHUTDOWN (checkpoint), restart: all there; churn, SHUTDOWN, restart: all there."""
		st = self.store(flags + AOF)
		m = Model(1)
		r = st.start()
		self.built(r, m, b"d", 4, 4, 1500)
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.assertGreater(info(r, "checkpoint_last_id"), 0, "the restart loaded a checkpoint")
		self.recovered(r, m)
		churn(r, m, b"d", 1500)
		self.built(r, m, b"e", 1, 1, 600)   # new large ones on top of recovered ones
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_a_checkpoint_at_shutdown_brings_large_collections_back(self):
		self.shutdown_restart(MEMORY)

	def test_a_checkpoint_at_shutdown_brings_large_collections_back_with_a_storage_tier(self):
		self.shutdown_restart(TIER)

	def sigkill_replay(self, flags):
		"""Build, SAVE, churn and build more (groups only in the AOF), SIGKILL, restart: the AOF
		replays them and every key is as written; more writes on the replayed state survive a
		SHUTDOWN and restart."""
		st = self.store(flags + AOF)
		m = Model(2)
		r = st.start()
		self.built(r, m, b"k", 3, 3, 1200)
		self.assertTrue(r.save())
		groups = info(r, "coll_group_writes")
		churn(r, m, b"k", 1200)
		self.built(r, m, b"n", 2, 2, 800)    # converted after the SAVE: only the AOF has them
		self.assertGrew(r, "coll_group_writes", groups, "splits and conversions after the SAVE")
		check(self, r, m)
		self.assertEqual(st.kill(), -signal.SIGKILL)
		r = st.start()
		self.assertGreater(info(r, "checkpoint_last_id"), 0, "the restart loaded the SAVE's checkpoint")
		self.assertGreater(info(r, "aof_replayed_records"), 0, "the AOF replayed the writes after the SAVE")
		self.recovered(r, m)
		churn(r, m, b"n", 800)
		check(self, r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_a_sigkill_after_a_save_replays_the_groups_from_the_aof(self):
		self.sigkill_replay(MEMORY)

	def test_a_sigkill_after_a_save_replays_the_groups_from_the_aof_with_a_storage_tier(self):
		self.sigkill_replay(TIER)


class Option(Base):
	def test_coll_record_max_decides_which_hashtable_collections_become_large(self):
		"""The option (ARCHITECTURE "Large collections"): CONFIG GET/SET within 128..65536; a
		hashtable-encoded hash or set converts once its payload passes it (lowered at run time: on
		its next write), a listpack hash or an intset never, whatever its bytes; a large one
		stays large while members remain, and goes when emptied."""
		st = self.store(MEMORY)
		st.flags = [f for f in st.flags if f not in ("--coll-record-max", "128")]
		r = st.start()
		self.assertEqual(r.config_get("coll-record-max"), {"coll-record-max": "4096"})
		for bad in ("127", "65537", "x"):
			with self.assertRaises(redis.exceptions.ResponseError, msg=bad):
				r.config_set("coll-record-max", bad)
		m = Model(4)
		p = r.pipeline(transaction=False)
		m.hset(p, b"mid", [b"field:%d" % i for i in range(30)])   # hashtable, at most 3.2 KB: small
		m.sadd(p, b"mids", [m.member(i) for i in range(30)])
		p.hset(b"lp", mapping={b"a": b"x" * 60, b"b": b"y" * 60, b"c": b"z" * 60})   # listpack
		m.keys[b"lp"] = {b"a": b"x" * 60, b"b": b"y" * 60, b"c": b"z" * 60}
		m.sadd(p, b"ints", [b"1000000000000", b"-2000000000000", b"3", b"4"])      # intset
		flush(p)
		conv = info(r, "coll_large_conversions")
		self.assertEqual(r.object("encoding", b"mid"), b"hashtable")
		self.assertEqual(r.object("encoding", b"lp"), b"listpack")
		self.assertEqual(r.object("encoding", b"ints"), b"intset")
		self.assertTrue(r.config_set("coll-record-max", "128"))
		self.assertEqual(r.config_get("coll-record-max"), {"coll-record-max": "128"})
		self.assertEqual(info(r, "coll_large_conversions"), conv, "CONFIG SET converts nothing itself")
		p.hset(b"lp", b"a", b"w" * 60)   # no longer than hash-max-listpack-value: still a listpack
		m.keys[b"lp"][b"a"] = b"w" * 60
		m.srem(p, b"ints", [b"3"])
		m.sadd(p, b"ints", [b"7"])   # still 4 members: an intset
		flush(p)
		self.assertEqual(info(r, "coll_large_conversions"), conv, "a listpack hash and an intset stay small")
		m.hset(p, b"mid", [b"field:1"])
		m.sadd(p, b"mids", [b"one-more"])
		flush(p)
		self.assertEqual(info(r, "coll_large_conversions"), conv + 2, "the next write converts them")
		check(self, r, m)
		self.assertTrue(r.config_set("coll-record-max", "65536"))
		m.hset(p, b"mid", [b"field:%d" % i for i in range(60, 80)])
		flush(p)
		self.assertEqual(info(r, "coll_large_conversions"), conv + 2)
		check(self, r, m)
		m.hdel(p, b"mid", sorted(m.keys[b"mid"]))
		m.srem(p, b"mids", sorted(m.keys[b"mids"]))
		flush(p)
		check(self, r, m)
		self.assertEqual(r.exists(b"mid", b"mids"), 0)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


COMPACT = ["--threads", "2", "--storage-tier", "yes", "--device-type", "posix", "--memory", "4m", "--page",
           "64k", "--segment", "1m", "--index", "4m", "--compaction-io-limit", "0", "--save", "",
           "--checkpoint-interval", "0", "--compaction-max-segments", "0"]


def store_bytes(data):
	"""Allocated bytes of the segment files (what du shows for <dir>/Store)."""
	path, total = os.path.join(data, "Store"), 0
	for name in os.listdir(path):
		st = os.stat(os.path.join(path, name))
		total += st.st_blocks * 512
	return total


class Compaction(Base):
	def test_compaction_drops_the_parts_of_deleted_large_collections(self):
		"""Large hashes (and sets) on a storage tier with 1 MB segments, most DELeted, more written
		after (the deleted parts age onto the device), COMPACT: parts were dropped, the disk
		shrank, the surviving large collections are whole, also after a restart."""
		st = self.store(COMPACT)
		m = Model(3)
		r = st.start()
		self.built(r, m, b"doomed", 12, 4, 2000)
		self.built(r, m, b"kept", 2, 2, 1500)
		p = r.pipeline(transaction=False)
		for k in sorted(k for k in m.keys if k.startswith(b"doomed:")):
			m.delete(p, k)
		flush(p)
		self.built(r, m, b"later", 2, 2, 1500)
		churn(r, m, b"kept", 1500)
		for i in range(0, 6000, PIPE):   # 6 MB of strings push the dead parts out of the 4 MB memory
			for j in range(i, i + PIPE):
				m.set(p, b"fill:%d" % j, (b"%d:" % j) * 250)
			flush(p)
		dropped, copied = info(r, "compact_parts_dropped"), info(r, "compaction_copied_records")
		before = store_bytes(st.data)
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		self.assertGrew(r, "compact_parts_dropped", dropped, "COMPACT over the parts of DELeted hashes")
		self.assertGrew(r, "compaction_copied_records", copied, "COMPACT copies the live parts")
		after = store_bytes(st.data)
		print("coll_large_persist: store %d KiB before COMPACT, %d KiB after" % (before >> 10, after >> 10),
		      flush=True)
		self.assertLess(after, before, "COMPACT gave back the segments of the dead parts")
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.recovered(r, m)
		self.assertEqual(st.shutdown(), 0)
		self.done = True

	def test_compaction_keeps_the_parts_of_a_large_hash_under_the_empty_key(self):
		"""A large hash under the key "" (its registry part's value is the empty owner key): its
		parts age onto the device, COMPACT keeps every one (the registry was written as a
		tombstone, and compaction then dropped every bucket of the live hash), also after a
		SIGKILL (the AOF replays the empty registry value), a second COMPACT and a restart."""
		st = self.store(COMPACT + AOF)
		r = st.start()
		p = r.pipeline(transaction=False)
		want = {b"field:%d" % i: b"value:%d" % i for i in range(2000)}
		for f, v in want.items():
			p.hset(b"", f, v)
		flush(p)
		self.assertGreater(info(r, "coll_large_conversions"), 0, "the hash under \"\" became large")
		for i in range(0, 6000, PIPE):   # 6 MB of strings push the parts out of the 4 MB memory
			for j in range(i, i + PIPE):
				p.set(b"fill:%d" % j, (b"%d:" % j) * 250)
			flush(p)
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		self.assertEqual(r.hgetall(b""), want)
		self.assertEqual(st.kill(), -signal.SIGKILL)
		r = st.start()   # the AOF replays the group, its empty registry value included
		self.assertEqual(r.hgetall(b""), want)
		p = r.pipeline(transaction=False)
		for i in range(0, 6000, PIPE):
			for j in range(i, i + PIPE):
				p.set(b"fill2:%d" % j, (b"%d:" % j) * 250)
			flush(p)
		self.assertEqual(r.execute_command("COMPACT"), b"OK")
		self.assertEqual(r.hgetall(b""), want)
		self.assertEqual(st.shutdown(), 0)
		r = st.start()
		self.assertEqual(r.hgetall(b""), want)
		self.assertEqual(st.shutdown(), 0)
		self.done = True


if __name__ == "__main__":
	unittest.main(verbosity=2)
