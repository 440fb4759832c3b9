#!/bin/bash
# sweep-sg.sh: the issue-6 sweep on one machine, one run: uring store (sg on/off), localmemory store, in-memory store.
B=build/bin; N=6765007; K="--dbsize $N --keylength 8 --valuelength 100"
run() { # name port flags...
  local name=$1 port=$2; shift 2
  rm -rf /tmp/sw && mkdir -p /tmp/sw
  $B/spillway-server --port $port --threads 1 --logdir /tmp/sw --dir /tmp/sw "$@" >/tmp/sw.log 2>&1 &
  local pid=$!; sleep 1
  $B/spillway-bench -p $port $K --runtime 0 -t 2 --quiet >/dev/null 2>&1
  for sg in yes no; do
    [ "$name" = memory ] && [ $sg = no ] && continue
    redis-cli -p $port config set sg-get $sg >/dev/null 2>&1
    $B/spillway-bench -p $port $K -s --op GET -t 2 -b 1,16,64,256 --runtime 3 --server-pid $pid --quiet 2>&1 | awk -v n="$name" -v sg=$sg '$1=="offline"{printf "%s sg=%s b=%s %s GET/s srv_us/op=%s errors=%s\n", n, sg, $4, $10, $16, $14}'
  done
  redis-cli -p $port info stats | grep -E "tier_reads_per_submit|tier_queue_depth_mean|sg_pending_per_park|tier_merged_reads|tier_dedup_hits" | tr '\r\n' '  '; echo
  redis-cli -p $port shutdown nosave >/dev/null 2>&1; wait $pid 2>/dev/null
}
run uring 7341 --storage-tier yes --memory 16m --page 1m --index 64m --device-type native --device-io-backend uring
run localmemory 7342 --storage-tier yes --memory 16m --page 1m --index 64m --device-type localmemory --device-completion-threads 0
run memory 7343 --memory 2g --page 32m --index 64m
