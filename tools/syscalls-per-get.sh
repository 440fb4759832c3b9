#!/usr/bin/env bash
# syscalls-per-get.sh - system calls per device-bound GET (issue 6's "< 0.1 at -b 64"), counted by
# strace on the server process:
#
#   tools/syscalls-per-get.sh [DIR]        (default DIR: /tmp/spw-syscalls)
#
# Starts spillway-server --threads 1 --storage-tier yes with a small --memory (DIR holds its log),
# loads DBSIZE keys (52x memory by default), then for each sg-get setting in SG ("yes yes no")
# attaches `strace -c -f` to the server around one `spillway-bench -s --op GET -t 2 -b BATCH` run
# and prints the calls per GET answered, by system call and in all.
#
# Environment: BACKEND (uring | libaio) DBSIZE (1700000) KEYLEN (8) VALLEN (100) MEMORY (4m)
# PAGE (256k) INDEX (64m) BATCH (64) RUNTIME (4) SG ("yes yes no") SPW_BIN BENCH.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

DIR=${1:-/tmp/spw-syscalls}
BACKEND=${BACKEND:-uring}
DBSIZE=${DBSIZE:-1700000}
KEYLEN=${KEYLEN:-8}
VALLEN=${VALLEN:-100}
MEMORY=${MEMORY:-4m}
PAGE=${PAGE:-256k}
INDEX=${INDEX:-64m}
BATCH=${BATCH:-64}
RUNTIME=${RUNTIME:-4}
SG=${SG:-"yes yes no"}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
BENCH=${BENCH:-build/bin/spillway-bench}

die() { echo "syscalls-per-get.sh: $*" >&2; exit 1; }
command -v strace >/dev/null || die "strace is not installed (apt-get install strace)"
command -v redis-cli >/dev/null || die "redis-cli is not installed (scripts/deps.sh installs it)"
[ -x "$SPW_BIN" ] && [ -x "$BENCH" ] || die "build first: cmake --build build"

work=$(mktemp -d "${TMPDIR:-/tmp}/spw-syscalls.XXXXXX")
SPW_PID=
cleanup() {
	if [ -n "$SPW_PID" ]; then kill "$SPW_PID" 2>/dev/null || true; wait "$SPW_PID" 2>/dev/null || true; fi
	rm -rf "$DIR" "$work"
}
trap cleanup EXIT

PORT=$(free_port) || die "no free loopback port"
mkdir -p "$DIR"
"$SPW_BIN" --bind 127.0.0.1 --port "$PORT" --threads 1 --storage-tier yes --save '' --checkpoint-interval 0 \
	--memory "$MEMORY" --page "$PAGE" \
	--index "$INDEX" --logdir "$DIR" --dir "$DIR" --device-type native --device-io-backend "$BACKEND" \
	>"$work/server.log" 2>&1 &
SPW_PID=$!
wait_pong "$PORT" "$SPW_PID" || { cat "$work/server.log" >&2; die "the server did not start"; }
KEYS=(--dbsize "$DBSIZE" --keylength "$KEYLEN" --valuelength "$VALLEN")
"$BENCH" --port "$PORT" "${KEYS[@]}" -t 2 --runtime 0 --quiet >/dev/null 2>&1 || die "loading failed"

echo "spillway-server --storage-tier yes --memory $MEMORY ($BACKEND), $DBSIZE keys of $KEYLEN+$VALLEN B;" \
	"spillway-bench -s --op GET -t 2 -b $BATCH --runtime $RUNTIME under strace -c -f -p:"
for sg in $SG; do
	redis-cli -p "$PORT" CONFIG SET sg-get "$sg" >/dev/null
	strace -c -f -p "$SPW_PID" -o "$work/strace.txt" 2>/dev/null &
	st=$!
	sleep 0.5
	ops=$("$BENCH" --port "$PORT" "${KEYS[@]}" -s --op GET -t 2 -b "$BATCH" --runtime "$RUNTIME" --quiet 2>&1 |
		awk '$1 == "offline" { print $8 }')
	kill -INT "$st"
	wait "$st" 2>/dev/null || true
	[ -n "$ops" ] && [ "$ops" -gt 0 ] || die "spillway-bench answered no GET"
	# strace -c rows: % time, seconds, usecs/call, calls, [errors], syscall; the last row is "total".
	awk -v ops="$ops" -v sg="$sg" '
		BEGIN { printf "  sg-get %-3s %8d GETs:", sg, ops }
		$NF ~ /^(io_uring_enter|io_submit|io_getevents|read|writev|epoll_wait|epoll_ctl)$/ {
			printf " %s %.4f", $NF, $4 / ops }
		$NF == "total" { tot = $4 }
		END { printf " | all %.4f per GET\n", tot / ops }' "$work/strace.txt"
done
