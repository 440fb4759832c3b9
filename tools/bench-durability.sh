#!/usr/bin/env bash
# bench-durability.sh - durability figures, spillway-server and redis-server side by side in one run
# on this machine (docs/BENCHMARKS.md, appendix H):
#
#   restart   N keys of 100 bytes loaded (spillway-bench --op SET --runtime 0), a checkpoint (SAVE),
#             kill -9, start again on the same files: milliseconds from exec to the first +PONG
#             (both answer -LOADING until then). Spillway with --storage-tier (the log stays on the
#             device, the index image is loaded) and memory-only (the whole log is read back);
#             redis-server loading its RDB. Also the checkpoint's duration and index image size.
#   aof       redis-benchmark -t set -c 50 -n SET_N -d 100 (no pipelining) with --aof-fsync always,
#             everysec, no, against redis-server --appendonly yes --appendfsync the same.
#   bgsave    GET latency (spillway-bench --rate, open loop, p50/p99/p99.9) on the loaded tiered
#             server, idle and while checkpoints run back to back (SAVE in a loop on one
#             connection: the saver thread's checkpoint, as for BGSAVE).
#
# Environment: KEYS="2000000 10000000" (restart sizes), SET_N=200000, RATE=20000, LAT_S=10,
# ROUNDS=3 (aof and bgsave rows: medians of that many runs, the servers' order alternating),
# PARTS="restart aof bgsave", SPW_BIN=build/bin, THREADS=2 (spillway workers), DATA=/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

KEYS=${KEYS:-"2000000 10000000"}
SET_N=${SET_N:-200000}
RATE=${RATE:-20000}
LAT_S=${LAT_S:-10}
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-"restart aof bgsave"}
BIN=${SPW_BIN:-build/bin}
THREADS=${THREADS:-2}
DATA=${DATA:-/tmp}

for tool in redis-server redis-benchmark redis-cli; do
	command -v "$tool" >/dev/null || { echo "bench-durability.sh: $tool not found" >&2; exit 1; }
done
[ -x "$BIN/spillway-server" ] && [ -x "$BIN/spillway-bench" ] ||
	{ echo "bench-durability.sh: build first (cmake --build build)" >&2; exit 1; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

redis_start() {
	local dir=$1 port=$2
	shift 2
	redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --dbfilename dump.rdb --save "" \
		--appendonly no --daemonize no "$@" >>"$dir/server.log" 2>&1 &
	PID=$!
	PIDS+=("$PID")
}

load_keys() {   # PORT N
	"$BIN/spillway-bench" -p "$1" --op SET --dbsize "$2" --valuelength 100 --runtime 0 --quiet \
		-t 2 >/dev/null
}

# restart_row NAME N START_FN FLAGS...: load, SAVE, kill -9, restart; prints a row.
restart_row() {
	local name=$1 n=$2 fn=$3
	shift 3
	local dir port t0 t1 save_ms ready_ms rss
	dir=$(mktemp -d "$DATA/spw-dur.XXXXXX")
	port=$(free_port)
	"$fn" "$dir" "$port" "$@"
	wait_ready "$port" "$PID"
	load_keys "$port" "$n"
	t0=$(now_ms)
	redis-cli -p "$port" SAVE >/dev/null
	t1=$(now_ms)
	save_ms=$((t1 - t0))
	local ckpt_bytes
	ckpt_bytes=$(redis-cli -p "$port" INFO persistence | tr -d '\r' | awk -F: '/^checkpoint_last_bytes/ {print $2}')
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	t0=$(now_ms)
	"$fn" "$dir" "$port" "$@"
	wait_ready "$port" "$PID"
	t1=$(now_ms)
	ready_ms=$((t1 - t0))
	local dbsize
	dbsize=$(redis-cli -p "$port" DBSIZE)
	rss=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$name" "$n" "$dbsize" "$save_ms" \
		"${ckpt_bytes:--}" "$ready_ms" "$((rss / 1024))"
	rm -rf "$dir"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

if [[ " $PARTS " == *" restart "* ]]; then
echo "## restart after kill -9 (checkpoint / RDB of N keys x 100 B)"
echo
echo "| server | keys | dbsize after | SAVE ms | index image bytes | restart ms (exec to PONG) | RSS MiB after |"
echo "|---|---|---|---|---|---|---|"
for n in $KEYS; do
	idx=$(( n >= 5000000 ? 256 : 64 ))m
	restart_row "redis-server (RDB)" "$n" redis_start
	restart_row "spillway --storage-tier" "$n" spw_start --storage-tier --memory 1g --index "$idx"
	restart_row "spillway memory-only" "$n" spw_start --memory 8g --index "$idx"
done
echo
fi

# aof_run START_FN FLAGS...: one redis-benchmark SET run; prints "SET/s CPU-us-per-SET".
aof_run() {
	local fn=$1
	shift
	local dir port out rps c0 c1
	dir=$(mktemp -d "$DATA/spw-dur.XXXXXX")
	port=$(free_port)
	"$fn" "$dir" "$port" "$@"
	wait_ready "$port" "$PID"
	c0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
	out=$(redis-benchmark -p "$port" -t set -c 50 -n "$SET_N" -r 1000000 -d 100 -q 2>/dev/null | tr '\r' '\n' | grep -E 'requests per second' | tail -1)
	c1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
	rps=$(echo "$out" | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
	awk -v r="$rps" -v c=$((c1 - c0)) -v t="$(getconf CLK_TCK)" -v n="$SET_N" \
		'BEGIN { printf "%s %.1f\n", r, c / t * 1e6 / n }'
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	rm -rf "$dir"
}

if [[ " $PARTS " == *" aof "* ]]; then
echo "## SET/s with an append-only file (redis-benchmark -t set -c 50 -n $SET_N -d 100, no pipelining; medians of $ROUNDS)"
echo
echo "| aof-fsync | redis SET/s | spillway -t1 SET/s | ratio | spillway -t$THREADS SET/s | ratio | CPU us/SET redis / -t1 / -t$THREADS |"
echo "|---|---|---|---|---|---|---|"
for mode in always everysec no off; do
	R=() S1=() S2=() RC=() S1C=() S2C=()
	if [ "$mode" = off ]; then   # the same load without an AOF: the baseline of the ratios above
		rf=(--appendonly no) sf=(--aof no)
	else
		rf=(--appendonly yes --appendfsync "$mode") sf=(--aof yes --aof-fsync "$mode")
	fi
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then
			read -r a b < <(aof_run redis_start "${rf[@]}"); R+=("$a"); RC+=("$b")
			read -r a b < <(aof_run spw_start --threads 1 "${sf[@]}"); S1+=("$a"); S1C+=("$b")
			read -r a b < <(aof_run spw_start "${sf[@]}"); S2+=("$a"); S2C+=("$b")
		else
			read -r a b < <(aof_run spw_start "${sf[@]}"); S2+=("$a"); S2C+=("$b")
			read -r a b < <(aof_run spw_start --threads 1 "${sf[@]}"); S1+=("$a"); S1C+=("$b")
			read -r a b < <(aof_run redis_start "${rf[@]}"); R+=("$a"); RC+=("$b")
		fi
	done
	rm_=$(echo "${R[*]}" | median); s1m=$(echo "${S1[*]}" | median); s2m=$(echo "${S2[*]}" | median)
	printf "| %s | %.0f | %.0f | %.2f | %.0f | %.2f | %s / %s / %s |\n" "$mode" "$rm_" "$s1m" \
		"$(awk -v a="$s1m" -v b="$rm_" 'BEGIN { print a / b }')" "$s2m" \
		"$(awk -v a="$s2m" -v b="$rm_" 'BEGIN { print a / b }')" "$(echo "${RC[*]}" | median)" \
		"$(echo "${S1C[*]}" | median)" "$(echo "${S2C[*]}" | median)"
done
echo
fi

if [[ " $PARTS " == *" bgsave "* ]]; then
# GET latency idle and during back-to-back BGSAVE.
n=$(echo "$KEYS" | awk '{print $1}')
dir=$(mktemp -d "$DATA/spw-dur.XXXXXX")
port=$(free_port)
spw_start "$dir" "$port" --storage-tier --memory 1g --index 64m
wait_ready "$port" "$PID"
load_keys "$port" "$n"
redis-cli -p "$port" SAVE >/dev/null
lat_row() {
	"$BIN/spillway-bench" -p "$port" -s --op GET --dbsize "$n" --valuelength 100 --rate "$RATE" --runtime "$LAT_S" \
		--conns-per-thread 4 --quiet --csv "$dir/lat.csv" >/dev/null
	local hdr row
	hdr=$(head -1 "$dir/lat.csv")
	row=$(tail -1 "$dir/lat.csv")
	python3 - "$hdr" "$row" "$1" <<'EOF'
import sys
h = sys.argv[1].split(','); r = sys.argv[2].split(','); d = dict(zip(h, r))
print("| %s | %s | %s | %s | %s | %s |" % (sys.argv[3], d.get('ops_per_s', '-'), d.get('p50_us', '-'),
      d.get('p99_us', '-'), d.get('p999_us', '-'), d.get('max_us', '-')))
EOF
}
echo "## GET latency during checkpoints ($n keys, --storage-tier, $RATE GET/s open loop, ${LAT_S}s)"
echo
echo "| state | GET/s | p50 us | p99 us | p99.9 us | max us |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
lat_row "idle (round $r)"
# Checkpoints back to back from one connection (redis-cli -r: no process per checkpoint, whose
# fork and exec would be noise of their own on two vCPUs). SAVE parks only its own client; the
# checkpoint runs on the saver thread exactly as BGSAVE's does.
s0=$(redis-cli -p "$port" INFO persistence | tr -d '\r' | awk -F: '/^rdb_saves/ {print $2}')
redis-cli -p "$port" -r 100000 -i 0 SAVE >/dev/null 2>&1 &
bg=$!
sleep 0.2
lat_row "checkpoints back to back (round $r)"
kill "$bg" 2>/dev/null || true
wait "$bg" 2>/dev/null || true
s1=$(redis-cli -p "$port" INFO persistence | tr -d '\r' | awk -F: '/^rdb_saves/ {print $2}')
echo "$((s1 - s0))" >"$dir/saves"
done
echo
echo "checkpoints completed during the last round: $(cat "$dir/saves"); last checkpoint:" \
	"$(redis-cli -p "$port" INFO persistence | tr -d '\r' | grep -E '^checkpoint_last_(duration_us|bytes)' | tr '\n' ' ')"
kill -9 "$PID"
rm -rf "$dir"
fi
