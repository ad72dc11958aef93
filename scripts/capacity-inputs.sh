#!/usr/bin/env bash
# Redis memory per stored thread, through the real proxy (deploy/README.md, "Capacity plan"):
# a private redis-server, the demo agent and agui-proxy on loopback; for each EVENTS value,
# agui-bench runs THREADS one-run threads of that many ~200-byte events (the bench scenario)
# through the proxy, waits for the checkpoints, and reads INFO memory used_memory before and
# after. Prints bytes per thread and per event, and the Redis commands and network per event.
# Then a paced phase: SOAK_C streams of SOAK_EVENTS events SOAK_INTERVAL apart (opened over
# 20 s), with the proxy's CPU per event and RSS per stream, and Redis's CPU per event (INFO cpu
# before and after).
#
# Usage: scripts/capacity-inputs.sh
# Environment: THREADS (default 500), EVENTS (default "20 100 500"; "" skips), SOAK_C (default
# 2000; 0 skips), SOAK_EVENTS (default 60), SOAK_INTERVAL (default 1s)
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/demo-agent ./cmd/agui-proxy ./cmd/agui-bench
threads=${THREADS:-500}
agent_port=18710; proxy_port=18711; redis_port=18712
redis-server --port $redis_port --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null & redis=$!
DEMO_LISTEN=127.0.0.1:$agent_port DEMO_LOG_LEVEL=warn ./bin/demo-agent & agent=$!
AGUI_UPSTREAM=http://127.0.0.1:$agent_port AGUI_LISTEN=127.0.0.1:$proxy_port AGUI_LOG_LEVEL=error \
  AGUI_REDIS_URL=redis://127.0.0.1:$redis_port/0 ./bin/agui-proxy & px=$!
trap 'kill $px $agent $redis 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$proxy_port/healthz" >/dev/null 2>&1 && break; sleep 0.2; done
used() { redis-cli -p $redis_port info memory | tr -d '\r' | sed -n 's/^used_memory://p'; }
for events in ${EVENTS-20 100 500}; do
  redis-cli -p $redis_port flushall >/dev/null
  sleep 1
  before=$(used)
  ./bin/agui-bench -url "http://127.0.0.1:$proxy_port/" -c "$threads" -events "$events" -interval 1ms \
    -redis 127.0.0.1:$redis_port -json >bin/capacity-$events.json
  # Checkpoints are written after each run's end: wait until the key count settles.
  keys=-1
  for _ in $(seq 60); do
    sleep 1
    now=$(redis-cli -p $redis_port dbsize)
    [ "$now" = "$keys" ] && break
    keys=$now
  done
  after=$(used)
  jq -r --argjson b "$before" --argjson a "$after" --argjson t "$threads" --argjson e "$events" --argjson k "$keys" \
    '"events/thread \($e): \((($a-$b)/$t)|floor) B/thread, \((($a-$b)/$t/($e+2))|floor) B/event (\($k) keys) | runs \(.runs_completed)/\(.runs) | redis \(.redis.commands_per_event*1000|floor/1000) cmd/event, \(.redis.net_bytes_per_event|floor) B/event on the wire"' \
    bin/capacity-$events.json
done
soak_c=${SOAK_C:-2000}
if [ "$soak_c" -gt 0 ]; then
  ulimit -n "$(ulimit -Hn)"
  redis-cli -p $redis_port flushall >/dev/null
  rcpu() { redis-cli -p $redis_port info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {t += $2} END {printf "%.3f", t}'; }
  c0=$(rcpu)
  ./bin/agui-bench -url "http://127.0.0.1:$proxy_port/" -c "$soak_c" -events "${SOAK_EVENTS:-60}" -interval "${SOAK_INTERVAL:-1s}" -ramp 20s -duration 5m \
    -pid $px -redis 127.0.0.1:$redis_port -json >bin/capacity-soak.json
  c1=$(rcpu)
  jq -r --argjson c0 "$c0" --argjson c1 "$c1" \
    '"paced \(.runs) streams x \(.events/.runs|floor) events: runs \(.runs_completed)/\(.runs) | proxy \(.target.cpu_us_per_event|floor) us CPU/event, \(.target.rss_per_stream_bytes/1024|floor) KiB RSS/stream (peak \(.target.peak_rss_bytes/1048576|floor) MiB) | redis \((($c1-$c0)/.events*1e6)|floor) us CPU/event, \(.redis.commands_per_event*1000|floor/1000) cmd/event, \(.redis.net_bytes_per_event|floor) B/event on the wire | p99 \(.latency.p99_ms) ms"' \
    bin/capacity-soak.json
fi
