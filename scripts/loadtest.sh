#!/usr/bin/env bash
# Load profiles, on loopback only: the demo agent direct, a plain httputil.ReverseProxy
# (agui-bench -plain-proxy), nginx when installed, and agui-proxy in each configuration of
# $CONFIGS. Every proxy is started fresh per profile, so its peak RSS and CPU are that
# profile's. A private redis-server is started on a free port for the Redis configurations.
#
# Usage: scripts/loadtest.sh [profile...]
#   c1        1 stream, 2,000 events at 1 ms
#   c100      100 streams × 200 events at 5 ms
#   c50       50 streams × 10,000 events, no pause (throughput; every event recorded)
#   soak      $SOAK_C streams (default 9,900) × 60 events at 1 s, opened over 20 s
#   chat      2,000 streams × 600 events at 20 ms, opened over 10 s (~55,000 events/s): a chat
#             deployment's token streams, where recording must keep up without delaying tokens
#   turns     100 streams × 20 runs each, one after another (a chat client's next run as soon
#             as the last ended), 20 events at 5 ms: run starts, and connections kept or not
#   thread    1 stream × 1,000 runs on one thread, 20 events each, no pause, each POST carrying
#             the thread's messages so far as a chat client's (agui-bench -history): how a run's
#             cost and its first event grow with the thread (last_runs_first_event: the last 100)
#   threadnew the thread profile with each POST carrying only its new user message, as a client
#             that keeps no history (agui-bench -history-new): the proxy hydrates each request
#             from the stored thread (the agent behind a baseline gets the one message)
#   fanout1   1 run × 1,000 attachers (run attach), 60 events at 1 s
#   fanout5   1,000 runs × 5 attachers each
#   fanout2r  fanout5 with the attachers on a second replica on the same Redis
#   follow    200 threads × 10 idle ?follow=1 followers once their 5-event run ended (memory per
#             idle follower: VmRSS, and heap and stack from the proxy's pprof after forced GCs),
#             then one more run per thread that must reach every follower
# Default: c1 c100 c50. Environment: CONFIGS (default "redis-async memory"; also norecord,
# redis-sync, disk: the embedded store in $OUT/disk, emptied per proxy), OUT (directory for the
# JSON reports, default bin/loadtest), SOAK_C, PROXY_BIN (the agui-proxy binary, default the
# one built from this tree), BASELINES=0 (only the agui-proxy configurations: the direct agent,
# the plain proxy and nginx are left out, to compare builds or settings of agui-proxy alone).
# The proxy holds 2 descriptors per stream: the soak needs `ulimit -n` above 2 × SOAK_C; the
# script raises the soft limit to the hard one.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/demo-agent ./cmd/agui-proxy ./cmd/agui-bench
ulimit -n "$(ulimit -Hn)"
profiles=${*:-c1 c100 c50}
configs=${CONFIGS:-redis-async memory}
out=${OUT:-bin/loadtest}
soak_c=${SOAK_C:-9900}
proxy_bin=${PROXY_BIN:-./bin/agui-proxy} # another build of agui-proxy, to compare two in one run
mkdir -p "$out"
agent_port=18700; proxy_port=18701; redis_port=18702; plain_port=18703; nginx_port=18704; replica_port=18705; pprof_port=18706
DEMO_LISTEN=127.0.0.1:$agent_port DEMO_LOG_LEVEL=warn ./bin/demo-agent & agent=$!
redis-server --port $redis_port --bind 127.0.0.1 --save "" --appendonly no --daemonize no --maxclients 20000 >/dev/null & redis=$!
px=; px2=
cleanup() {
  local q
  for q in $px $px2 $agent $redis; do kill "$q" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
sleep 1

args() {
  case $1 in
    c1) echo "-c 1 -events 2000 -interval 1ms" ;;
    c100) echo "-c 100 -events 200 -interval 5ms" ;;
    c50) echo "-c 50 -events 10000 -interval 0" ;;
    soak) echo "-c $soak_c -events 60 -interval 1s -ramp 20s -duration 5m" ;;
    chat) echo "-c 2000 -events 600 -interval 20ms -ramp 10s -duration 5m" ;;
    turns) echo "-c 100 -runs 20 -events 20 -interval 5ms -duration 5m" ;;
    thread) echo "-c 1 -runs 1000 -events 20 -interval 0 -history -duration 10m" ;;
    threadnew) echo "-c 1 -runs 1000 -events 20 -interval 0 -history -history-new -duration 10m" ;;
    fanout1) echo "-c 1 -attach 1000 -events 60 -interval 1s -ramp 10s" ;;
    fanout5|fanout2r) echo "-c 1000 -attach 5 -events 60 -interval 1s -ramp 15s -duration 5m" ;;
    follow) echo "-c 200 -follow 10 -events 5 -interval 0 -duration 5m -pprof-url http://127.0.0.1:$pprof_port" ;;
    *) echo "unknown profile $1" >&2; exit 2 ;;
  esac
}

start_proxy() { # port, env... ; sets px (or px2 for the replica port)
  local port=$1; shift
  env AGUI_UPSTREAM=http://127.0.0.1:$agent_port AGUI_LISTEN=127.0.0.1:$port AGUI_LOG_LEVEL=error "$@" "$proxy_bin" 2>>"$out/proxy-errors.log" &
  if [ "$port" = "$replica_port" ]; then px2=$!; else px=$!; fi
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return; sleep 0.2; done
}

stop_proxies() {
  local q
  for q in $px $px2; do kill "$q" 2>/dev/null || true; wait "$q" 2>/dev/null || true; done
  px=; px2=
  redis-cli -p $redis_port flushall >/dev/null
}

bench() { # name profile url pid [extra...]
  local name=$1 p=$2 url=$3 pid=$4; shift 4
  echo "== profile $p: $name"
  ./bin/agui-bench -url "$url" $(args "$p") -pid "$pid" -agent-pid "$agent" -redis 127.0.0.1:$redis_port -json "$@" >"$out/$p-$name.json" || true
  jq -r '"runs \(.runs_completed)/\(.runs) refused \(.refused) cut \(.cut) | p50 \(.latency.p50_ms)ms p99 \(.latency.p99_ms)ms first-event p99 \(.time_to_first_event.p99_ms)ms | " +
    (if .next_run_first_event then "next-run first event p50 \(.next_run_first_event.p50_ms)ms p99 \(.next_run_first_event.p99_ms)ms, \(.dials_per_run*100|floor/100) connections per run | " else "" end) +
    (if .history then "last tenth of runs: first event p50 \(.last_runs_first_event.p50_ms)ms p99 \(.last_runs_first_event.p99_ms)ms, cpu \(if .target then (.target.cpu_us_per_event*.events/.runs_completed/1000*100|floor/100) else "-" end)ms/run | " else "" end) +
    (if .latency_by_phase then "p99 by phase: opening \(.latency_by_phase.opening.p99_ms)ms steady \(.latency_by_phase.steady.p99_ms)ms closing \(.latency_by_phase.closing.p99_ms)ms | " else "" end) +
    (if .target then "cpu \(.target.cpu_us_per_event|floor)us/event rss \(.target.rss_per_stream_bytes/1024|floor)KiB/stream peak \(.target.peak_rss_bytes/1048576|floor)MiB fds \(.target.peak_fds) | " else "" end) +
    "redis \(.redis.commands_per_event // 0 | .*1000|floor/1000) cmd/event \(.redis.net_bytes_per_event // 0 | floor) B/event \(.redis.cpu_us_per_event // 0 | .*10|floor/10)us/event | \(.events_per_second|floor) ev/s" +
    (if .cpu_budget then " | machine cpu/event: agent \(.cpu_budget.agent_us_per_event*10|floor/10) + bench \(.cpu_budget.client_us_per_event*10|floor/10) + target \(.cpu_budget.target_us_per_event*10|floor/10) + redis \(.cpu_budget.redis_us_per_event*10|floor/10) = \(.cpu_budget.total_us_per_event*10|floor/10)us, \(.cpu_budget.busy*100|floor)% of \(.cpu_budget.cores) cores busy, allows \(.cpu_budget.ceiling_events_per_second|floor) ev/s" else "" end) +
    (if .fanout then " | fan-out \(.fanout.completed)/\(.fanout.attachers) \(.fanout.rss_per_attacher_bytes/1024|floor)KiB/attacher redis \(.fanout.redis_commands_per_live_event*100|floor/100) cmd/event once attached \(.fanout.cpu_us_per_delivered_event*100|floor/100)us/delivered p99 \(.fanout.latency.p99_ms)ms" else "" end) +
    (if .follow then " | follow \(.follow.replay_complete)/\(.follow.followers) replay_complete, next run reached \(.follow.reached_by_next_run) | \(.follow.rss_per_follower_bytes/1024*10|floor/10)KiB/follower rss, heap \((.follow.heap_per_follower_bytes // 0)/1024*10|floor/10)KiB stack \((.follow.stack_per_follower_bytes // 0)/1024*10|floor/10)KiB goroutines \((.follow.goroutines_per_follower // 0)*100|floor/100)/follower" + (if (.follow.errors|length) > 0 then " errors \(.follow.errors)" else "" end) else "" end) +
    (if (.errors|length) > 0 then " | errors \(.errors)" else "" end)' "$out/$p-$name.json"
  case $name in proxy-*)
    echo "   proxy counters: $(curl -sf "${url%/}/metrics" | grep -E '^agui_proxy_(recorder_dropped_events_total|recorder_backpressure_waits_total|slow_clients_dropped_total)' | tr '\n' ' ')" ;;
  esac
}

nginx_conf() {
  cat <<EOF
daemon off; master_process off; worker_rlimit_nofile 20000; error_log /dev/null crit; pid $(realpath "$out")/nginx.pid;
events { worker_connections 20000; }
http {
  access_log off;
  upstream agent { server 127.0.0.1:$agent_port; keepalive 256; }
  server {
    listen 127.0.0.1:$nginx_port backlog=4096;
    location / {
      proxy_pass http://agent; proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_buffering off; proxy_cache off; proxy_read_timeout 1h;
      client_max_body_size 16m; # (1m by default: the thread profile's requests pass it, 413)
    }
  }
}
EOF
}

cfg_env() { # config name -> KEY=value words
  case $1 in
    memory) ;; norecord) echo "AGUI_RECORD=false" ;;
    redis-async) echo "AGUI_REDIS_URL=redis://127.0.0.1:$redis_port/0" ;;
    redis-sync) echo "AGUI_REDIS_URL=redis://127.0.0.1:$redis_port/0 AGUI_DURABILITY=sync" ;;
    disk) rm -rf "$out/disk"; echo "AGUI_STORE_PATH=$out/disk" ;;
    *) echo "unknown config $1" >&2; exit 2 ;;
  esac
}

for p in $profiles; do
  case $p in
  fanout*|follow)
    for cfg in $configs; do
      [ "$cfg" = norecord ] && continue # nothing to attach to
      [ "$p" = fanout2r ] && [ "${cfg#redis-}" = "$cfg" ] && continue # replicas share only Redis
      read -ra env <<<"$(cfg_env "$cfg")"
      [ "$p" = follow ] && env+=(AGUI_PPROF_LISTEN=127.0.0.1:$pprof_port)
      start_proxy $proxy_port "${env[@]}"
      extra=()
      if [ "$p" = fanout2r ]; then
        start_proxy $replica_port "${env[@]}"
        extra=(-attach-url "http://127.0.0.1:$replica_port" -attach-pid "$px2")
      fi
      bench "proxy-$cfg" "$p" "http://127.0.0.1:$proxy_port/" "$px" "${extra[@]}"
      stop_proxies
    done
    continue ;;
  esac
  if [ "${BASELINES:-1}" = 1 ]; then
  bench direct "$p" "http://127.0.0.1:$agent_port/" "$agent"
  ./bin/agui-bench -url "http://127.0.0.1:$agent_port/" -plain-proxy "127.0.0.1:$plain_port" & px=$!
  sleep 1
  bench plain-httputil "$p" "http://127.0.0.1:$plain_port/" "$px"
  stop_proxies
  fi
  if [ "${BASELINES:-1}" = 1 ] && command -v nginx >/dev/null; then
    nginx_conf >"$out/nginx.conf"
    nginx -c "$(realpath "$out/nginx.conf")" & px=$!
    sleep 1
    bench nginx "$p" "http://127.0.0.1:$nginx_port/" "$px"
    stop_proxies
  fi
  for cfg in $configs; do
    read -ra env <<<"$(cfg_env "$cfg")"
    start_proxy $proxy_port "${env[@]}"
    bench "proxy-$cfg" "$p" "http://127.0.0.1:$proxy_port/" "$px"
    stop_proxies
  done
done
