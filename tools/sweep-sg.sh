#!/usr/bin/env bash
# sweep-sg.sh - the scatter-gather GET sweep of issue 6, one machine, one run:
#
#   tools/sweep-sg.sh [DIR]            (default DIR: /tmp/spw-sweep; needs ~2 GiB free)
#
# Three spillway-server --threads 1 stores in turn, each loaded with the same DBSIZE keys of
# KEYLEN + VALLEN bytes, then `spillway-bench -s --op GET -t THREADS -b BATCHES` (uniform keys, every
# reply checked), and for the device stores once with `CONFIG SET sg-get yes` and once with `no`:
#   native       --storage-tier yes --memory MEMORY --device-type native --device-io-backend BACKEND
#   localmemory  the same with --device-type localmemory --device-completion-threads 0
#   memory       no tier, --memory big enough for every key (the software ceiling)
# It prints one row per (store, sg-get, -b): GET/s and the server's CPU microseconds per GET (from
# /proc, --server-pid), then the ratios the issue asks for: sg-get on/off on the native store and
# localmemory/memory, and the store counters of the native run (reads per submission, mean queue
# depth, merged, vectored and shared reads).
#
# Environment: DBSIZE (6765007: 825 MiB of 8+100 B records, 51.6x MEMORY) KEYLEN (8) VALLEN (100)
# MEMORY (16m) PAGE (1m) INDEX (64m) BACKEND (uring | libaio) THREADS (2) BATCHES (1,16,64,256)
# RUNTIME (3 s) STORES ("native localmemory memory") SPW_BIN BENCH.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

DIR=${1:-/tmp/spw-sweep}
DBSIZE=${DBSIZE:-6765007}
KEYLEN=${KEYLEN:-8}
VALLEN=${VALLEN:-100}
MEMORY=${MEMORY:-16m}
PAGE=${PAGE:-1m}
INDEX=${INDEX:-64m}
BACKEND=${BACKEND:-uring}
THREADS=${THREADS:-2}
BATCHES=${BATCHES:-1,16,64,256}
RUNTIME=${RUNTIME:-3}
STORES=${STORES:-"native localmemory memory"}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
BENCH=${BENCH:-build/bin/spillway-bench}

die() { echo "sweep-sg.sh: $*" >&2; exit 1; }
[ -x "$SPW_BIN" ] || die "$SPW_BIN not found: cmake --build build"
[ -x "$BENCH" ] || die "$BENCH not found: cmake --build build"
command -v redis-cli >/dev/null || die "redis-cli is not installed (scripts/deps.sh installs it)"

work=$(mktemp -d "${TMPDIR:-/tmp}/spw-sweep.XXXXXX")
SPW_PID=
cleanup() {
	if [ -n "$SPW_PID" ]; then kill "$SPW_PID" 2>/dev/null || true; wait "$SPW_PID" 2>/dev/null || true; fi
	rm -rf "$DIR/store" "$work"
}
trap cleanup EXIT


KEYS=(--dbsize "$DBSIZE" --keylength "$KEYLEN" --valuelength "$VALLEN")
: >"$work/rows"

# sweep STORE FLAGS...: start, load, run the batches with sg-get on (and off for device stores).
sweep() {
	local store=$1
	shift
	rm -rf "$DIR/store"
	mkdir -p "$DIR/store"
	PORT=$(free_port) || die "no free loopback port"
	"$SPW_BIN" --bind 127.0.0.1 --port "$PORT" --threads 1 --dir "$DIR/store" --logdir "$DIR/store" \
		--save '' --checkpoint-interval 0 "$@" \
		>"$work/server.log" 2>&1 &
	SPW_PID=$!
	wait_pong "$PORT" "$SPW_PID" || { cat "$work/server.log" >&2; die "$store: the server did not start"; }
	echo "sweep-sg.sh: $store: loading $DBSIZE keys" >&2
	"$BENCH" --port "$PORT" "${KEYS[@]}" -t 2 --runtime 0 --quiet >"$work/load.out" 2>&1 ||
		{ cat "$work/load.out" >&2; die "$store: loading failed"; }
	local modes=yes
	[ "$store" != memory ] && modes="yes no"
	for sg in $modes; do
		redis-cli -p "$PORT" CONFIG SET sg-get "$sg" >/dev/null
		redis-cli -p "$PORT" CONFIG RESETSTAT >/dev/null
		"$BENCH" --port "$PORT" "${KEYS[@]}" -s --op GET -t "$THREADS" -b "$BATCHES" --runtime "$RUNTIME" \
			--server-pid "$SPW_PID" --quiet --csv "$work/sweep.csv" >"$work/bench.out" 2>&1 ||
			{ cat "$work/bench.out" >&2; die "$store sg-get $sg: spillway-bench failed (reply check?)"; }
		# csv: mode,op,threads,batch,...,ops_per_s ($10),...,errors ($19),wrong,missing,cpu_s,us/op ($23)
		tail -n +2 "$work/sweep.csv" | sed 's/"[^"]*"/OP/' |
			awk -F, -v st="$store" -v sg="$sg" '{ print st, sg, $4, $10, $23, $19 + $20 + $21 }' >>"$work/rows"
		if [ "$store" != memory ] && [ "$sg" = yes ]; then
			{
				printf '%s: ' "$store"
				redis-cli -p "$PORT" INFO stats | tr -d '\r' |
					grep -E '^(tier_pending_reads|tier_device_reads|tier_reads_per_submit|tier_queue_depth_mean|tier_queue_depth_max|tier_merged_reads|tier_vectored_reads|tier_dedup_hits|sg_pending_per_park|tier_device_submits):' |
					tr '\n' ' '
				echo
			} >>"$work/counters"
		fi
	done
	redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	wait "$SPW_PID" 2>/dev/null || true
	SPW_PID=
}

for store in $STORES; do
	case $store in
	native) sweep native --storage-tier yes --memory "$MEMORY" --page "$PAGE" --index "$INDEX" \
		--device-type native --device-io-backend "$BACKEND" ;;
	localmemory) sweep localmemory --storage-tier yes --memory "$MEMORY" --page "$PAGE" --index "$INDEX" \
		--device-type localmemory --device-completion-threads 0 ;;
	memory) sweep memory --memory 4g --page 32m --index "$INDEX" ;;
	*) die "unknown store $store" ;;
	esac
done

val() { awk -v s="$1" -v g="$2" -v b="$3" -v c="$4" '$1 == s && $2 == g && $3 == b { print $c }' "$work/rows"; }
echo
echo "Machine: $(nproc) CPUs, $(uname -sr). $DBSIZE keys of $KEYLEN+$VALLEN B; native/localmemory:" \
	"--memory $MEMORY --page $PAGE ($BACKEND); spillway-bench -s --op GET -t $THREADS -b B, $RUNTIME s each."
echo
echo "| store | -b | sg-get on GET/s | CPU us/GET | sg-get off GET/s | CPU us/GET | on/off | errors |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for store in $STORES; do
	for b in ${BATCHES//,/ }; do
		on=$(val "$store" yes "$b" 4); onc=$(val "$store" yes "$b" 5); off=$(val "$store" no "$b" 4)
		offc=$(val "$store" no "$b" 5)
		err=$(awk -v s="$store" -v b="$b" '$1 == s && $3 == b { e += $6 } END { print e + 0 }' "$work/rows")
		awk -v s="$store" -v b="$b" -v on="$on" -v onc="$onc" -v off="$off" -v offc="$offc" -v e="$err" 'BEGIN {
			printf "| %s | %s | %.0f | %.2f | %s | %s | %s | %d |\n", s, b, on, onc,
				off == "" ? "" : sprintf("%.0f", off), offc == "" ? "" : sprintf("%.2f", offc),
				off == "" || off == 0 ? "" : sprintf("%.2f", on / off), e }'
	done
done
if [[ " $STORES " == *" localmemory "* && " $STORES " == *" memory "* ]]; then
	echo
	printf 'localmemory / memory GET/s (sg-get on):'
	for b in ${BATCHES//,/ }; do
		awk -v b="$b" -v l="$(val localmemory yes "$b" 4)" -v m="$(val memory yes "$b" 4)" \
			'BEGIN { printf " b=%s %.2f", b, (m > 0 ? l / m : 0) }'
	done
	echo
fi
if [ -s "$work/counters" ]; then
	echo
	echo "Store counters over each sg-get on sweep (tier_pending_reads: GETs that waited on the device):"
	cat "$work/counters"
fi
