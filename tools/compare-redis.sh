#!/usr/bin/env bash
# compare-redis.sh - redis-server and spillway-server under the same spillway-bench loads, in one run.
#
# Starts, on free loopback ports, redis-server --save '' --appendonly no (A), spillway-server
# --threads 1 (B: one worker, as Redis has one main thread) and, unless SPW2_FLAGS is empty, a
# second Spillway configuration (C, default --threads 2). Each server is loaded once with the same
# deterministic keys (spillway-bench --runtime 0), then every round runs each workload against each
# server, in alternating order (A B C, then C B A, ...) so that no server always runs on a warmer
# machine. Every run passes --server-pid, so the server's CPU time is measured per run.
#
# Workloads (all with -s: reading what the load wrote; every reply is checked):
#   GET       offline: -t $THREADS -b $BATCH --op GET        (pipelined batches)
#   SET       offline: -t $THREADS -b $BATCH --op SET
#   GET/SET   online:  -t $THREADS --conns-per-thread $CONNS --itp $ITP, 80% GET / 20% SET
# Printed at the end: a markdown table of the medians over the rounds (ops/s, p99 latency, server CPU
# microseconds per request) and the ratios Spillway/Redis for each: throughput above 1 and p99 and
# CPU below 1 are Spillway's advantage.
#
# Environment:
#   ROUNDS=3 RUNTIME=3 (seconds per run)  DBSIZE=100000 KEYLEN=8 VALLEN=32
#   THREADS=1 BATCH=64 CONNS=4 ITP=16      spillway-bench's shape
#   SPW_BIN=build/bin/spillway-server BENCH=build/bin/spillway-bench
#   SPW_FLAGS=""                           extra flags for both Spillway servers
#   SPW2_FLAGS="--threads 2"               the second Spillway configuration ("" = none)
#   KEEP_CSV=DIR                           keep every run's CSV there
#
# CPU figures have the kernel's tick resolution (CLK_TCK, usually 10 ms); spillway-bench runs on the
# same machine, so on a small machine compare the ratios, not the absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-3}
DBSIZE=${DBSIZE:-100000}
KEYLEN=${KEYLEN:-8}
VALLEN=${VALLEN:-32}
THREADS=${THREADS:-1}
BATCH=${BATCH:-64}
CONNS=${CONNS:-4}
ITP=${ITP:-16}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
BENCH=${BENCH:-build/bin/spillway-bench}
SPW_FLAGS=${SPW_FLAGS:-}
SPW2_FLAGS=${SPW2_FLAGS-"--threads 2"}
KEEP_CSV=${KEEP_CSV:-}

die() { echo "compare-redis.sh: $*" >&2; exit 1; }
command -v redis-server >/dev/null || die "redis-server not found (scripts/deps.sh installs it)"
command -v redis-cli >/dev/null || die "redis-cli not found (scripts/deps.sh installs it)"
[ -x "$SPW_BIN" ] || die "$SPW_BIN not found: cmake --build build --target spillway-server"
[ -x "$BENCH" ] || die "$BENCH not found: cmake --build build --target spillway-bench"
[ "$ROUNDS" -ge 1 ] || die "ROUNDS must be at least 1"

work=$(mktemp -d "${TMPDIR:-/tmp}/spw-compare.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# A loopback port nothing listens on right now (the start below is checked with PING anyway).

declare -A PORT PID LABEL
# start NAME KIND LABEL [FLAGS...]: start a server in the background and wait for PONG.
start() {
	local name=$1 kind=$2 label=$3 port dir pid
	shift 3
	for _ in 1 2 3; do
		port=$(free_port)
		dir="$work/$name"
		mkdir -p "$dir"
		if [ "$kind" = redis ]; then
			redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
				--dir "$dir" --logfile "$dir/server.log" &
		else
			"$SPW_BIN" --bind 127.0.0.1 --port "$port" --dir "$dir" --logdir "$dir" --save '' \
				--checkpoint-interval 0 "$@" >"$dir/server.log" 2>&1 &
		fi
		pid=$!
		pids+=("$pid")
		for _ in $(seq 1 200); do
			if [ "$(redis-cli -h 127.0.0.1 -p "$port" PING 2>/dev/null)" = PONG ]; then
				PORT[$name]=$port
				PID[$name]=$pid
				LABEL[$name]=$label
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -0 "$pid" 2>/dev/null && break   # running but not answering: not a port race
	done
	echo "compare-redis.sh: $label did not start; its log:" >&2
	cat "$dir/server.log" >&2 || true
	exit 1
}

KEYS=(--dbsize "$DBSIZE" --keylength "$KEYLEN" --valuelength "$VALLEN")
WORKLOADS=(get set mixed)
declare -A WL_NAME=([get]=GET [set]=SET [mixed]="GET/SET 80/20")
wl_args() {
	case $1 in
	get) echo "--op GET -t $THREADS -b $BATCH" ;;
	set) echo "--op SET -t $THREADS -b $BATCH" ;;
	mixed) echo "--online --op-workload GET,SET --op-percent 80,20 -t $THREADS --conns-per-thread $CONNS --itp $ITP" ;;
	esac
}

# run NAME WORKLOAD ROUND: one spillway-bench run; appends "name workload ops/s p99_us cpu_us/op".
run() {
	local name=$1 wl=$2 round=$3 csv out rc line args
	csv="$work/$name-$wl-$round.csv"
	read -r -a args <<<"$(wl_args "$wl")"
	set +e
	out=$("$BENCH" --port "${PORT[$name]}" "${KEYS[@]}" -s --runtime "$RUNTIME" --quiet \
		--server-pid "${PID[$name]}" --csv "$csv" "${args[@]}" 2>&1)
	rc=$?
	set -e
	if [ "$rc" -ne 0 ] || [ ! -s "$csv" ]; then
		echo "compare-redis.sh: spillway-bench against ${LABEL[$name]} ($wl) failed (exit $rc):" >&2
		printf '%s\n' "$out" >&2
		exit 1
	fi
	[ -n "$KEEP_CSV" ] && mkdir -p "$KEEP_CSV" && cp "$csv" "$KEEP_CSV/"
	# The last row is the measured one. The op column is quoted and may hold commas: drop it first.
	line=$(tail -n 1 "$csv" | sed 's/"[^"]*"/OP/')
	awk -F, -v n="$name" -v w="$wl" '{ print n, w, $10, $16, ($23 == "" ? "nan" : $23) }' <<<"$line" >>"$work/results"
	awk -F, -v r="$round" -v l="${LABEL[$name]}" -v w="${WL_NAME[$wl]}" \
		'{ printf "  round %d  %-22s %-14s %12.0f ops/s  p99 %9.1f us  CPU %7s us/op\n", r, l, w, $10, $16, $23 }' <<<"$line"
}

start A redis "redis $(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')"
# shellcheck disable=SC2086
start B spillway "spillway --threads 1" --threads 1 $SPW_FLAGS
SERVERS=(A B)
if [ -n "$SPW2_FLAGS" ]; then
	# shellcheck disable=SC2086
	start C spillway "spillway $SPW2_FLAGS" $SPW2_FLAGS $SPW_FLAGS
	SERVERS+=(C)
fi
: >"$work/results"

echo "compare-redis.sh: ${#SERVERS[@]} servers, $ROUNDS rounds of ${RUNTIME} s per workload; dbsize $DBSIZE," \
	"keys $KEYLEN B, values $VALLEN B"
for s in "${SERVERS[@]}"; do
	"$BENCH" --port "${PORT[$s]}" "${KEYS[@]}" --runtime 0 --quiet >/dev/null ||
		die "loading ${LABEL[$s]} failed"
	echo "  loaded ${LABEL[$s]} (port ${PORT[$s]}, pid ${PID[$s]})"
done
for round in $(seq 1 "$ROUNDS"); do
	order=("${SERVERS[@]}")
	if [ $((round % 2)) -eq 0 ]; then
		order=()
		for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do order+=("${SERVERS[$i]}"); done
	fi
	for s in "${order[@]}"; do
		for wl in "${WORKLOADS[@]}"; do
			run "$s" "$wl" "$round"
		done
	done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
declare -A TPUT P99 CPU
for s in "${SERVERS[@]}"; do
	for wl in "${WORKLOADS[@]}"; do
		TPUT[$s$wl]=$(awk -v n="$s" -v w="$wl" '$1 == n && $2 == w { print $3 }' "$work/results" | median)
		P99[$s$wl]=$(awk -v n="$s" -v w="$wl" '$1 == n && $2 == w { print $4 }' "$work/results" | median)
		CPU[$s$wl]=$(awk -v n="$s" -v w="$wl" '$1 == n && $2 == w && $5 != "nan" { print $5 }' "$work/results" | median)
	done
done

echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(uname -sr)"
echo "spillway-bench ${KEYS[*]} -s --runtime $RUNTIME --server-pid PID, then GET: $(wl_args get);" \
	"SET: $(wl_args set); GET/SET 80/20: $(wl_args mixed). Medians of $ROUNDS rounds:"
echo
echo "| server | workload | ops/s | p99 us | server CPU us/op |"
echo "|---|---|---:|---:|---:|"
for s in "${SERVERS[@]}"; do
	for wl in "${WORKLOADS[@]}"; do
		awk -v l="${LABEL[$s]}" -v w="${WL_NAME[$wl]}" -v t="${TPUT[$s$wl]}" -v p="${P99[$s$wl]}" -v c="${CPU[$s$wl]}" \
			'BEGIN { printf "| %s | %s | %.0f | %.1f | %.3f |\n", l, w, t, p, c }'
	done
done
for s in "${SERVERS[@]:1}"; do
	for wl in "${WORKLOADS[@]}"; do
		awk -v l="${LABEL[$s]} / redis" -v w="${WL_NAME[$wl]}" \
			-v tb="${TPUT[$s$wl]}" -v ta="${TPUT[A$wl]}" -v pb="${P99[$s$wl]}" -v pa="${P99[A$wl]}" \
			-v cb="${CPU[$s$wl]}" -v ca="${CPU[A$wl]}" 'BEGIN {
			printf "| **%s** | %s | **%.2fx** | **%.2fx** | **%s** |\n", l, w, tb / ta, pb / pa,
			       (ca > 0 ? sprintf("%.2fx", cb / ca) : "n/a")
		}'
	done
done
