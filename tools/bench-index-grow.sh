#!/usr/bin/env bash
# bench-index-grow.sh - the index sizing itself (index/hidx.c note "Growth"), side by side in one run:
#   KEYS keys of 8 + 100 bytes loaded into a tiered server (a small log window: the records go to the
#   device), once with the index growing from its default start (--index 16m) and once pre-sized
#   (FIXED_INDEX, --index-max-size equal: no growth). For each: the load rate, the doublings and
#   how long each took (the server's notice lines), buckets and overflow buckets at the end, index
#   bytes per key, RSS per key; then GET p50/p99/p99.9 on the loaded keys (spillway-bench --online).
#   GROW_DURING=1 adds a row: GET latency on a first half of the keys while the second half is
#   loaded (the index doubles during it), next to the same with the index pre-sized.
#
# Environment: KEYS=10000000, FIXED_INDEX=128m, FLAGS="--memory 64mb --page 1mb", THREADS=2,
# SPW_BIN=build/bin, DATA=/tmp, GET_SECONDS=10, GROW_DURING=1.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

KEYS=${KEYS:-10000000}
FIXED_INDEX=${FIXED_INDEX:-128m}
FLAGS=${FLAGS:-"--memory 64mb --page 1mb"}
THREADS=${THREADS:-2}
BIN=${SPW_BIN:-build/bin}
DATA=${DATA:-/tmp}
GET_SECONDS=${GET_SECONDS:-10}
GROW_DURING=${GROW_DURING:-1}

[ -x "$BIN/spillway-server" ] && [ -x "$BIN/spillway-bench" ] ||
	{ echo "bench-index-grow.sh: build first (cmake --build build)" >&2; exit 1; }
info() { redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# start [FLAGS...]: a tiered server on a fresh folder; sets PORT PID DIR.
start() {
	DIR=$(mktemp -d "$DATA/spw-igrow.XXXXXX")
	PORT=$(free_port)
	# shellcheck disable=SC2086
	"$BIN/spillway-server" --port "$PORT" --dir "$DIR" --threads "$THREADS" --storage-tier \
		--save '' --checkpoint-interval 0 $FLAGS "$@" >"$DIR/server.log" 2>&1 &
	PID=$!
	wait_pong "$PORT" "$PID" || { cat "$DIR/server.log" >&2; exit 1; }
}
stop() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

# get_row NAME: GET latency on keys 0..$1-1 for GET_SECONDS (one connection per thread, 1 in flight).
get_lat() {
	"$BIN/spillway-bench" -p "$PORT" -s --op GET --dbsize "$1" --valuelength 100 --online --itp 1 \
		-t "$THREADS" --runtime "$GET_SECONDS" --quiet --json "$DIR/get.json" >/dev/null
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r=r[0] if isinstance(r,list) else r
rows=r.get("rows",[r]); x=rows[0]
print("%.0f / %.0f / %.0f us" % tuple(x.get(k,0) for k in ("p50_us","p99_us","p999_us")))' "$DIR/get.json"
}

echo "| index | load (SET/s) | doublings (ms each) | buckets / overflow buckets | index B/key | RSS B/key | GET p50 / p99 / p99.9 |"
echo "|---|---:|---|---:|---:|---:|---:|"
for mode in grow fixed; do
	if [ "$mode" = grow ]; then start; else start --index "$FIXED_INDEX" --index-max-size "$FIXED_INDEX"; fi
	t0=$(date +%s.%N)
	"$BIN/spillway-bench" -p "$PORT" --op SET --dbsize "$KEYS" --valuelength 100 --runtime 0 --quiet >/dev/null
	t1=$(date +%s.%N)
	sleep 2   # the compactor's last look
	keys=$(redis-cli -p "$PORT" dbsize)
	idx=$(info "$PORT" memory used_memory_index)
	ms=$(sed -n 's/.*The index doubled to .* in \([0-9]*\) ms.*/\1/p' "$DIR/server.log" | paste -sd, -)
	printf "| %s | %.0f | %s (%s) | %s / %s | %.1f | %.1f | %s |\n" \
		"$([ "$mode" = grow ] && echo "16m, growing" || echo "$FIXED_INDEX fixed")" \
		"$(echo "$keys / ($t1 - $t0)" | bc -l)" "$(info "$PORT" store index_grows)" "${ms:--}" \
		"$(info "$PORT" store IndexBucketCount)" "$(info "$PORT" store IndexOverflowBucketCount)" \
		"$(echo "$idx / $keys" | bc -l)" "$(echo "$(rss_kb "$PID") * 1024 / $keys" | bc -l)" \
		"$(get_lat "$keys")"
	stop
done

[ "$GROW_DURING" = 1 ] || exit 0
echo
echo "| index | GET p50 / p99 / p99.9 on the first half while the second half loads | doublings during it |"
echo "|---|---:|---:|"
half=$((KEYS / 2))
for mode in grow fixed; do
	if [ "$mode" = grow ]; then start; else start --index "$FIXED_INDEX" --index-max-size "$FIXED_INDEX"; fi
	"$BIN/spillway-bench" -p "$PORT" --op SET --dbsize "$half" --valuelength 100 --runtime 0 --quiet >/dev/null
	sleep 2
	g0=$(info "$PORT" store index_grows)
	# the second half: keys half..KEYS-1 (a key prefix the first half does not use)
	python3 - "$PORT" "$half" "$KEYS" <<'EOF' &
import socket, sys
port, lo, hi = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
v = b"v" * 100
for base in range(lo, hi, 1000):
    out = b"".join(b"*3\r\n$3\r\nSET\r\n$9\r\nk%08d\r\n$100\r\n%s\r\n" % (i, v) for i in range(base, min(base + 1000, hi)))
    s.sendall(out)
    need, got = min(1000, hi - base), 0
    while got < need:
        got += s.recv(1 << 20).count(b"+OK")
EOF
	loader=$!
	lat=$(get_lat "$half")
	wait "$loader"
	printf "| %s | %s | %s |\n" "$([ "$mode" = grow ] && echo "16m, growing" || echo "$FIXED_INDEX fixed")" \
		"$lat" "$(( $(info "$PORT" store index_grows) - g0 ))"
	stop
done
