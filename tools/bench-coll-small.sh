#!/usr/bin/env bash
# bench-coll-small.sh - small collections (many keys of one member each: sessions, tags, scores)
# on redis-server and spillway-server --threads 1 side by side, in one run: for each command,
#     redis-benchmark -n N -r KEYS -c 50 -P 16 -q CMD          (__rand_int__ picks the key)
# against both (the order alternating by ORDER), with each server's CPU time over the run (utime +
# stime from /proc/PID/stat). Prints "server|command|requests per second|CPU s per 1M requests".
#   N=400000 KEYS=100000 ORDER="s r" tools/bench-coll-small.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

N=${N:-400000}
KEYS=${KEYS:-100000}
ORDER=${ORDER:-"r s"}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
work=$(mktemp -d "${TMPDIR:-/tmp}/spw-collsmall.XXXXXX")
rport=$(free_port)
sport=$(free_port)
mkdir -p "$work/r" "$work/s"
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work/r" --daemonize no \
	>"$work/r.log" 2>&1 &
rpid=$!
"$SPW_BIN" --bind 127.0.0.1 --port "$sport" --threads 1 --dir "$work/s" --logdir "$work/s" --save '' \
	--checkpoint-interval 0 >"$work/s.log" 2>&1 &
spid=$!
trap 'kill $rpid $spid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for port in "$rport" "$sport"; do
	for _ in $(seq 1 200); do
		[ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break
		sleep 0.05
	done
done
tck=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
cmds=("HSET h:__rand_int__ f v" "HGET h:__rand_int__ f" "SADD s:__rand_int__ m"
      "SISMEMBER s:__rand_int__ m" "ZADD z:__rand_int__ 1 m" "ZSCORE z:__rand_int__ m"
      "RPUSH l:__rand_int__ x" "LPOP l:__rand_int__")
for cmd in "${cmds[@]}"; do
	for srv in $ORDER; do
		if [ "$srv" = r ]; then port=$rport pid=$rpid; else port=$sport pid=$spid; fi
		b=$(ticks "$pid")
		# shellcheck disable=SC2086
		rps=$(redis-benchmark -p "$port" -n "$N" -r "$KEYS" -c 50 -P 16 -q $cmd 2>&1 | tr '\r' '\n' |
			awk '/requests per second/ { for (i = 1; i <= NF; i++) if ($i == "requests") v = $(i - 1) } END { print v }')
		a=$(ticks "$pid")
		cpu=$(awk -v d=$((a - b)) -v t="$tck" -v n="$N" 'BEGIN { printf "%.2f", d / t / (n / 1e6) }')
		echo "$([ "$srv" = r ] && echo redis || echo spillway)|$cmd|$rps|$cpu"
	done
done
