#!/usr/bin/env bash
# bench-redis.sh - redis-server and spillway-server side by side on this machine, in one run.
#
# Both servers run at once on free loopback ports: redis-server --save '' --appendonly no, and
# spillway-server --threads 1 (one worker, as Redis has one main thread). For each round, in
# alternating order (A,B then B,A, so neither always runs on a warmer machine), each server gets
#     redis-benchmark -t TEST -n N -r N -c 50 -P 16 -q        for TEST in $TESTS (default set,get)
# and we record the throughput redis-benchmark reports and the server's CPU time over that run
# (utime+stime from /proc/PID/stat, divided by CLK_TCK), as CPU seconds per million requests.
# The table printed at the end holds the medians over the rounds, and the Spillway/Redis ratios.
#
# Environment:
#   N=1000000        requests per test (and the -r key range); N=100000 for a quick run
#   ROUNDS=3         rounds
#   CLIENTS=50 PIPELINE=16
#   SPW_BIN=build/bin/spillway-server   the binary (scripts/run.sh builds it)
#   SPW_FLAGS=""     extra spillway-server flags
#   B=spillway       the second server; B=redis runs redis against redis (a check of this script)
#   TESTS=set,get    redis-benchmark tests, in order (issue 13's collections: TESTS=lpush,rpush,lpop,
#                    rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,lrange_600; a pop runs on what the
#                    push before it left)
#
# CPU figures have the kernel's tick resolution (CLK_TCK, usually 10 ms): use N >= 1000000 for them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
SPW_FLAGS=${SPW_FLAGS:-}
B=${B:-spillway}
IFS=, read -r -a TESTS <<<"${TESTS:-set,get}"
TCK=$(getconf CLK_TCK)

for tool in redis-server redis-benchmark redis-cli; do
	command -v "$tool" >/dev/null || { echo "bench-redis.sh: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done
if [ "$B" = spillway ] && [ ! -x "$SPW_BIN" ]; then
	echo "bench-redis.sh: $SPW_BIN not found: build it first (cmake --build build --target spillway-server)" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/spw-bench.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# A loopback port nothing listens on right now (another process could still take it: the start is
# checked with PING below).

# start NAME KIND: start a server of KIND (redis|spillway) in the background; sets PORT_<NAME>, PID_<NAME>.
start() {
	local name=$1 kind=$2 port dir pid
	port=$(free_port)
	dir="$work/$name"
	mkdir -p "$dir"
	if [ "$kind" = redis ]; then
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
			--dir "$dir" --logfile "$dir/server.log" &
	else
		# shellcheck disable=SC2086
		"$SPW_BIN" --bind 127.0.0.1 --port "$port" --threads 1 --dir "$dir" --logdir "$dir" \
			--save '' --checkpoint-interval 0 $SPW_FLAGS >"$dir/server.log" 2>&1 &
	fi
	pid=$!
	pids+=("$pid")
	for _ in $(seq 1 200); do
		if [ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" = PONG ]; then
			printf -v "PORT_$name" '%s' "$port"
			printf -v "PID_$name" '%s' "$pid"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "bench-redis.sh: $kind did not start on port $port; its log:" >&2
	cat "$dir/server.log" >&2 || true
	exit 1
}

# CPU ticks (utime + stime) of a process. Fields counted after the ")" that ends the command name.
cpu_ticks() {
	local stat rest
	stat=$(cat "/proc/$1/stat")
	rest=${stat##*) }
	# shellcheck disable=SC2086
	set -- $rest
	echo $(( ${12} + ${13} ))
}

# bench NAME TEST ROUND: one redis-benchmark run; appends "name test rps cpu_s_per_1M" to results.
bench() {
	local name=$1 test=$2 round=$3 port pid before after out rps cpu
	port=PORT_$name
	pid=PID_$name
	port=${!port}
	pid=${!pid}
	before=$(cpu_ticks "$pid")
	out=$(redis-benchmark -h 127.0.0.1 -p "$port" -t "$test" -n "$N" -r "$N" -c "$CLIENTS" -P "$PIPELINE" -q 2>&1 </dev/null)
	after=$(cpu_ticks "$pid")
	# The result is the last '\r'-separated segment: "SET: 123456.78 requests per second, p50=..."
	# "LRANGE_100 (first 100 elements): 12345.67 requests per second": the number before "requests".
	rps=$(printf '%s\n' "$out" | tr '\r' '\n' | awk -v t="${test^^}" 'index($0, t) == 1 {
		for (i = 2; i <= NF; i++) if ($i == "requests" && $(i + 1) == "per") v = $(i - 1) } END { print v }')
	if [ -z "$rps" ] || printf '%s' "$out" | grep -qE 'ERR|rror|WARNING'; then
		echo "bench-redis.sh: redis-benchmark against $name ($test) failed:" >&2
		printf '%s\n' "$out" | tr '\r' '\n' | tail -5 >&2
		exit 1
	fi
	cpu=$(awk -v d=$((after - before)) -v tck="$TCK" -v n="$N" 'BEGIN { printf "%.3f", d / tck / (n / 1e6) }')
	echo "$name $test $rps $cpu" >>"$work/results"
	printf '  round %d  %-10s %-4s %12s rps  %8s CPU s/1M req\n' "$round" "${LABEL[$name]}" "$test" "$rps" "$cpu"
}

start A redis
if [ "$B" = redis ]; then
	start B redis
	label_b="redis (B)"
else
	start B spillway
	label_b=spillway
fi
label_a=redis
declare -A LABEL=([A]=$label_a [B]=$label_b)
: >"$work/results"

echo "bench-redis.sh: N=$N ROUNDS=$ROUNDS clients=$CLIENTS pipeline=$PIPELINE, redis on port $PORT_A, $label_b on port $PORT_B"
for round in $(seq 1 "$ROUNDS"); do
	if [ $((round % 2)) -eq 1 ]; then order=(A B); else order=(B A); fi
	for name in "${order[@]}"; do
		for test in "${TESTS[@]}"; do
			bench "$name" "$test" "$round"
		done
	done
done

# Medians per server and test, then the ratios B/A.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(redis-server --version | cut -d' ' -f1-3)"
echo "redis-benchmark -t TEST -n $N -r $N -c $CLIENTS -P $PIPELINE, medians of $ROUNDS rounds:"
echo
echo "| server | test | requests/s | CPU s per 1M requests |"
echo "|---|---|---:|---:|"
declare -A RPS CPU
for name in A B; do
	for test in "${TESTS[@]}"; do
		RPS[$name$test]=$(awk -v n="$name" -v t="$test" '$1 == n && $2 == t { print $3 }' "$work/results" | median)
		CPU[$name$test]=$(awk -v n="$name" -v t="$test" '$1 == n && $2 == t { print $4 }' "$work/results" | median)
		printf '| %s | %s | %.0f | %.3f |\n' "${LABEL[$name]}" "${test^^}" "${RPS[$name$test]}" "${CPU[$name$test]}"
	done
done
for test in "${TESTS[@]}"; do
	awk -v t="${test^^}" -v l="$label_b/redis" -v rb="${RPS[B$test]}" -v ra="${RPS[A$test]}" \
		-v cb="${CPU[B$test]}" -v ca="${CPU[A$test]}" 'BEGIN {
		printf "| %s | %s | %.2fx | %s |\n", l, t, rb / ra, (ca > 0 ? sprintf("%.2fx", cb / ca) : "n/a")
	}'
done
