#!/usr/bin/env bash
# callgrind-coll-large.sh - instructions per request of spillway-server (--threads 1) on one large
# hash and one large set (docs/BENCHMARKS.md appendix Q), under valgrind --tool=callgrind: a fixed,
# repeatable workload, so that a change's cost shows without the machine's noise.
#
# Loads hash "bh" of FIELDS fields f:%012d and set "bs" of FIELDS members m:%012d (one member per
# command) with instrumentation off, then for each phase turns it on, runs redis-benchmark
# (-n N -c 50 -P 16) and dumps the counters; prints "phase|requests|instructions|per request".
#
#   FIELDS=30000 N=20000 SPW_BIN=build/bin/spillway-server tools/callgrind-coll-large.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh
FIELDS=${FIELDS:-30000}
N=${N:-20000}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
work=$(mktemp -d "${TMPDIR:-/tmp}/spw-cgcoll.XXXXXX")
port=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/cg.out" \
	"$SPW_BIN" --bind 127.0.0.1 --port "$port" --threads 1 --dir "$work" --logdir "$work" --save '' \
	>"$work/s.log" 2>&1 &
vpid=$!
trap 'kill "$vpid" 2>/dev/null; wait "$vpid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
for _ in $(seq 600); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.2; done
awk -v n="$FIELDS" 'BEGIN {
	for (i = 0; i < n; i++) {
		printf "*4\r\n$4\r\nHSET\r\n$2\r\nbh\r\n$14\r\nf:%012d\r\n$5\r\nv%04d\r\n", i, i % 10000
		printf "*3\r\n$4\r\nSADD\r\n$2\r\nbs\r\n$14\r\nm:%012d\r\n", i
	}
}' | redis-cli -p "$port" --pipe >/dev/null
phase() {
	local name=$1
	shift
	callgrind_control -i on "$vpid" >/dev/null
	redis-benchmark -p "$port" -n "$N" -c 50 -P 16 -q "$@" >/dev/null
	callgrind_control -i off "$vpid" >/dev/null
	local before f ir
	before=$(ls "$work" | grep -c '^cg.out\.' || true)
	callgrind_control --dump="$name" "$vpid" >/dev/null
	# the dump is written when the server next runs: wait for the new file
	for _ in $(seq 100); do
		[ "$(ls "$work" | grep -c '^cg.out\.' || true)" -gt "$before" ] && break
		redis-cli -p "$port" PING >/dev/null 2>&1 || true
		sleep 0.1
	done
	sleep 0.5
	f=$(ls -t "$work"/cg.out.* | head -1)
	ir=$(awk '/^totals:/ { print $2; exit }' "$f")
	echo "$name|$N|$ir|$((ir / N))"
}
phase hset_new -r 100000000 HSET bh n:__rand_int__ v
phase hset_existing -r "$FIELDS" HSET bh f:__rand_int__ v
phase hget -r "$FIELDS" HGET bh f:__rand_int__
phase sadd_new -r 100000000 SADD bs n:__rand_int__
phase sismember -r "$FIELDS" SISMEMBER bs m:__rand_int__
phase srem -r "$FIELDS" SREM bs m:__rand_int__
redis-cli -p "$port" INFO stats | grep -E '^coll_' | tr -d '\r' | tr '\n' ' '
echo
