#!/usr/bin/env bash
# deps.sh - install the Debian 12 packages Spillway needs to build and test; installs only what is
# missing, and runs apt-get update only when something is. Works as root, or through sudo.
#
#   build:      build-essential cmake pkg-config liburing-dev libaio-dev libxxhash-dev libzstd-dev
#   codecs:     liblzf-dev (the LZF compression of Redis's RDB strings: DUMP/RESTORE, --import-rdb)
#   tests:      libcmocka-dev, python3-redis (the randomized differential test's client, run by
#               Debian's /usr/bin/python3), redis-server and redis-tools (the reference the
#               integration tests and tools/bench-redis.sh compare against), procps (ps/pgrep)
set -euo pipefail

PKGS=(build-essential cmake pkg-config liburing-dev libaio-dev libxxhash-dev libzstd-dev
      liblzf-dev libcmocka-dev python3-redis redis-server redis-tools procps gnuplot-nox)

missing=()
for p in "${PKGS[@]}"; do
	# dpkg -s also knows removed packages whose config files remain: look at the Status line.
	if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "deps.sh: missing packages: ${missing[*]}; run as root or install sudo" >&2
		exit 1
	fi
	SUDO=(sudo)
fi

echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive

# Installing redis-server would start a system redis on port 6379, the port scripts/run.sh serves
# on. Keep services from starting during this install (policy-rc.d exit 101 = "not allowed"), but
# only when no policy exists already, and remove ours afterwards.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
	"${SUDO[@]}" chmod 755 "$policy"
	own_policy=1
fi
cleanup() {
	if [ "$own_policy" -eq 1 ]; then
		"${SUDO[@]}" rm -f "$policy"
	fi
}
trap cleanup EXIT

"${SUDO[@]}" apt-get update -q </dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
