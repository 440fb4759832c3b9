#!/usr/bin/python3
"""coll_list_large.py - large lists (server/coll_list_large.c, coll/deque.h) on a real
spillway-server with --coll-record-max 256, so that a list past 512 bytes becomes a deque of node
parts with its two end nodes in the head.

Checks, against a Python list built by the same commands:
 1. A list of 50000 elements built by LPUSH and RPUSH (ints and strings, some args lists of many):
    coll_large_conversions moved, coll_list_node_writes moved (nodes became parts), no whole
    operation ran (coll_list_whole_ops unchanged) while building.
 2. Point reads: LLEN, LINDEX (positive, negative, out of range), LRANGE of small and big ranges
    (negative indexes, past the end, reversed): equal to the model, coll_list_node_reads moved,
    coll_list_whole_ops did not.
 3. Point writes: LSET (end nodes and interior ones, longer and shorter values), LPOP / RPOP with
    and without a count (counts crossing many nodes), LTRIM (both sides), LMOVE / RPOPLPUSH to
    and from a small list, LMPOP; still no whole operation.
 4. Whole paths: LINSERT, LREM, LPOS (with RANK, COUNT, MAXLEN) equal to the model, and
    coll_list_whole_ops moved; then the point paths still work on the list rewritten afresh.
 5. RENAME, COPY, DUMP / RESTORE, TYPE, OBJECT ENCODING; WRONGTYPE on a large list; errors:
    LSET out of range, LSET of a missing key, LINDEX with a bad index; an element of 1.5 MB pushed
    onto a large list with 1 MB pages where its head must be written with a node part (a group:
    each record at most a page) fails with "value too large", nothing written.
 6. A list emptied by pops is gone (EXISTS 0), and a new list under its name starts small.
 7. Four clients RPUSH / LPUSH one large list at once: every element is there exactly once
    (the latch and the head plan's check).
 8. With --storage-tier and a small --memory: a list whose nodes went to the device, a cold
    LINDEX of an interior element moves coll_list_node_reads by exactly 1, and parks
    (tier_pending_reads moves); a cold LRANGE of 300 reads the nodes it spans.

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

N = 50000
FLAGS = ["--threads", "2", "--memory", "256m", "--page", "1m", "--index", "4m", "--coll-record-max", "256"]
TIER_FLAGS = ["--storage-tier", "--device-type", "posix", "--threads", "1", "--memory", "1m",
              "--page", "64k", "--segment", "1m", "--index", "1m", "--coll-record-max", "256"]


def st(r, name):
	return r.info("stats").get(name, 0)


def elem(i):
	return str(i) if i % 3 == 0 else "e:%d:%s" % (i, "x" * (i % 7))


def b(x):
	return x.encode() if isinstance(x, str) else x


def build(r, key, model, n):
	pipe = r.pipeline(transaction=False)
	i = 0
	while i < n:
		k = 1 if i % 11 else 9
		els = [elem(i + j) for j in range(k)]
		if (i // 7) % 2:
			pipe.lpush(key, *els)
			for e in els:
				model.insert(0, e)
		else:
			pipe.rpush(key, *els)
			model.extend(els)
		i += k
		if i % 2000 < k:
			pipe.execute()
	pipe.execute()


def check_all(r, key, model, where):
	check(r.llen(key) == len(model), "%s: LLEN %d, expected %d" % (where, r.llen(key), len(model)))
	got = r.lrange(key, 0, -1)
	if got != [b(x) for x in model]:
		first = next((i for i, (g, m) in enumerate(zip(got, model)) if g != b(m)), min(len(got), len(model)))
		fail("%s: LRANGE 0 -1 differs at %d (got %d elements, %r; expected %d, %r)" %
		     (where, first, len(got), got[first:first + 3], len(model), model[first:first + 3]))


def point_reads(r, key, model):
	n = len(model)
	pipe = r.pipeline(transaction=False)
	idx = [random.randrange(-n - 5, n + 5) for _ in range(2000)] + [0, -1, n - 1, -n, n, -n - 1]
	for i in idx:
		pipe.lindex(key, i)
	for i, g in zip(idx, pipe.execute()):
		want = b(model[i]) if -n <= i < n else None
		check(g == want, "LINDEX %d: %r, expected %r" % (i, g, want))
	for _ in range(300):
		a = random.randrange(-n - 10, n + 10)
		z = a + random.choice([0, 1, 5, 100, 700, -3])
		got = r.lrange(key, a, z)
		aa = a + n if a < 0 else a
		zz = z + n if z < 0 else z
		aa = max(aa, 0)
		want = [b(x) for x in model[aa:zz + 1]] if aa <= zz and aa < n else []
		check(got == want, "LRANGE %d %d: %d elements, expected %d" % (a, z, len(got), len(want)))


def phase_build(r):
	model = []
	conv, nw, whole = st(r, "coll_large_conversions"), st(r, "coll_list_node_writes"), st(r, "coll_list_whole_ops")
	build(r, "L", model, N)
	check(st(r, "coll_large_conversions") > conv, "no conversion counted")
	check(st(r, "coll_list_node_writes") > nw + N // 200, "too few node writes: %d" % (st(r, "coll_list_node_writes") - nw))
	check(st(r, "coll_list_whole_ops") == whole, "a whole operation ran while pushing")
	check(r.type("L") == b"list", "TYPE")
	check(r.object("encoding", "L") == b"quicklist", "OBJECT ENCODING")
	reads, whole = st(r, "coll_list_node_reads"), st(r, "coll_list_whole_ops")
	point_reads(r, "L", model)
	check(st(r, "coll_list_node_reads") > reads, "point reads read no node part")
	check(st(r, "coll_list_whole_ops") == whole, "a point read assembled the whole list")
	check_all(r, "L", model, "built")
	return model


def phase_point_writes(r, model):
	whole = st(r, "coll_list_whole_ops")
	n = len(model)
	for i in [0, 1, -1, n // 2, n // 3, 777, -999] + [random.randrange(n) for _ in range(200)]:
		v = random.choice(["s%d" % i, str(i * 7), "long-" + "y" * random.randrange(40), ""])
		check(r.lset("L", i, v) is True, "LSET %d" % i)
		model[i] = v
	check_all(r, "L", model, "after LSET")
	for cnt in [None, 1, 3, 200, 1500]:
		for left in (True, False):
			got = (r.lpop if left else r.rpop)("L", cnt) if cnt else (r.lpop if left else r.rpop)("L")
			if cnt is None:
				want = b(model.pop(0) if left else model.pop())
			else:
				k = min(cnt, len(model))
				if left:
					want, model[:] = [b(x) for x in model[:k]], model[k:]
				else:
					want, model[:] = [b(x) for x in reversed(model[len(model) - k:])], model[:len(model) - k]
			check(got == want, "%s %s: %r..., expected %r..." % ("LPOP" if left else "RPOP", cnt, str(got)[:80], str(want)[:80]))
	check(r.lpop("L", 0) == [], "LPOP 0")
	check_all(r, "L", model, "after pops")
	# pushes after pops, then LTRIM on both sides
	r.lpush("L", *["p%d" % i for i in range(300)])
	model[:0] = ["p%d" % i for i in reversed(range(300))]
	r.rpush("L", *["q%d" % i for i in range(300)])
	model.extend("q%d" % i for i in range(300))
	check(r.ltrim("L", 137, -211) is True, "LTRIM")
	model[:] = model[137:len(model) - 210]
	check_all(r, "L", model, "after LTRIM")
	r.ltrim("L", 0, -1)
	r.ltrim("L", -len(model) - 100, len(model) + 100)
	check_all(r, "L", model, "after LTRIM of everything")
	# two keys: LMOVE, RPOPLPUSH, LMPOP
	r.rpush("small", "a", "b")
	sm = ["a", "b"]
	check(r.lmove("L", "small", "LEFT", "RIGHT") == b(model[0]), "LMOVE L small")
	sm.append(model.pop(0))
	check(r.lmove("small", "L", "LEFT", "RIGHT") == b"a", "LMOVE small L")
	sm.pop(0)
	model.append("a")
	check(r.rpoplpush("L", "small") == b(model[-1]), "RPOPLPUSH")
	sm.insert(0, model.pop())
	check(r.lrange("small", 0, -1) == [b(x) for x in sm], "small list after moves")
	got = r.lmpop(2, "nosuch", "L", direction="RIGHT", count=5)
	want = [b"L", [b(x) for x in reversed(model[-5:])]]
	del model[-5:]
	check(got == want, "LMPOP: %r" % (got,))
	check_all(r, "L", model, "after moves")
	check(st(r, "coll_list_whole_ops") == whole, "a point write assembled the whole list")


def lpos_model(model, e, rank=1, count=None, maxlen=0):
	idx = list(range(len(model)))
	if rank < 0:
		idx.reverse()
	if maxlen:
		idx = idx[:maxlen]
	hits = [i for i in idx if model[i] == e][abs(rank) - 1:]
	if count is None:
		return hits[0] if hits else None
	return hits if count == 0 else hits[:count]


def phase_whole(r, model):
	whole = st(r, "coll_list_whole_ops")
	pivot = model[len(model) // 2]
	check(r.linsert("L", "BEFORE", pivot, "ins") == len(model) + 1, "LINSERT")
	model.insert(model.index(pivot), "ins")
	check(r.linsert("L", "AFTER", "nosuch-pivot", "x") == -1, "LINSERT missing pivot")
	for i in range(0, 40):
		r.rpush("L", "dup")
		model.append("dup")
	r.lpush("L", "dup")
	model.insert(0, "dup")
	check(r.lrem("L", 3, "dup") == 3, "LREM 3")
	for _ in range(3):
		model.remove("dup")
	check(r.lrem("L", -2, "dup") == 2, "LREM -2")
	for _ in range(2):
		j = len(model) - 1 - model[::-1].index("dup")
		del model[j]
	for args in [dict(), dict(rank=2), dict(rank=-1), dict(count=0), dict(count=3, rank=-2), dict(maxlen=100)]:
		got = r.lpos("L", "dup", **args)
		check(got == lpos_model(model, "dup", **args), "LPOS %r: %r" % (args, got))
	check(st(r, "coll_list_whole_ops") > whole, "the whole path did not run")
	check_all(r, "L", model, "after whole writes")
	point_reads(r, "L", model)


def phase_keys(r, model):
	check(r.rename("L", "L2") is True, "RENAME")
	check_all(r, "L2", model, "renamed")
	r.rpush("L2", "after-rename")     # the small record written by RENAME converts again
	model.append("after-rename")
	check(r.copy("L2", "L") is True, "COPY")
	check_all(r, "L", model, "copied")
	dump = r.dump("L2")
	r.delete("L2")
	r.restore("L2", 0, dump)
	check_all(r, "L2", model, "restored")
	r.set("str", "v")
	try:
		r.lpush("str", "x")
		fail("LPUSH onto a string")
	except redis.ResponseError as ex:
		check("WRONGTYPE" in str(ex), "WRONGTYPE: %s" % ex)
	try:
		r.hset("L", "f", "v")
		fail("HSET onto a large list")
	except redis.ResponseError as ex:
		check("WRONGTYPE" in str(ex), "WRONGTYPE on a list: %s" % ex)
	# list commands on a large hash: coll_large_rmw hands them to the list module before any head
	# read (the seam), which answers WRONGTYPE itself
	r.hset("H", mapping={"f%d" % i: "v" * 20 for i in range(200)})
	for cmd in (("LPUSH", "H", "x"), ("RPOP", "H", 2), ("LSET", "H", 0, "x"), ("LTRIM", "H", 0, 1),
	            ("LINSERT", "H", "BEFORE", "a", "b"), ("LRANGE", "H", 0, 1), ("LMOVE", "H", "Z", "LEFT", "RIGHT")):
		try:
			r.execute_command(*cmd)
			fail("%s onto a large hash" % cmd[0])
		except redis.ResponseError as ex:
			check("WRONGTYPE" in str(ex), "%s on a large hash: %s" % (cmd[0], ex))
	check(r.hlen("H") == 200 and r.delete("H") == 1, "the large hash after list commands")
	for cmd, want in [(("LSET", "L", 10 ** 9, "x"), "index out of range"), (("LSET", "nolist", 0, "x"), "no such key"),
	                  (("LINDEX", "L", "abc"), "not an integer")]:
		try:
			r.execute_command(*cmd)
			fail("%r did not fail" % (cmd,))
		except redis.ResponseError as ex:
			check(want in str(ex), "%r: %s" % (cmd, ex))
	# an element past a page (1 MB) on a large list: out of line (server/coll_list_elem.c), its
	# part written alone before the head's group; pushes on that side go on (no wedge). One
	# RPUSH of 600 converts the list with lo at a node boundary, so the LPUSH starts a new left
	# node. An element too big for any record: coll_list_elems.py.
	r.rpush("B", *["b%d" % i for i in range(600)])
	check(r.lpush("B", "x" * 1500000) == 601, "an LPUSH of 1.5 MB onto a large list with 1 MB pages")
	check(r.lpush("B", "y", "z") == 603 and r.rpush("B", "w" * 1500000) == 604, "pushes after it")
	check(r.lrange("B", 0, 3) == [b"z", b"y", b"x" * 1500000, b"b0"], "the list after big pushes")
	check(r.rpop("B") == b"w" * 1500000 and r.lpop("B", 3)[2] == b"x" * 1500000, "big pops")
	check(r.llen("B") == 600 and r.lindex("B", 0) == b"b0", "the list after the pops")
	r.delete("B")
	# emptied by pops: gone
	while r.exists("L2"):
		r.rpop("L2", 1000)
	check(r.lpush("L2", "new") == 1, "a new list under an emptied large one")
	check(r.lrange("L2", 0, -1) == [b"new"], "the new list")


def phase_concurrent(r0, port):
	r0.delete("C")
	r0.rpush("C", *["init%d" % i for i in range(2000)])
	def work(t):
		r = redis.Redis(port=port)
		for i in range(0, 3000, 3):
			(r.rpush if i % 2 else r.lpush)("C", "t%d:%d" % (t, i), "t%d:%d" % (t, i + 1), "t%d:%d" % (t, i + 2))
	ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
	for t in ts:
		t.start()
	for t in ts:
		t.join()
	got = r0.lrange("C", 0, -1)
	want = sorted([b"init%d" % i for i in range(2000)] + [b"t%d:%d" % (t, i) for t in range(4) for i in range(3000)])
	check(sorted(got) == want, "concurrent pushes: %d elements, expected %d" % (len(got), len(want)))
	check(r0.llen("C") == len(want), "concurrent LLEN")


def phase_tier():
	srv = spillway_start(os.path.join(os.environ.get("SPW_BIN", ""), "spillway-server"), TIER_FLAGS)
	try:
		r = redis.Redis(port=srv.port)
		model = []
		build(r, "T", model, 20000)
		# push other data through so that the list's nodes go to the device
		pipe = r.pipeline(transaction=False)
		for i in range(30000):
			pipe.set("pad:%d" % i, "z" * 100)
			if i % 1000 == 999:
				pipe.execute()
		pipe.execute()
		pend = st(r, "tier_pending_reads")
		for i in [5000, 9000, 12345]:
			before = st(r, "coll_list_node_reads")
			check(r.lindex("T", i) == b(model[i]), "cold LINDEX %d" % i)
			moved = st(r, "coll_list_node_reads") - before
			check(moved == 1, "a cold LINDEX read %d node parts, expected 1" % moved)
		check(st(r, "tier_pending_reads") > pend, "the cold LINDEX did not read the device")
		before = st(r, "coll_list_node_reads")
		check(r.lrange("T", 3000, 3299) == [b(x) for x in model[3000:3300]], "cold LRANGE")
		check(st(r, "coll_list_node_reads") > before, "cold LRANGE read no node")
		check_all(r, "T", model, "tier")
	finally:
		srv.stop()


def main():
	random.seed(13)
	srv = spillway_start(os.path.join(os.environ.get("SPW_BIN", ""), "spillway-server"), FLAGS)
	try:
		r = redis.Redis(port=srv.port)
		model = phase_build(r)
		phase_point_writes(r, model)
		phase_whole(r, model)
		phase_keys(r, model)
		phase_concurrent(r, srv.port)
	finally:
		srv.stop()
	phase_tier()
	print("coll_list_large: OK")


if __name__ == "__main__":
	main()
