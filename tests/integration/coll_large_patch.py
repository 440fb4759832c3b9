#!/usr/bin/python3
"""coll_large_patch.py - the one-bucket paths of large hashes and sets (server/coll_large.c note 10,
cmd_set.c note 7) on a real spillway-server with --coll-record-max 256, proved from INFO counters:

 1. A large hash: every HSET of one pair (new field, existing field with another value) and
    HINCRBY of one field patches its one bucket where it was read: coll_bucket_patches moves by
    exactly one per write (HDEL too, unless it empties its bucket, which deletes the bucket), coll_bucket_views by at least one; an HSET of the value the field has
    writes nothing (no patch, no group write, no upsert: coll_group_writes stays). HGET reads its
    bucket as the view (coll_bucket_views by exactly one each) and never assembles.
 2. A large set: SADD of one new member patches (exactly one each), SREM of one member and SPOP's
    removal too unless they empty their bucket; SADD of a
    member that is there and SREM of one that is not patch nothing; several members (with repeats
    and members of the same bucket: buckets_unique) build as before and give the model's result.
 3. A small listpack ("hashtable") set: SADD / SREM of one member are planned edits too
    (coll_patches_in_place + coll_patches_copied move by one each).
Everything checked against a Python model at the end (HGETALL, SMEMBERS).

Environment: SPW_BIN (the folder of spillway-server). Exit 77 (SKIP) without python3-redis.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from diff_random import spillway_start  # noqa: E402

from spwcheck import redis, fail, check, ctr  # noqa: E402

FLAGS = ["--threads", "1", "--memory", "64m", "--page", "1m", "--index", "4m", "--coll-record-max", "256"]
N = 4000


def moved(r, name, before, want, what, exact=True):
	now = ctr(r, name)
	ok = now - before == want if exact else now - before >= want
	check(ok, "%s: %s moved by %d, %s%d expected" % (what, name, now - before, "" if exact else ">= ", want))
	return now


def hash_phase(r):
	model = {}
	pipe = r.pipeline(transaction=False)
	for i in range(N):
		model["f:%d" % i] = "v%d" % i
		pipe.hset("h", "f:%d" % i, "v%d" % i)
	pipe.execute()
	check(r.object("encoding", "h") == b"hashtable" and ctr(r, "coll_large_conversions") >= 1, "h is not large")
	p0, v0, w0 = ctr(r, "coll_bucket_patches"), ctr(r, "coll_bucket_views"), ctr(r, "coll_whole_reads")
	for i in range(200):
		f = "f:%d" % random.randrange(N)
		v = "w%d" % i
		check(r.hset("h", f, v) == 0, "HSET existing %s" % f)
		model[f] = v
	for i in range(200):
		check(r.hset("h", "n:%d" % i, "x") == 1, "HSET new")
		model["n:%d" % i] = "x"
	for i in range(50):
		check(r.hincrby("h", "c:%d" % i, 3) == 3, "HINCRBY")
		model["c:%d" % i] = "3"
	p1 = moved(r, "coll_bucket_patches", p0, 450, "450 one-field writes")
	v1 = moved(r, "coll_bucket_views", v0, 450, "450 one-field writes", exact=False)
	for i in range(50):
		check(r.hdel("h", "f:%d" % i) == 1, "HDEL")
		del model["f:%d" % i]
	# an HDEL that empties its bucket deletes it (not a patch): buckets are random by the cid
	now = ctr(r, "coll_bucket_patches")
	check(25 <= now - p1 <= 50, "50 HDELs: %d patched" % (now - p1))
	p1 = now
	g1 = ctr(r, "coll_group_writes")
	f = "n:7"
	for _ in range(20):
		check(r.hset("h", f, "x") == 0, "HSET of the same value")
	moved(r, "coll_bucket_patches", p1, 0, "HSET of the value the field has")
	moved(r, "coll_group_writes", g1, 0, "HSET of the value the field has")
	v1 = ctr(r, "coll_bucket_views")
	for i in range(100):
		f = "f:%d" % random.randrange(50, N)
		check(r.hget("h", f) == model[f].encode(), "HGET %s" % f)
	moved(r, "coll_bucket_views", v1, 100, "100 HGETs")
	# several fields, with repeats (the last value wins, as Redis): not the one-bucket path
	p2 = ctr(r, "coll_bucket_patches")
	fields = ["f:%d" % random.randrange(50, N) for _ in range(30)]
	args = []
	for j, f in enumerate(fields + fields[:5]):
		args += [f, "m%d" % j]
		model[f] = "m%d" % j
	r.execute_command("HSET", "h", *args)
	moved(r, "coll_bucket_patches", p2, 0, "HSET of 35 pairs")
	moved(r, "coll_whole_reads", w0, 0, "point writes and reads")
	got = {k.decode(): v.decode() for k, v in r.hgetall("h").items()}
	check(got == model, "HGETALL differs from the model (%d against %d fields)" % (len(got), len(model)))


def set_phase(r):
	model = set()
	pipe = r.pipeline(transaction=False)
	for i in range(N):
		model.add("m:%d" % i)
		pipe.sadd("s", "m:%d" % i)
	pipe.execute()
	check(r.object("encoding", "s") == b"hashtable", "s is not large")
	p0 = ctr(r, "coll_bucket_patches")
	for i in range(200):
		check(r.sadd("s", "n:%d" % i) == 1, "SADD new")
		model.add("n:%d" % i)
	p0 = moved(r, "coll_bucket_patches", p0, 200, "SADD of one new member")
	for i in range(100):
		check(r.srem("s", "m:%d" % i) == 1, "SREM")
		model.discard("m:%d" % i)
	for i in range(50):
		m = r.spop("s").decode()
		check(m in model, "SPOP %s: not a member" % m)
		model.discard(m)
	# a removal of its bucket's last member deletes the bucket (not a patch)
	p1 = ctr(r, "coll_bucket_patches")
	check(75 <= p1 - p0 <= 150, "SREM, SPOP of one member: %d patched of 150" % (p1 - p0))
	for i, m in enumerate(sorted(model)[:50]):
		check(r.sadd("s", m) == 0, "SADD of a member")
		check(r.srem("s", "nosuch:%d" % i) == 0, "SREM of no member")
	moved(r, "coll_bucket_patches", p1, 0, "SADD of members, SREM of no members")
	ms = ["k:%d" % i for i in range(40)] + ["k:3", "n:5", "k:7"]
	check(r.sadd("s", *ms) == 40, "SADD of 43 members with repeats")
	model.update(ms)
	check(r.srem("s", "k:1", "k:1", "k:2", "nosuch") == 2, "SREM of several")
	model.difference_update(["k:1", "k:2"])
	moved(r, "coll_bucket_patches", p1, 0, "several members")
	check(r.scard("s") == len(model), "SCARD")
	check({m.decode() for m in r.smembers("s")} == model, "SMEMBERS differs from the model")


def small_set_phase(r):
	r.sadd("ss", "a", "b", "c")
	check(r.object("encoding", "ss") == b"hashtable", "ss encoding %r" % r.object("encoding", "ss"))
	c0 = ctr(r, "coll_patches_in_place") + ctr(r, "coll_patches_copied")
	check(r.sadd("ss", "d") == 1 and r.sadd("ss", "42") == 1 and r.srem("ss", "b") == 1, "small SADD/SREM")
	check(r.sadd("ss", "a") == 0 and r.srem("ss", "zz") == 0, "small SADD/SREM no-ops")
	c1 = ctr(r, "coll_patches_in_place") + ctr(r, "coll_patches_copied")
	check(c1 - c0 == 3, "small set: %d patched writes, 3 expected" % (c1 - c0))
	check(sorted(r.smembers("ss")) == [b"42", b"a", b"c", b"d"], "small set members %r" % r.smembers("ss"))
	check(r.sismember("ss", "42") == 1, "SISMEMBER 42")
	r.srem("ss", "a", "c", "d")
	check(r.srem("ss", "42") == 1 and r.exists("ss") == 0, "a set emptied is deleted")


def main():
	exe = os.path.join(os.environ.get("SPW_BIN", "build/bin"), "spillway-server")
	if not os.access(exe, os.X_OK):
		fail("%s is missing (SPW_BIN)" % exe)
	random.seed(10)
	srv = spillway_start(exe, FLAGS)
	try:
		r = redis.Redis(host="127.0.0.1", port=srv.port)
		r.config_set("hash-max-listpack-entries", "8")
		hash_phase(r)
		set_phase(r)
		small_set_phase(r)
		r.close()
	finally:
		rc = srv.stop()
	check(rc == 0, "spillway-server exited with %s" % rc)
	print("coll_large_patch: PASS", flush=True)


if __name__ == "__main__":
	main()
