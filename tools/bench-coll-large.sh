#!/usr/bin/env bash
# bench-coll-large.sh - one large hash and one large set (docs/ARCHITECTURE.md "Large collections")
# on redis-server and spillway-server --threads 1 side by side, in one run.
#
# Both servers get the same hash "bh" of FIELDS fields f:%012d (the names redis-benchmark's
# __rand_int__ makes with -r FIELDS) and set "bs" of FIELDS members m:%012d, loaded by one pipeline
# (HSET/SADD of LOAD_BATCH at a time through redis-cli --pipe; the load time of each is printed;
# LOAD_BATCH=1 by default: spillway-server's multi-member writes to a large collection cost more per
# member than single ones at this commit, 21 s against 2.8 s for 50,000 fields in batches of 1,000
# and of 1). Then,
# for each command at -P 16 (N16 requests) and -P 1 (N1 requests), 50 clients:
#     HSET bh n:__rand_int__ v   (-r 100000000: new fields)    HSET bh f:__rand_int__ v  (existing)
#     HGET bh f:__rand_int__     SADD bs n:__rand_int__ (new)   SISMEMBER bs m:__rand_int__
# against each server in turn (ORDER), with each server's CPU time over the run (utime + stime from
# /proc/PID/stat, as tools/bench-coll-small.sh). Prints one line per command and pipeline:
#     command|P|spillway req/s|redis req/s|throughput ratio|spillway CPU s/1M|redis CPU s/1M|CPU ratio
# and, at the end, INFO's coll_* counters of spillway-server (the runs took the large layout).
#
#   FIELDS=1000000 N16=100000 N1=20000 LOAD_BATCH=1 ORDER="r s" tools/bench-coll-large.sh
#   SPW_BIN=build/bin/spillway-server SPW_FLAGS="--coll-record-max 4096"
#
# CPU figures have the kernel's tick resolution (CLK_TCK, usually 10 ms): a run of 2-3 s gives about
# +-1%. The defaults keep each run to a few seconds on a 2-vCPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

FIELDS=${FIELDS:-1000000}
N16=${N16:-100000}
N1=${N1:-20000}
LOAD_BATCH=${LOAD_BATCH:-1}
ORDER=${ORDER:-"r s"}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
SPW_FLAGS=${SPW_FLAGS:-}
for tool in redis-server redis-benchmark redis-cli; do
	command -v "$tool" >/dev/null || { echo "bench-coll-large.sh: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done
[ -x "$SPW_BIN" ] || { echo "bench-coll-large.sh: $SPW_BIN not found: build it first" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/spw-colllarge.XXXXXX")
rport=$(free_port)
sport=$(free_port)
while [ "$sport" = "$rport" ]; do sport=$(free_port); done   # free_port probes: two calls may agree
mkdir -p "$work/r" "$work/s"
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/r" --daemonize no \
	>"$work/r.log" 2>&1 &
rpid=$!
# shellcheck disable=SC2086
"$SPW_BIN" --bind 127.0.0.1 --port "$sport" --threads 1 --dir "$work/s" --logdir "$work/s" --save '' \
	--checkpoint-interval 0 --memory 2g --index 64m $SPW_FLAGS >"$work/s.log" 2>&1 &
spid=$!
trap 'kill $rpid $spid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
wait_pong "$rport" "$rpid" || { cat "$work/r.log"; exit 1; }
wait_pong "$sport" "$spid" || { cat "$work/s.log"; exit 1; }
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
now() { date +%s.%N; }
# ratio A B [FMT]: A / B, "-" when B is 0.
ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2fx}" 'BEGIN { if (b > 0) printf f, a / b; else printf "-" }'; }

# The loader's protocol: HSET bh f:... v ... and SADD bs m:... ..., LOAD_BATCH fields or members each.
awk -v n="$FIELDS" -v b="$LOAD_BATCH" 'BEGIN {
	for (i = 0; i < n; i += b) {
		k = (n - i < b) ? n - i : b
		printf "*%d\r\n$4\r\nHSET\r\n$2\r\nbh\r\n", 2 + 2 * k
		for (j = i; j < i + k; j++) printf "$14\r\nf:%012d\r\n$5\r\nv%04d\r\n", j, j % 10000
		printf "*%d\r\n$4\r\nSADD\r\n$2\r\nbs\r\n", 2 + k
		for (j = i; j < i + k; j++) printf "$14\r\nm:%012d\r\n", j
	}
}' >"$work/load.resp"
for srv in $ORDER; do
	if [ "$srv" = r ]; then port=$rport pid=$rpid; else port=$sport pid=$spid; fi
	t0=$(now) b=$(ticks "$pid")
	redis-cli -h 127.0.0.1 -p "$port" --pipe <"$work/load.resp" >"$work/load.$srv" 2>&1 ||
		{ cat "$work/load.$srv"; exit 1; }
	grep -q "errors: 0," "$work/load.$srv" || { cat "$work/load.$srv"; exit 1; }
	a=$(ticks "$pid") t1=$(now)
	name=$([ "$srv" = r ] && echo redis || echo spillway)
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f s", b - a }')
	echo "load|$name|$FIELDS fields + $FIELDS members|$secs|CPU $(ratio $((a - b)) "$tck" "%.2f s")"
	[ "$(redis-cli -h 127.0.0.1 -p "$port" HLEN bh)" = "$FIELDS" ] || { echo "HLEN bh is not $FIELDS" >&2; exit 1; }
	[ "$(redis-cli -h 127.0.0.1 -p "$port" SCARD bs)" = "$FIELDS" ] || { echo "SCARD bs is not $FIELDS" >&2; exit 1; }
done

# run SERVER PORT PID N P RANGE CMD...: "req/s cpu-s-per-1M" of one redis-benchmark run.
run() {
	local pid=$3 n=$4 p=$5 r=$6 b a rps
	b=$(ticks "$pid")
	rps=$(redis-benchmark -h 127.0.0.1 -p "$2" -n "$n" -r "$r" -c 50 -P "$p" -q "${@:7}" 2>&1 | tr '\r' '\n' |
		awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i == "requests") v = $(i - 1) } END { print v }')
	a=$(ticks "$pid")
	echo "$rps $(awk -v d=$((a - b)) -v t="$tck" -v n="$n" 'BEGIN { printf "%.2f", d / t / (n / 1e6) }')"
}

echo "command|P|spillway req/s|redis req/s|throughput ratio|spillway CPU s/1M|redis CPU s/1M|CPU ratio"
cmds=("HSET bh n:__rand_int__ v|100000000" "HSET bh f:__rand_int__ v|$FIELDS" "HGET bh f:__rand_int__|$FIELDS"
      "SADD bs n:__rand_int__|100000000" "SISMEMBER bs m:__rand_int__|$FIELDS")
for p in 16 1; do
	n=$([ "$p" = 16 ] && echo "$N16" || echo "$N1")
	for entry in "${cmds[@]}"; do
		cmd=${entry%|*} range=${entry#*|}
		for srv in $ORDER; do
			# shellcheck disable=SC2086
			if [ "$srv" = r ]; then read -r rr rc < <(run r "$rport" "$rpid" "$n" "$p" "$range" $cmd)
			else read -r sr sc < <(run s "$sport" "$spid" "$n" "$p" "$range" $cmd); fi
		done
		echo "$cmd|$p|$sr|$rr|$(ratio "$sr" "$rr" %.3fx)|$sc|$rc|$(ratio "$sc" "$rc")"
	done
done
redis-cli -h 127.0.0.1 -p "$sport" INFO stats | tr -d '\r' | grep '^coll_' | tr '\n' ' '
echo
