#!/usr/bin/env bash
# compare-fio.sh - GETs from a device-bound Spillway store next to fio 4 KiB random reads: same file
# system, same queue depth, same run.
#
#   tools/compare-fio.sh [DIR]          (default DIR: /tmp/spw-fiocmp; needs a few GiB free)
#
# 1. Starts spillway-server --threads 1 --storage-tier yes with its log in DIR/spw (native device,
#    O_DIRECT) and a small --memory, and loads FACTOR (50) times --memory of data into it with
#    spillway-bench, so that almost every GET of a uniformly chosen key reads the device.
#    INFO store's TailAddress tells the data's real size; the script stops if it is under FACTOR x
#    --memory.
# 2. Lays out DIR/fio.dat of the same size on the same file system for fio.
# 3. For each queue depth QD in QDS and each round, in alternating order:
#      spillway-bench -s --online --op GET -t 1 --conns-per-thread QD --itp 1   (QD_MODE=conns, default:
#                                              QD connections with one GET in flight each)
#      spillway-bench -s --online --op GET -t 1 --itp QD    (QD_MODE=pipeline: QD GETs pipelined on one
#                                              connection; a parked connection serves them one by one
#                                              until scatter-gather GET (issue 6) sends them together)
#      spillway-bench -s --op GET -t THREADS -b QD           (QD_MODE=batch: the issue-6 sweep; THREADS
#                                              connections, each sending batches of QD pipelined GETs
#                                              and waiting for all their replies; fio then runs
#                                              --numjobs=THREADS --iodepth=QD: the same reads in flight)
#      fio --rw=randread --bs=4096 --direct=1 --iodepth=QD --ioengine=io_uring|libaio
#    and prints the medians: GET/s, IOPS, GET/s / IOPS, p99 of both, and the server's CPU per GET.
# A GET of a record on the device costs at least one device read, so GET/s / IOPS is the fraction of
# the device's random-read rate that the store delivers as answered requests. Records are KEYLEN +
# VALLEN + a 16-byte header; with --initial-io-record-size 4k (INITIAL_IO) one 4 KiB read fetches
# a whole record, the same IO size fio issues.
#
# OP=HGET measures collections larger than memory instead (issue 13): the load writes each of the
# keys as one hash of FIELDS fields of VALLEN bytes (spillway-bench --op HGET --fields), their
# number again chosen so that the records are FACTOR x --memory, and the runs ask HGET of a random
# field of a random key. A small hash is one record, so a cold HGET is one device read, as a GET.
# QD_MODE=split keeps QD requests in flight on CONNS connections (QD / CONNS each), the way a
# client with a few connections pipelines.
# Both OPs also report the device reads per request (INFO tier_device_reads over the runs) and RAM
# per key after the load (INFO used_memory, index_bytes_per_key, the process's VmRSS).
#
# FIO_ONLY=1 runs only the fio half (lays out a file of FACTOR x MEMORY and measures it), to check
# the script and the disk when the storage tier cannot run.
#
# Environment: MEMORY (16m) PAGE (1m) INDEX (32m) KEYLEN (8) VALLEN (1000) FACTOR (50) QDS ("1 16 64")
# QD_MODE (conns | pipeline | split | batch) CONNS (4, split mode) THREADS (2, batch mode)
# OP (GET | HGET) FIELDS (20, HGET) RUNTIME (5 s) ROUNDS (3) BACKEND (uring | libaio: the server's --device-io-backend and fio's engine)
# INITIAL_IO (4k) LOAD_THREADS (2) SPW_BIN (build/bin/spillway-server) BENCH (build/bin/spillway-bench)
# SPW_FLAGS (extra server flags) KEEP (0: remove DIR's data at the end) FIO_ONLY (0).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/lib.sh
. tools/lib.sh

DIR=${1:-/tmp/spw-fiocmp}
MEMORY=${MEMORY:-16m}
PAGE=${PAGE:-1m}
INDEX=${INDEX:-32m}
KEYLEN=${KEYLEN:-8}
VALLEN=${VALLEN:-1000}
FACTOR=${FACTOR:-50}
QDS=${QDS:-"1 16 64"}
RUNTIME=${RUNTIME:-5}
ROUNDS=${ROUNDS:-3}
BACKEND=${BACKEND:-uring}
INITIAL_IO=${INITIAL_IO:-4k}
QD_MODE=${QD_MODE:-conns}
THREADS=${THREADS:-2}
CONNS=${CONNS:-4}
OP=${OP:-GET}
FIELDS=${FIELDS:-20}
case $QD_MODE in
conns | pipeline | split) JOBS=1 ;;
batch) JOBS=$THREADS ;;
*) echo "compare-fio.sh: QD_MODE must be conns, pipeline, split or batch" >&2; exit 1 ;;
esac
case $OP in
GET | HGET) ;;
*) echo "compare-fio.sh: OP must be GET or HGET" >&2; exit 1 ;;
esac
# qd_flags QD: spillway-bench flags that keep QD requests in flight.
qd_flags() {
	case $QD_MODE in
	pipeline) echo "--itp $1" ;;
	split)
		if [ "$1" = QD ]; then echo "--conns-per-thread min($CONNS,QD) --itp QD/$CONNS"; return; fi
		local c=$((CONNS < $1 ? CONNS : $1))
		echo "--conns-per-thread $c --itp $(($1 / c))" ;;
	*) echo "--conns-per-thread $1 --itp 1" ;;
	esac
}
LOAD_THREADS=${LOAD_THREADS:-2}
SPW_BIN=${SPW_BIN:-build/bin/spillway-server}
BENCH=${BENCH:-build/bin/spillway-bench}
SPW_FLAGS=${SPW_FLAGS:-}
KEEP=${KEEP:-0}
FIO_ONLY=${FIO_ONLY:-0}

die() { echo "compare-fio.sh: $*" >&2; exit 1; }
command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
command -v redis-cli >/dev/null || die "redis-cli is not installed (scripts/deps.sh installs it)"
case $BACKEND in
uring) ENGINE=io_uring ;;
libaio) ENGINE=libaio ;;
*) die "BACKEND must be uring or libaio" ;;
esac
if [ "$FIO_ONLY" != 1 ]; then
	[ -x "$SPW_BIN" ] || die "$SPW_BIN not found: cmake --build build --target spillway-server"
	[ -x "$BENCH" ] || die "$BENCH not found: cmake --build build --target spillway-bench"
fi

# Bytes of a size with an optional k/m/g/t suffix (powers of 1024), as spillway-server reads it.
to_bytes() {
	local s=${1,,} n
	n=${s%%[kmgt]*}
	n=${n%b}
	case $s in
	*k*) echo $((n << 10)) ;;
	*m*) echo $((n << 20)) ;;
	*g*) echo $((n << 30)) ;;
	*t*) echo $((n << 40)) ;;
	*) echo "$n" ;;
	esac
}

mkdir -p "$DIR"
work=$(mktemp -d "${TMPDIR:-/tmp}/spw-fiocmp.XXXXXX")
SPW_PID=
cleanup() {
	if [ -n "$SPW_PID" ]; then
		kill "$SPW_PID" 2>/dev/null || true
		wait "$SPW_PID" 2>/dev/null || true
	fi
	if [ "$KEEP" = 0 ]; then rm -rf "$DIR/spw" "$DIR/fio.dat"; fi
	rm -rf "$work"
}
trap cleanup EXIT


# info_field FIELD [SECTION]: one INFO field (section store unless given).
info_field() {
	redis-cli -h 127.0.0.1 -p "$PORT" INFO "${2:-store}" | tr -d '\r' | awk -F: -v f="$1" '$1 == f { print $2 }'
}

MEM_BYTES=$(to_bytes "$MEMORY")
if [ "$OP" = HGET ]; then
	# A hash's record, at least: its listpack (7 bytes, then per field "f<n>" and the value, each with
	# a 1-byte encoding and a 1-byte back length) after key and header. The load's real size is
	# checked below; this only sizes it.
	REC=$((KEYLEN + 16 + 7))
	for ((f = 0; f < FIELDS; f++)); do REC=$((REC + ${#f} + 3 + VALLEN + 2)); done
else
	REC=$((KEYLEN + VALLEN + 16))
fi
DBSIZE=$(((FACTOR * MEM_BYTES + REC - 1) / REC))
DATA_BYTES=$((DBSIZE * REC))

# ---- 1. the store ----
if [ "$FIO_ONLY" != 1 ]; then
	rm -rf "$DIR/spw"   # a fresh store: a start recovers whatever a folder holds
	mkdir -p "$DIR/spw"
	for _ in 1 2 3; do
		PORT=$(free_port)
		# shellcheck disable=SC2086
		"$SPW_BIN" --bind 127.0.0.1 --port "$PORT" --threads 1 --dir "$DIR/spw" --storage-tier yes \
			--save '' --checkpoint-interval 0 \
			--logdir "$DIR/spw" --memory "$MEMORY" --page "$PAGE" --index "$INDEX" --device-type native \
			--device-io-backend "$BACKEND" --initial-io-record-size "$INITIAL_IO" $SPW_FLAGS \
			>"$work/server.log" 2>&1 &
		SPW_PID=$!
		up=0
		for _ in $(seq 1 200); do
			if [ "$(redis-cli -h 127.0.0.1 -p "$PORT" PING 2>/dev/null)" = PONG ]; then up=1; break; fi
			kill -0 "$SPW_PID" 2>/dev/null || break
			sleep 0.05
		done
		[ "$up" = 1 ] && break
		kill -0 "$SPW_PID" 2>/dev/null && break
	done
	if [ "$up" != 1 ]; then
		cat "$work/server.log" >&2
		die "spillway-server --storage-tier yes did not start (FIO_ONLY=1 runs the fio half alone)"
	fi
	KEYS=(--dbsize "$DBSIZE" --keylength "$KEYLEN" --valuelength "$VALLEN")
	SHAPE="$KEYLEN+$VALLEN B"
	if [ "$OP" = HGET ]; then
		KEYS+=(--fields "$FIELDS")
		SHAPE="$KEYLEN B, hashes of $FIELDS fields of $VALLEN B"
	fi
	echo "compare-fio.sh: loading $DBSIZE keys ($SHAPE) into spillway-server --memory $MEMORY" \
		"(--storage-tier yes, $BACKEND, log in $DIR/spw)"
	"$BENCH" --port "$PORT" "${KEYS[@]}" --op "$OP" -t "$LOAD_THREADS" --runtime 0 --quiet >"$work/load.out" 2>&1 ||
		{ cat "$work/load.out" >&2; die "loading failed"; }
	load_rate=$(awk '$1 == "load" { print $10 }' "$work/load.out")
	tail=$(info_field Log.TailAddress)
	begin=$(info_field Log.BeginAddress)
	maxmem=$(info_field Log.MaxMemorySizeBytes)
	tier=$(info_field Log.StorageTier)
	if [ -z "$tail" ] || [ -z "$maxmem" ]; then
		die "INFO store has no Log.TailAddress / Log.MaxMemorySizeBytes"
	fi
	DATA_BYTES=$((tail - begin))
	ratio=$(awk -v d="$DATA_BYTES" -v m="$maxmem" 'BEGIN { printf "%.1f", d / m }')
	echo "  store: $((DATA_BYTES >> 20)) MiB of records, ${ratio}x the in-memory log ($((maxmem >> 20)) MiB);" \
		"device: ${tier:-?}; HeadAddress $(info_field Log.HeadAddress)"
	awk -v d="$DATA_BYTES" -v m="$maxmem" -v f="$FACTOR" 'BEGIN { exit !(d >= f * m) }' ||
		die "the data is only ${ratio}x --memory, not ${FACTOR}x: raise FACTOR or VALLEN"
	nkeys=$(redis-cli -h 127.0.0.1 -p "$PORT" DBSIZE)
	rss=$(awk '$1 == "VmRSS:" { print $2 * 1024 }' "/proc/$SPW_PID/status")
	PERKEY=$(awk -v k="$nkeys" -v u="$(info_field used_memory memory)" -v r="$rss" -v d="$DATA_BYTES" \
		-v i="$(info_field index_bytes_per_key memory)" 'BEGIN { printf "%d keys, %.0f B of log each;" \
		" RAM per key: used_memory %.1f B, index %.1f B, process RSS %.1f B", k, d / k, u / k, i, r / k }')
	echo "  $PERKEY; load: ${load_rate:-?} keys/s"
fi

# ---- 2. fio's file, the same size, on the same file system ----
FIO_SIZE=$(( (DATA_BYTES + (1 << 20) - 1) >> 20 ))m
echo "compare-fio.sh: fio file $DIR/fio.dat, $FIO_SIZE ($ENGINE, O_DIRECT, 4 KiB random reads)"
fio --name=layout --filename="$DIR/fio.dat" --size="$FIO_SIZE" --rw=write --bs=1m --direct=1 \
	--ioengine="$ENGINE" --iodepth=4 --output-format=terse >/dev/null || die "fio could not lay out $DIR/fio.dat"

: >"$work/results"
# run_fio QD ROUND: "fio QD iops p99_us -"
run_fio() {
	local qd=$1 out
	out=$(fio --name=cmp --filename="$DIR/fio.dat" --size="$FIO_SIZE" --direct=1 --ioengine="$ENGINE" \
		--rw=randread --bs=4096 --iodepth="$qd" --numjobs="$JOBS" --group_reporting --norandommap --randrepeat=0 --runtime="$RUNTIME" \
		--time_based --output-format=terse --terse-version=3 2>/dev/null) || die "fio failed at QD $qd"
	# terse v3: field 8 = read IOPS, field 30 = read clat p99 ("99.000000%=<usec>").
	awk -F';' -v qd="$qd" '{ split($30, p, "="); print "fio", qd, $8, p[2], "nan" }' <<<"$out" >>"$work/results"
}
# run_bench QD: "spw QD get_per_s p99_us cpu_us_per_get", and "reads QD device_reads ops"
run_bench() {
	local qd=$1 csv="$work/bench.csv" line r0
	local mode=(--online --op "$OP" -t 1)
	# shellcheck disable=SC2207
	if [ "$QD_MODE" = batch ]; then mode=(--op "$OP" -t "$THREADS" -b "$qd"); else mode+=($(qd_flags "$qd")); fi
	r0=$(info_field tier_device_reads stats)
	"$BENCH" --port "$PORT" "${KEYS[@]}" -s "${mode[@]}" --runtime "$RUNTIME" --quiet \
		--server-pid "$SPW_PID" --csv "$csv" >"$work/bench.out" 2>&1 ||
		{ cat "$work/bench.out" >&2; die "spillway-bench failed at QD $qd (reply check or connection)"; }
	line=$(tail -n 1 "$csv" | sed 's/"[^"]*"/OP/')
	awk -F, -v qd="$qd" '{ print "spw", qd, $10, $16, ($23 == "" ? "nan" : $23) }' <<<"$line" >>"$work/results"
	awk -F, -v qd="$qd" -v r="$(($(info_field tier_device_reads stats) - r0))" '{ print "reads", qd, r, $8 }' \
		<<<"$line" >>"$work/results"
}

# Warm-up (discarded): the first runs pay for cold caches and file extents.
if [ "$FIO_ONLY" != 1 ]; then
	"$BENCH" --port "$PORT" "${KEYS[@]}" -s --online --op "$OP" -t 1 --itp 16 --runtime 1 --quiet >/dev/null 2>&1 ||
		die "spillway-bench $OP warm-up failed"
fi
fio --name=warm --filename="$DIR/fio.dat" --size="$FIO_SIZE" --direct=1 --ioengine="$ENGINE" --rw=randread \
	--bs=4096 --iodepth=16 --runtime=1 --time_based --output-format=terse >/dev/null 2>&1 || true

n=0
for round in $(seq 1 "$ROUNDS"); do
	for qd in $QDS; do
		n=$((n + 1))
		if [ "$FIO_ONLY" = 1 ]; then
			run_fio "$qd"
		elif [ $((n % 2)) = 1 ]; then
			run_bench "$qd"; run_fio "$qd"
		else
			run_fio "$qd"; run_bench "$qd"
		fi
		echo "  round $round, QD $qd: $(grep -vc '^reads' "$work/results") runs done" >&2
	done
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v t="$1" -v q="$2" -v c="$3" '$1 == t && $2 == q && $c != "nan" { print $c }' "$work/results" | median; }

echo
echo "Machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(uname -sr);" \
	"file system: $(df -T "$DIR" | awk 'NR == 2 { print $2 " on " $1 }'); fio $(fio --version | sed 's/^fio-//')"
if [ "$FIO_ONLY" = 1 ]; then
	echo "fio --rw=randread --bs=4096 --direct=1 --ioengine=$ENGINE --iodepth=QD on $DIR/fio.dat ($FIO_SIZE)," \
		"medians of $ROUNDS x $RUNTIME s (FIO_ONLY: no Spillway runs):"
	echo
	echo "| QD | fio IOPS | fio p99 us |"
	echo "|---:|---:|---:|"
	for qd in $QDS; do
		printf '| %s | %.0f | %.0f |\n' "$qd" "$(col fio "$qd" 3)" "$(col fio "$qd" 4)"
	done
	exit 0
fi
echo "Store: spillway-server --threads 1 --storage-tier yes --memory $MEMORY --page $PAGE --index $INDEX" \
	"--device-type native --device-io-backend $BACKEND --initial-io-record-size $INITIAL_IO; $DBSIZE keys" \
	"($SHAPE; $((DATA_BYTES >> 20)) MiB, ${ratio}x memory); $PERKEY."
if [ "$QD_MODE" = batch ]; then
	echo "${OP}s: spillway-bench -s --op $OP -t $THREADS -b QD (uniform keys). fio: --rw=randread --bs=4096" \
		"--direct=1 --ioengine=$ENGINE --numjobs=$THREADS --iodepth=QD on $DIR/fio.dat ($FIO_SIZE). Medians of" \
		"$ROUNDS x $RUNTIME s, alternating which runs first; QD per client thread / fio job:"
else
	echo "${OP}s: spillway-bench -s --online --op $OP -t 1 $(qd_flags QD) (uniform keys). fio: --rw=randread" \
		"--bs=4096 --direct=1 --ioengine=$ENGINE --iodepth=QD on $DIR/fio.dat ($FIO_SIZE). Medians of" \
		"$ROUNDS x $RUNTIME s, alternating which runs first:"
fi
echo
echo "| QD | Spillway $OP/s | fio IOPS | $OP/s / IOPS | Spillway p99 us | fio p99 us | server CPU us/$OP |" \
	"device reads per $OP |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for qd in $QDS; do
	g=$(col spw "$qd" 3)
	i=$(col fio "$qd" 3)
	rpo=$(awk -v q="$qd" '$1 == "reads" && $2 == q { r += $3; n += $4 } END { printf "%.3f", n ? r / n : 0 }' \
		"$work/results")
	awk -v qd="$qd" -v g="$g" -v i="$i" -v gp="$(col spw "$qd" 4)" -v ip="$(col fio "$qd" 4)" -v c="$(col spw "$qd" 5)" \
		-v rpo="$rpo" 'BEGIN { printf "| %s | %.0f | %.0f | %.3f | %.0f | %.0f | %.2f | %s |\n", qd, g, i,
		(i > 0 ? g / i : 0), gp, ip, c, rpo }'
done
