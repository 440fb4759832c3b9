#!/usr/bin/env bash
# run.sh - install what is missing, build, and run spillway-server in the foreground on
# 127.0.0.1:6379 with the storage tier on, the AOF on (everysec), checkpoints every 300 s and at
# shutdown, and its data in ./data. Extra arguments go to the server
# (scripts/run.sh --threads 4); PORT=6380 scripts/run.sh picks another port. Stop it with Ctrl-C
# (SIGINT) or redis-cli shutdown.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target spillway-server
mkdir -p data

port=${PORT:-6379}
# A system redis-server (started when its Debian package was installed) may hold the port already.
if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
	echo "run.sh: port $port is already in use (a system redis-server? 'service redis-server stop')," >&2
	echo "        or choose another port: PORT=6380 scripts/run.sh" >&2
	exit 1
fi
# --storage-tier: the log spills to segment files in ./data/Store, so the data set may be far larger
# than --memory (the in-memory window of the log). --aof yes --aof-fsync everysec: every write goes
# to ./data/appendonlydir, synced once a second; checkpoints (./data/checkpoint.<n>.*) every 300 s
# when something changed and at shutdown; a restart recovers both.
exec build/bin/spillway-server --bind 127.0.0.1 --port "$port" --dir ./data --logdir ./data --storage-tier \
	--aof yes --aof-fsync everysec "$@"
