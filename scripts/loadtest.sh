#!/usr/bin/env bash
# Load profiles of the issues, direct vs through the proxy, on loopback only. Each proxy
# configuration is started fresh (its peak RSS and CPU are per configuration). Needs
# redis-server for the Redis rows; a private one is started on a free port.
# Usage: scripts/loadtest.sh [profile...]   profiles: c1 c100 c50 (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/demo-agent ./cmd/agui-proxy ./cmd/agui-bench
profiles=${*:-c1 c100 c50}
agent_port=18700; proxy_port=18701; redis_port=18702
DEMO_LISTEN=127.0.0.1:$agent_port DEMO_LOG_LEVEL=warn ./bin/demo-agent & agent=$!
redis-server --port $redis_port --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null & redis=$!
trap 'kill $agent $redis 2>/dev/null; [ -n "${px:-}" ] && kill $px 2>/dev/null; wait 2>/dev/null' EXIT
sleep 1
args() {
  case $1 in
    c1) echo "-c 1 -events 2000 -interval 1ms" ;;
    c100) echo "-c 100 -events 200 -interval 5ms" ;;
    c50) echo "-c 50 -events 10000 -interval 0" ;;
  esac
}
run_proxy() { # name, env...
  local name=$1; shift
  env AGUI_UPSTREAM=http://127.0.0.1:$agent_port AGUI_LISTEN=127.0.0.1:$proxy_port AGUI_LOG_LEVEL=warn \
    AGUI_RECORDER_BUFFER=1000000 "$@" ./bin/agui-proxy & px=$!
  sleep 1
}
for p in $profiles; do
  echo "== profile $p: direct"
  ./bin/agui-bench -url http://127.0.0.1:$agent_port/ $(args $p) -pid $agent
  for cfg in "memory" "norecord AGUI_RECORD=false" "redis-async AGUI_REDIS_URL=redis://127.0.0.1:$redis_port/0" \
             "redis-sync AGUI_REDIS_URL=redis://127.0.0.1:$redis_port/0 AGUI_DURABILITY=sync"; do
    set -- $cfg; name=$1; shift
    run_proxy "$name" "$@"
    echo "== profile $p: proxy $name"
    ./bin/agui-bench -url http://127.0.0.1:$proxy_port/ $(args $p) -pid $px
    kill $px; wait $px 2>/dev/null || true; px=
    redis-cli -p $redis_port flushall >/dev/null
  done
done
