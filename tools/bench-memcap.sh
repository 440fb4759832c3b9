#!/usr/bin/env bash
# bench-memcap.sh - the memory cap's figures (docs/BENCHMARKS.md, appendix I):
#
#   rss     spillway-server --storage-tier --maxmemory CAP (--memory and --index sized from it),
#           IDLE idle connections held open, then TIMES x CAP of VALLEN-byte values loaded
#           (spillway-bench --op SET --runtime 0): VmRSS of /proc/<pid>/status sampled every 50 ms,
#           its maximum against the cap, and INFO's used_memory and parts at the end.
#   perkey  the same server with KEYS keys of 8 + 100 bytes under CAP_KEYS with PERKEY_FLAGS (a
#           small log window, so that most records are on the device): RAM per key from INFO
#           (used_memory, the index part, index_bytes_per_key) and RSS, once loaded.
#
# Environment: CAPS="64mb 256mb", TIMES=20, VALLEN=4096, IDLE=1000, KEYS=10000000, CAP_KEYS=256mb,
# PERKEY_FLAGS="--memory 64mb --index 64mb --page 1mb",
# PARTS="rss perkey", SPW_BIN=build/bin, THREADS=2, DATA=/tmp (the segment files: TIMES x CAP).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

CAPS=${CAPS:-"64mb 256mb"}
TIMES=${TIMES:-20}
VALLEN=${VALLEN:-4096}
IDLE=${IDLE:-1000}
KEYS=${KEYS:-10000000}
CAP_KEYS=${CAP_KEYS:-256mb}
PERKEY_FLAGS=${PERKEY_FLAGS:-"--memory 64mb --index 64mb --page 1mb"}
PARTS=${PARTS:-"rss perkey"}
BIN=${SPW_BIN:-build/bin}
THREADS=${THREADS:-2}
DATA=${DATA:-/tmp}

command -v redis-cli >/dev/null && command -v python3 >/dev/null ||
	{ echo "bench-memcap.sh: needs redis-cli and python3" >&2; exit 1; }
[ -x "$BIN/spillway-server" ] && [ -x "$BIN/spillway-bench" ] ||
	{ echo "bench-memcap.sh: build first (cmake --build build)" >&2; exit 1; }

bytes() {   # 64mb -> 67108864 (k/m/g as powers of 1024, the server's grammar)
	local n=${1%[kKmMgG]*} u=${1#"${1%[kKmMgG]*}"}
	case ${u,,} in k|kb) echo $((n << 10)) ;; m|mb) echo $((n << 20)) ;; g|gb) echo $((n << 30)) ;; *) echo "$n" ;; esac
}
info() { redis-cli -p "$1" info "$2" | tr -d '\r' | sed -n "s/^$3://p"; }
rss_now() { awk '/^VmRSS:/ { print $2; f = 1 } END { if (!f) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# start CAP [FLAGS...]: a tiered server with the cap on a fresh folder; sets PORT PID DIR.
start() {
	local cap=$1
	shift
	DIR=$(mktemp -d "$DATA/spw-memcap.XXXXXX")
	PORT=$(free_port)
	ulimit -n 4096 2>/dev/null || true
	"$BIN/spillway-server" --port "$PORT" --dir "$DIR" --threads "$THREADS" --storage-tier \
		--maxmemory "$cap" --save '' --checkpoint-interval 0 "$@" >"$DIR/server.log" 2>&1 &
	PID=$!
	wait_pong "$PORT" "$PID" || { cat "$DIR/server.log" >&2; exit 1; }
}
stop() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

for part in $PARTS; do
	case $part in
	rss)
		echo "| cap | idle clients | loaded | --memory / --index | RSS max | RSS max / cap | used_memory at the end | log / index / io / clients |"
		echo "|---:|---:|---:|---|---:|---:|---:|---|"
		for cap in $CAPS; do
			start "$cap"
			capb=$(bytes "$cap")
			n=$((TIMES * capb / VALLEN))
			# Idle connections, held by a python3 child until it is killed.
			python3 -c "import socket,sys,time
s=[socket.create_connection(('127.0.0.1',$PORT)) for _ in range($IDLE)]
time.sleep(100000)" &
			idle_pid=$!
			for _ in $(seq 1 200); do
				[ "$(info "$PORT" clients connected_clients)" -ge "$IDLE" ] 2>/dev/null && break
				sleep 0.05
			done
			max=0
			"$BIN/spillway-bench" -p "$PORT" --op SET --dbsize "$n" --valuelength "$VALLEN" --runtime 0 \
				--quiet >/dev/null &
			bench=$!
			while kill -0 "$bench" 2>/dev/null; do
				r=$(rss_now "$PID")
				[ "$r" -gt "$max" ] && max=$r
				sleep 0.05
			done
			wait "$bench"
			clients=$(info "$PORT" clients connected_clients)
			kill "$idle_pid" 2>/dev/null || true
			wait "$idle_pid" 2>/dev/null || true
			used=$(info "$PORT" memory used_memory)
			parts="$(info "$PORT" memory used_memory_log) / $(info "$PORT" memory used_memory_index) / $(info "$PORT" memory used_memory_io) / $(info "$PORT" memory used_memory_clients)"
			geo="$(info "$PORT" memory log_max_memory) / $(info "$PORT" store IndexMemorySizeBytes)"
			printf "| %s | %s | %s MiB | %s | %s KiB | %.1f%% | %s | %s |\n" "$cap" "$((clients - 1))" \
				"$((n * VALLEN >> 20))" "$geo" "$max" "$(echo "100 * $max * 1024 / $capb" | bc -l)" "$used" "$parts"
			stop
		done
		;;
	perkey)
		# shellcheck disable=SC2086
		start "$CAP_KEYS" $PERKEY_FLAGS
		"$BIN/spillway-bench" -p "$PORT" --op SET --dbsize "$KEYS" --valuelength 100 --runtime 0 --quiet >/dev/null
		keys=$(redis-cli -p "$PORT" dbsize)
		used=$(info "$PORT" memory used_memory)
		idx=$(info "$PORT" memory used_memory_index)
		echo "| keys | cap, flags | used_memory / key | index / key (index_bytes_per_key) | RSS / key | log in memory |"
		echo "|---:|---|---:|---:|---:|---:|"
		printf "| %s | %s %s | %.1f B | %.1f B (%s) | %.1f B | %s |\n" "$keys" "$CAP_KEYS" "$PERKEY_FLAGS" \
			"$(echo "$used / $keys" | bc -l)" "$(echo "$idx / $keys" | bc -l)" \
			"$(info "$PORT" memory index_bytes_per_key)" \
			"$(echo "$(rss_now "$PID") * 1024 / $keys" | bc -l)" "$(info "$PORT" memory used_memory_log)"
		stop
		;;
	*) echo "bench-memcap.sh: unknown part $part" >&2; exit 1 ;;
	esac
done
