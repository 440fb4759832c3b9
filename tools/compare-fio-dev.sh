#!/usr/bin/env bash
# compare-fio-dev.sh - spillway-devbench next to fio on the same file, in the same run.
#
#   tools/compare-fio-dev.sh [DIR]          (default DIR: /tmp/spw-devcmp)
#
# Lays out one file set (DIR/Store/hlog.0, SIZE bytes, through spillway-devbench), then for every
# queue depth in QDS and every engine (io_uring, libaio) runs `fio --direct=1 --ioengine=E
# --rw=randread --bs=4096` and `spillway-devbench --backend E --rw randread --bs 4096` on that file,
# alternating which goes first, ROUNDS times, RUNTIME seconds each (about 5 minutes with the
# defaults; on a virtual disk single runs vary by 5-10%, hence the medians). Prints markdown tables of
# median IOPS, CPU per IO and their ratios (devbench / fio):
#   - "as fio by default": fio's defaults (iodepth_batch_submit=1) against devbench --batch-submit 1;
#   - "batched" (BATCHED=1): fio --iodepth_batch_submit=QD --iodepth_batch_complete_max=QD against
#     devbench --batch-submit 0 (one dev_submit per reap).
# CPU per IO: fio reports its job thread's CPU (RUSAGE_THREAD), so the devbench column beside it is
# its IO thread's CPU too; the whole devbench process (io-wq workers included) is in another column.
# Both sides use O_DIRECT, so the page cache plays no part; uniform random offsets (fio
# --norandommap) on both sides.
#
# Environment: SIZE (1g) RUNTIME (4) QDS ("1 16 64 128") ROUNDS (3) BATCHED (1) BATCHED_ROUNDS (1)
# ENGINES ("uring libaio") BIN (build/bin/spillway-devbench) KEEP (0: remove DIR/Store at the end)
# RAW (a file to keep every run's numbers in: mode engine qd tool iops cpu_thread cpu_process lat p99).
set -euo pipefail

DIR=${1:-/tmp/spw-devcmp}
SIZE=${SIZE:-1g}
RUNTIME=${RUNTIME:-4}
QDS=${QDS:-"1 16 64 128"}
ROUNDS=${ROUNDS:-3}
BATCHED=${BATCHED:-1}
ENGINES=${ENGINES:-"uring libaio"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/bin/spillway-devbench}
KEEP=${KEEP:-0}

command -v fio >/dev/null || { echo "compare-fio-dev: fio is not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "compare-fio-dev: python3 is needed to read fio's JSON" >&2; exit 1; }
[ -x "$BIN" ] || { echo "compare-fio-dev: $BIN not built (cmake --build build --target spillway-devbench)" >&2; exit 1; }

mkdir -p "$DIR"
RES=$(mktemp "${TMPDIR:-/tmp}/compare-fio-dev.XXXXXX")
cleanup() { [ -n "${RAW:-}" ] && cp "$RES" "$RAW"; rm -f "$RES"; if [ "$KEEP" = 0 ]; then rm -rf "$DIR/Store"; fi; }
trap cleanup EXIT

fio_engine() { case $1 in uring) echo io_uring ;; libaio) echo libaio ;; *) echo "$1" ;; esac; }

# Lay out the file set with the first engine that this machine has.
FILE="$DIR/Store/hlog.0"
laid=0
for e in $ENGINES; do
	if "$BIN" --backend "$e" --dir "$DIR" --size "$SIZE" --rw randread --qd 1 --runtime 1 >/dev/null; then
		laid=1
		break
	fi
done
[ "$laid" = 1 ] && [ -f "$FILE" ] || { echo "compare-fio-dev: could not lay out $FILE" >&2; exit 1; }

# run_fio MODE ENGINE QD: one fio run, one result line in $RES.
run_fio() {
	local mode=$1 e=$2 qd=$3 extra=()
	[ "$mode" = batched ] && extra=(--iodepth_batch_submit="$qd" --iodepth_batch_complete_max="$qd")
	fio --name=cmp --filename="$FILE" --size="$SIZE" --direct=1 --ioengine="$(fio_engine "$e")" \
		--rw=randread --bs=4096 --iodepth="$qd" --norandommap --randrepeat=0 \
		--runtime="$RUNTIME" --time_based --output-format=json "${extra[@]}" 2>/dev/null |
	python3 -c '
import json, sys
mode, e, qd = sys.argv[1:4]
j = json.load(sys.stdin)["jobs"][0]
r = j["read"]
ios = max(r["total_ios"], 1)
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1000.0
p99 = r["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1e3
print(mode, e, qd, "fio", round(r["iops"]), "%.3f" % (cpu / ios * 1e6), "%.3f" % (cpu / ios * 1e6),
      "%.1f" % (r["lat_ns"]["mean"] / 1e3), "%.1f" % p99)
' "$mode" "$e" "$qd" >>"$RES"
}

# run_dev MODE ENGINE QD: one spillway-devbench run, one result line in $RES.
run_dev() {
	local mode=$1 e=$2 qd=$3 batch=1
	[ "$mode" = batched ] && batch=0
	"$BIN" --backend "$e" --dir "$DIR" --size "$SIZE" --bs 4096 --qd "$qd" --runtime "$RUNTIME" \
		--rw randread --batch-submit "$batch" | awk -v mode="$mode" -v e="$e" -v qd="$qd" '
		/^RESULT/ {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			print mode, e, qd, "dev", v["iops"], v["thread_cpu_us_per_io"], v["cpu_us_per_io"],
			      v["lat_avg_us"], v["lat_p99_us"]
		}' >>"$RES"
}

MODES="default"
[ "$BATCHED" = 1 ] && MODES="default batched"
n=0
start=$(date +%s)
for mode in $MODES; do
	rounds=$ROUNDS
	[ "$mode" = batched ] && rounds=${BATCHED_ROUNDS:-1}
	for round in $(seq 1 "$rounds"); do
		for qd in $QDS; do
			for e in $ENGINES; do
				n=$((n + 1))
				if [ $((n % 2)) = 0 ]; then
					run_fio "$mode" "$e" "$qd"; run_dev "$mode" "$e" "$qd"
				else
					run_dev "$mode" "$e" "$qd"; run_fio "$mode" "$e" "$qd"
				fi
				echo "  $mode round $round: $e qd $qd done ($(( $(date +%s) - start )) s)" >&2
			done
		done
	done
done

python3 - "$RES" "$RUNTIME" "$ROUNDS" <<'EOF'
import sys, statistics
from collections import defaultdict
res, runtime, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
d = defaultdict(list)
for line in open(res):
    mode, e, qd, tool, iops, tcpu, pcpu, lat, p99 = line.split()
    d[(mode, e, int(qd), tool)].append((float(iops), float(tcpu), float(pcpu), float(lat), float(p99)))
def med(rows, i):
    return statistics.median(r[i] for r in rows)
titles = {
    "default": "as fio runs by default (fio iodepth_batch_submit=1; devbench --batch-submit 1)",
    "batched": "batched (fio --iodepth_batch_submit=QD --iodepth_batch_complete_max=QD; devbench --batch-submit 0)",
}
for mode in ("default", "batched"):
    keys = sorted({(e, qd) for (m, e, qd, t) in d if m == mode}, key=lambda k: (k[0] != "uring", k[1]))
    if not keys:
        continue
    n = len(d[(mode, keys[0][0], keys[0][1], "fio")])
    print(f"\n#### randread 4 KiB, {titles[mode]}; median of {n} x {runtime} s\n")
    print("| engine | QD | fio IOPS | devbench IOPS | IOPS ratio | fio CPU us/IO | devbench CPU us/IO (IO thread) | CPU ratio | devbench process CPU us/IO | fio / devbench avg lat us | fio / devbench p99 us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e, qd in keys:
        f, v = d.get((mode, e, qd, "fio")), d.get((mode, e, qd, "dev"))
        if not f or not v:
            continue
        fi, vi = med(f, 0), med(v, 0)
        fc, vc, vp = med(f, 1), med(v, 1), med(v, 2)
        print(f"| {e} | {qd} | {fi:,.0f} | {vi:,.0f} | {vi / fi:.3f} | {fc:.2f} | {vc:.2f} | {vc / fc:.3f} | {vp:.2f} | "
              f"{med(f, 3):.0f} / {med(v, 3):.0f} | {med(f, 4):.0f} / {med(v, 4):.0f} |")
EOF
