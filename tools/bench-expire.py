#!/usr/bin/python3
"""bench-expire.py - the active expire cycle's CPU under a TTL churn load, Spillway against
redis-server, with the same client load side by side (tools/README.md).

Per scenario and server: start it on a free loopback port, write PERM keys without a TTL, then for
DURATION seconds SETs with TTLs of 1-5 s (SET ttl:<random of KEYS> v PX ttl) at RATE per second in
pipelined batches of 200 (the same seeded sequence for both servers), then wait (60 s at most)
until DBSIZE is PERM again, reading nothing else. Reported from the server's own INFO:
expire_cycle_cpu_milliseconds (Spillway: the expirer thread's CPU time; Redis: the time its cycles
took, on its one thread), expired_keys, expired_stale_perc, and from /proc the process's whole CPU
time over the run. Needs Debian's python3-redis.

Environment: SPW_BIN (build/bin/spillway-server), SPW_FLAGS (extra flags), DURATION (30), RATE
(20000), KEYS (100000), SCENARIOS ("0 200000": the PERM counts to run), ROUNDS (3: which server
goes first alternates; the table shows medians, the ratio rows the median of each round's ratio).
"""
import os
import random
import shutil
import statistics
import socket
import subprocess
import sys
import tempfile
import time

import redis

SPW_BIN = os.environ.get("SPW_BIN", "build/bin/spillway-server")
SPW_FLAGS = os.environ.get("SPW_FLAGS", "").split()
DURATION = float(os.environ.get("DURATION", "30"))
RATE = int(os.environ.get("RATE", "20000"))
KEYS = int(os.environ.get("KEYS", "100000"))
SCENARIOS = [int(x) for x in os.environ.get("SCENARIOS", "0 200000").split()]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
BATCH = 200
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def start(kind, tmp):
    port = free_port()
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", tmp]
    else:
        argv = [SPW_BIN, "--port", str(port), "--bind", "127.0.0.1", "--threads", "1", "--save", "",
                "--checkpoint-interval", "0", "--dir", tmp, "--logdir", tmp] + SPW_FLAGS
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(200):
        try:
            if r.ping():
                return proc, r
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f"{kind} did not start")


def stats(r):
    s = r.info("stats")
    return s["expire_cycle_cpu_milliseconds"], s["expired_keys"], s["expired_stale_perc"]


def run(kind, perm):
    tmp = tempfile.mkdtemp(prefix="spw-bench-expire-")
    proc, r = start(kind, tmp)
    try:
        p = r.pipeline(transaction=False)
        for i in range(perm):
            p.set(f"perm:{i}", "p")
            if i % 1000 == 999:
                p.execute()
        p.execute()
        rng = random.Random(42)
        cpu0, t0 = proc_cpu_s(proc.pid), time.time()
        batches = 0
        while time.time() < t0 + DURATION:
            for _ in range(BATCH):
                p.set(f"ttl:{rng.randrange(KEYS)}", "v" * 16, px=rng.randint(1000, 5000))
            p.execute()
            batches += 1
            ahead = t0 + batches * BATCH / RATE - time.time()
            if ahead > 0:
                time.sleep(ahead)
        written = time.time()
        drain = None
        while time.time() < written + 5 + 60:
            if r.dbsize() == perm:
                drain = time.time() - written
                break
            time.sleep(0.05)
        cpu = proc_cpu_s(proc.pid) - cpu0
        ms, expired, stale = stats(r)
        return {"sets": batches * BATCH, "cycle_ms": ms, "expired": expired, "stale": stale,
                "proc_cpu_s": cpu, "drain_s": drain, "secs": time.time() - t0}
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def median_row(runs):
    row = {}
    for k in ("sets", "cycle_ms", "expired", "stale", "proc_cpu_s"):
        row[k] = statistics.median(x[k] for x in runs)
    drains = [x["drain_s"] for x in runs if x["drain_s"] is not None]
    row["drain_s"] = statistics.median(drains) if len(drains) == len(runs) else None
    return row


def main():
    runs = {}   # (perm, kind) -> [result per round]
    for rnd in range(ROUNDS):
        for perm in SCENARIOS:
            order = ("redis", "spillway") if rnd % 2 == 0 else ("spillway", "redis")
            for kind in order:
                res = run(kind, perm)
                print(f"round {rnd + 1} {kind} perm={perm}: {res}", flush=True)
                runs.setdefault((perm, kind), []).append(res)
    print()
    print(f"medians of {ROUNDS} rounds")
    print("| keys without TTL | server | SETs with TTL | expire_cycle_cpu_milliseconds | expired_keys "
          "| expired_stale_perc | process CPU s | DBSIZE drained after writes (s) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for perm in SCENARIOS:
        for kind in ("redis", "spillway"):
            x = median_row(runs[(perm, kind)])
            drain = f"{x['drain_s']:.1f}" if x["drain_s"] is not None else "not in 65 s"
            print(f"| {perm} | {kind} | {x['sets']:.0f} | {x['cycle_ms']:.0f} | {x['expired']:.0f} "
                  f"| {x['stale']:.2f} | {x['proc_cpu_s']:.2f} | {drain} |")
    for perm in SCENARIOS:
        red, spw = runs[(perm, "redis")], runs[(perm, "spillway")]
        cyc = statistics.median(s["cycle_ms"] / r["cycle_ms"] for r, s in zip(red, spw) if r["cycle_ms"])
        cpu = statistics.median(s["proc_cpu_s"] / r["proc_cpu_s"] for r, s in zip(red, spw))
        print(f"| {perm} | Spillway / Redis | | {cyc:.2f} | | | {cpu:.2f} | |")


if __name__ == "__main__":
    main()
