# lib.sh - shell helpers the tools/ scripts share (sourced, not run).

# free_port: a loopback TCP port nobody listens on right now, on stdout; 1 when none was found.
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "no free loopback port found" >&2
	return 1
}

# wait_pong PORT PID: wait (10 s at most) until the server PID answers PING on PORT; 1 when it
# exited or never answered.
wait_pong() {
	for _ in $(seq 1 200); do
		[ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = PONG ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# wait_ready PORT PID: until PING answers PONG (not -LOADING); 1 when the process died.
wait_ready() {
	while :; do
		[ "$(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null)" = PONG ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.01
	done
}

PIDS=()
spw_cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap spw_cleanup EXIT

# spw_start DIR PORT FLAGS...: starts spillway-server ($BIN, $THREADS workers, no checkpoints of its
# own) in the background; sets PID. Every server started so is killed when the script exits.
spw_start() {
	local dir=$1 port=$2
	shift 2
	"$BIN/spillway-server" --bind 127.0.0.1 --port "$port" --dir "$dir" --logdir "$dir" \
		--threads "$THREADS" --save "" --checkpoint-interval 0 "$@" >>"$dir/server.log" 2>&1 &
	PID=$!
	PIDS+=("$PID")
}
