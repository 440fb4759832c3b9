#!/usr/bin/env bash
# test.sh - install what is missing, then build and run the whole test suite twice:
#   1. build/       RelWithDebInfo
#   2. build-asan/  RelWithDebInfo with AddressSanitizer + UndefinedBehaviorSanitizer (-DSPW_SANITIZE=ON);
#                   leaks, memory errors and undefined behaviour abort the process that has them.
# Both passes always run; the exit status is non-zero if either fails to build or has a failing test.
# JOBS=N sets build and ctest parallelism (default: 2, what CI has).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
jobs=${JOBS:-2}
logdir=$(mktemp -d "${TMPDIR:-/tmp}/spw-test.XXXXXX")
trap 'rm -rf "$logdir"' EXIT

# run_pass NAME DIR CMAKE-ARGS...: configure, build, ctest; ctest's output is also kept for the summary.
run_pass() {
	local name=$1 dir=$2
	shift 2
	echo "==== $name: configure and build in $dir/"
	if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$logdir/$name.cmake" 2>&1; then
		cat "$logdir/$name.cmake"
		echo "$name: cmake configure FAILED" >"$logdir/$name.summary"
		return 1
	fi
	if ! cmake --build "$dir" -j"$jobs" >"$logdir/$name.build" 2>&1; then
		grep -E 'error|Error' "$logdir/$name.build" | head -50 || true
		echo "$name: build FAILED (see the errors above)" >"$logdir/$name.summary"
		return 1
	fi
	grep -E 'warning:' "$logdir/$name.build" | sort -u || true
	echo "==== $name: ctest in $dir/"
	local rc=0
	(cd "$dir" && ctest -j"$jobs" --output-on-failure --timeout 300) 2>&1 | tee "$logdir/$name.ctest" || rc=$?
	# A failing pipeline status comes from ctest (tee does not fail).
	{
		echo "$name:"
		grep -E 'tests passed|tests failed|Total Test time|\(Failed\)|\(SEGFAULT\)|\(Subprocess aborted\)|\(Timeout\)|\(Not Run\)|\(Skipped\)|^\s+[0-9]+ - ' \
			"$logdir/$name.ctest" | sed 's/^/  /' || true
	} >"$logdir/$name.summary"
	return "$rc"
}

status=0
run_pass normal build || status=1

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_pass asan build-asan -DSPW_SANITIZE=ON || status=1

echo
echo "==== summary"
cat "$logdir/normal.summary" "$logdir/asan.summary" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
	echo "test.sh: FAILED"
else
	echo "test.sh: all tests passed in both builds"
fi
exit "$status"
