#!/usr/bin/env bash
# bench-compaction.sh - compaction's figures on this machine (docs/BENCHMARKS.md, appendix J):
#
#   overwrite  KEYS keys of VALLEN bytes written, then rewritten ROUNDS times over (redis-benchmark
#              -t set -r KEYS, pipelined) through a small --memory with --storage-tier and the
#              default background compaction (--compaction-max-segments, --compaction-io-limit):
#              disk use (du of the data folder) sampled every second, its peak and its end against
#              the live data, and write amplification = bytes the log wrote to the device (INFO
#              tier_flush_bytes) / bytes the clients wrote (key + value of every SET). The same run
#              without compaction (--compaction-max-segments 0) for the disk it would take.
#   latency    GET latency (spillway-bench --rate, open loop, p50/p99/p99.9) on a store whose
#              oldest part is mostly garbage: idle, then while COMPACT runs under the IO budget.
#              ROUNDS_LAT rounds, medians; a fresh store each round (a pass leaves nothing to do).
#
# Environment: KEYS=100000 VALLEN=1000 ROUNDS=10 SEGMENT=8m MEMORY=64m, LAT_KEYS=2000000,
# RATE=10000, LAT_S=10, ROUNDS_LAT=3, IO_LIMIT=16mb (the default), PARTS="overwrite latency", SPW_BIN=build/bin,
# THREADS=2, DATA=/tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

KEYS=${KEYS:-100000}
VALLEN=${VALLEN:-1000}
ROUNDS=${ROUNDS:-10}
SEGMENT=${SEGMENT:-8m}
MEMORY=${MEMORY:-64m}
LAT_KEYS=${LAT_KEYS:-2000000}
RATE=${RATE:-10000}
LAT_S=${LAT_S:-10}
ROUNDS_LAT=${ROUNDS_LAT:-3}
IO_LIMIT=${IO_LIMIT:-16mb}
PARTS=${PARTS:-"overwrite latency"}
BIN=${SPW_BIN:-build/bin}
THREADS=${THREADS:-2}
DATA=${DATA:-/tmp}

for tool in redis-benchmark redis-cli python3; do
	command -v "$tool" >/dev/null || { echo "bench-compaction.sh: $tool not found" >&2; exit 1; }
done
[ -x "$BIN/spillway-server" ] && [ -x "$BIN/spillway-bench" ] ||
	{ echo "bench-compaction.sh: build first (cmake --build build)" >&2; exit 1; }

info() { redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v k="$3" '$1 == k {print $2}'; }
du_alloc() { du -sB1 "$1" | awk '{print $1}'; }
median() { tr ' ' '\n' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# overwrite_run MAXSEG: one overwrite run; prints "peak_du end_du flush_bytes user_bytes passes".
overwrite_run() {
	local dir port peak=0 d
	dir=$(mktemp -d "$DATA/spw-cmp.XXXXXX")
	port=$(free_port)
	spw_start "$dir" "$port" --storage-tier --memory "$MEMORY" --segment "$SEGMENT" --page 1m \
		--compaction-max-segments "$1" --compaction-io-limit "$IO_LIMIT"
	wait_ready "$port" "$PID"
	local n=$((KEYS * (ROUNDS + 1)))
	redis-benchmark -p "$port" -t set -n "$n" -r "$KEYS" -d "$VALLEN" -P 16 -c 8 -q >/dev/null 2>&1 &
	local bench=$!
	while kill -0 "$bench" 2>/dev/null; do
		d=$(du_alloc "$dir")
		[ "$d" -gt "$peak" ] && peak=$d
		sleep 1
	done
	# Let the compactor finish what the last writes made due.
	for _ in $(seq 1 30); do
		d=$(du_alloc "$dir")
		[ "$d" -gt "$peak" ] && peak=$d
		sleep 1
	done
	local flush passes keylen=16
	flush=$(info "$port" stats tier_flush_bytes)
	passes=$(info "$port" store compaction_passes)
	echo "$peak $(du_alloc "$dir") $flush $((n * (VALLEN + keylen))) $passes"
	redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait "$PID" 2>/dev/null || true
	rm -rf "$dir"
}

if [[ " $PARTS " == *" overwrite "* ]]; then
live=$((KEYS * (VALLEN + 16)))
echo "## Overwrites: $KEYS keys of $VALLEN bytes rewritten $ROUNDS times (--memory $MEMORY, --segment $SEGMENT, --compaction-io-limit $IO_LIMIT)"
echo
echo "| compaction | disk peak MiB | disk at the end MiB | end / live data | device bytes written / user bytes | passes |"
echo "|---|---|---|---|---|---|"
for maxseg in 32 0; do
	read -r peak end flush user passes < <(overwrite_run "$maxseg")
	python3 - "$maxseg" "$peak" "$end" "$flush" "$user" "$passes" "$live" <<'EOF'
import sys
m, peak, end, flush, user, passes, live = sys.argv[1], *map(int, sys.argv[2:])
label = "off (--compaction-max-segments 0)" if m == "0" else "--compaction-max-segments %s" % m
print("| %s | %.0f | %.0f | %.2fx | %.2f | %d |" % (label, peak / 2**20, end / 2**20, end / live, flush / user, passes))
EOF
done
echo
fi

if [[ " $PARTS " == *" latency "* ]]; then
echo "## GET latency during compaction ($LAT_KEYS keys of 100 bytes, half of them rewritten, --storage-tier --memory $MEMORY, $RATE GET/s open loop, ${LAT_S}s, --compaction-io-limit $IO_LIMIT)"
echo
echo "| state | GET/s | p50 us | p99 us | p99.9 us | max us |"
echo "|---|---|---|---|---|---|"
IDLE=() BUSY=()
for r in $(seq 1 "$ROUNDS_LAT"); do
	dir=$(mktemp -d "$DATA/spw-cmp.XXXXXX")
	port=$(free_port)
	spw_start "$dir" "$port" --storage-tier --memory "$MEMORY" --segment "$SEGMENT" --page 1m \
		--compaction-max-segments 0 --compaction-io-limit "$IO_LIMIT"
	wait_ready "$port" "$PID"
	"$BIN/spillway-bench" -p "$port" --op SET --dbsize "$LAT_KEYS" --valuelength 100 --runtime 0 --quiet >/dev/null
	"$BIN/spillway-bench" -p "$port" --op SET --dbsize "$((LAT_KEYS / 2))" --valuelength 100 --runtime 0 --quiet >/dev/null
	lat() {
		"$BIN/spillway-bench" -p "$port" -s --op GET --dbsize "$LAT_KEYS" --valuelength 100 --rate "$RATE" \
			--runtime "$LAT_S" --conns-per-thread 4 --quiet --csv "$dir/lat.csv" >/dev/null
		python3 - "$(head -1 "$dir/lat.csv")" "$(tail -1 "$dir/lat.csv")" "$1" <<'EOF'
import sys
h = sys.argv[1].split(','); r = sys.argv[2].split(','); d = dict(zip(h, r))
print("| %s | %s | %s | %s | %s | %s |" % (sys.argv[3], d.get('ops_per_s', '-'), d.get('p50_us', '-'),
      d.get('p99_us', '-'), d.get('p999_us', '-'), d.get('max_us', '-')))
EOF
		python3 - "$(head -1 "$dir/lat.csv")" "$(tail -1 "$dir/lat.csv")" <<'EOF' >"$dir/p999"
import sys
h = sys.argv[1].split(','); r = sys.argv[2].split(','); print(dict(zip(h, r)).get('p999_us', '0'))
EOF
	}
	lat "idle (round $r)"
	IDLE+=("$(cat "$dir/p999")")
	p0=$(info "$port" store compaction_passes)
	redis-cli -p "$port" COMPACT >/dev/null &
	cpid=$!
	sleep 0.5
	lat "COMPACT running (round $r)"
	BUSY+=("$(cat "$dir/p999")")
	wait "$cpid" || true
	p1=$(info "$port" store compaction_passes)
	[ "$p1" -gt "$p0" ] || echo "(round $r: the pass did not run)" >&2
	redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait "$PID" 2>/dev/null || true
	rm -rf "$dir"
done
echo
i=$(echo "${IDLE[*]}" | median)
b=$(echo "${BUSY[*]}" | median)
echo "p99.9 medians: idle $i us, during compaction $b us: $(python3 -c "print('%.2fx' % ($b / $i if $i else 0))")"
fi
