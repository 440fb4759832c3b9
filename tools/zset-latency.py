#!/usr/bin/python3
"""zset-latency.py - per-op latency of ZSCORE and ZRANGE i i+9 on one big sorted set (issue 13):
redis-server in memory against spillway-server in memory (hot) and with a storage tier (cold: the
set is loaded within a --memory window of TIER_MEMORY, then PAD_MB MiB of strings push its parts
onto the device). docs/BENCHMARKS.md's appendix "Large sorted sets".

Each server gets the same set of M members (ZADD in pipelined batches of 1000 pairs, members
"member:<i>", random integer scores), then Q ZSCOREs of random members and Q ZRANGE i i+9 of random
ranks, one at a time from one client (each a round trip), and the mean and median latency per op
are printed, with the load time and spillway's INFO counters (node and bucket reads per op).

Environment: M=1000000 members, Q=2000 ops, SPW_BIN=build/bin/spillway-server, TIER_MEMORY=2g, PAD_MB=3000,
RUNS=redis,memory,tier (which servers).
Run from the repository root: /usr/bin/python3 tools/zset-latency.py
"""
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import redis

M = int(os.environ.get("M", "1000000"))
Q = int(os.environ.get("Q", "2000"))
SPW = os.environ.get("SPW_BIN", "build/bin/spillway-server")
TIER_MEM = os.environ.get("TIER_MEMORY", "2g")   # loads in memory; padding then pushes the set out


def free_port():
	"""A random port in 20000-60000 that nothing listens on now (not bind(0): the kernel hands out
	neighbouring ephemeral ports, which other test servers on this machine pick too)."""
	while True:
		p = random.SystemRandom().randint(20000, 60000)
		s = socket.socket()
		try:
			s.bind(("127.0.0.1", p))
			return p
		except OSError:
			continue
		finally:
			s.close()


def start(argv_fn):
	port, d = free_port(), tempfile.mkdtemp(prefix="spw-zlat-")
	log = open(os.path.join(d, "server.out"), "wb")
	proc = subprocess.Popen(argv_fn(port, d), stdout=log, stderr=log)
	r = redis.Redis(port=port, socket_timeout=600)
	for _ in range(300):
		try:
			r.ping()
			break
		except redis.ConnectionError:
			time.sleep(0.05)
	return proc, r, d


def load(r, rng):
	t = time.monotonic()
	p = r.pipeline(transaction=False)
	for i in range(0, M, 1000):
		p.zadd("big", {b"member:%d" % j: rng.randrange(1 << 30) for j in range(i, min(M, i + 1000))})
		if i % 20000 == 19000:
			p.execute()
	p.execute()
	return time.monotonic() - t


def timed(fn, n):
	out = []
	for _ in range(n):
		t = time.perf_counter()
		fn()
		out.append((time.perf_counter() - t) * 1e6)
	return statistics.mean(out), statistics.median(out)


def run(name, argv_fn, spw):
	proc, r, d = start(argv_fn)
	try:
		lt = load(r, random.Random(1))
		if spw and "tier" in name:   # push the set's parts out of memory
			pad = int(os.environ.get("PAD_MB", "3000"))   # more than TIER_MEMORY of strings
			p = r.pipeline(transaction=False)
			for j in range(pad):
				p.mset({"pad:%d:%d" % (j, i): "p" * 4000 for i in range(256)})
				if j % 16 == 15:
					p.execute()
			p.execute()
		n = r.zcard("big")
		rng = random.Random(2)
		before = r.info("stats") if spw else {}
		zs = timed(lambda: r.zscore("big", b"member:%d" % rng.randrange(M)), Q)
		mid = r.info("stats") if spw else {}
		zr = timed(lambda: r.zrange("big", *(lambda i: (i, i + 9))(rng.randrange(n - 10))), Q)
		after = r.info("stats") if spw else {}
		extra = ""
		if spw:
			extra = " bucket reads/ZSCORE %.2f, node reads/ZRANGE %.2f" % (
				(mid["coll_part_reads"] - before["coll_part_reads"]) / Q,
				(after["coll_zset_node_reads"] - mid["coll_zset_node_reads"]) / Q)
		print("%-22s load %6.1f s  ZSCORE mean %7.1f us median %7.1f us  ZRANGE i i+9 mean %7.1f us "
		      "median %7.1f us%s" % (name, lt, zs[0], zs[1], zr[0], zr[1], extra), flush=True)
	finally:
		proc.terminate()
		proc.wait()
		if proc.returncode in (0, -15):
			shutil.rmtree(d, ignore_errors=True)
		else:
			print("%s exited with %s: its folder is kept in %s" % (name, proc.returncode, d), flush=True)


def main():
	print("M=%d Q=%d" % (M, Q), flush=True)
	runs = os.environ.get("RUNS", "redis,memory,tier").split(",")
	if "redis" in runs:
		run("redis-server", lambda p, d: ["redis-server", "--port", str(p), "--save", "", "--appendonly", "no",
		                                  "--dir", d], False)
	base = lambda p, d: [SPW, "--bind", "127.0.0.1", "--port", str(p), "--dir", d, "--logdir", d,
	                     "--threads", "1", "--save", "", "--checkpoint-interval", "0"]
	if "memory" in runs:
		run("spillway (memory)", lambda p, d: base(p, d) + ["--memory", "8g"], True)
	if "tier" in runs:
		run("spillway (tier, cold)", lambda p, d: base(p, d) + ["--storage-tier", "--device-type", "posix",
		                                                        "--memory", TIER_MEM, "--page", "1m"], True)


if __name__ == "__main__":
	sys.exit(main())
