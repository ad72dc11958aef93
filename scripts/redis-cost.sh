#!/usr/bin/env bash
# Redis instructions per recorded event, counted exactly: redis-server runs under valgrind's
# callgrind while one case of BenchmarkWriterRedisCost (recorder/writer_cost_bench_test.go)
# writes to it, twice, with two event counts; the difference of the two totals divided by the
# difference of the events is what one more event costs Redis (server start, the runs'
# creation and the benchmark's first round cancel out). Unlike Redis's CPU time on a machine
# shared with the proxy, the agent and the load, the count is the same from one run to the
# next: use it to compare changes to the Lua scripts.
#
# Usage: scripts/redis-cost.sh [case] [events]
#   case    a BenchmarkWriterRedisCost sub-benchmark, every level of its name (default
#           runs=16/lease-append: 16 runs, one event of each per batch, leases renewed by the
#           appends, as the proxy does; runs=16/lease-none: no leases at all)
#   events  the larger of the two event counts (default 3200; the smaller is a fifth of it)
# Needs valgrind (apt-get install -y valgrind) and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${1:-runs=16/lease-append}
big=${2:-3200}
small=$((big / 5))
for tool in valgrind callgrind_annotate redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "redis-cost: $tool not found (apt-get install -y valgrind redis-server)" >&2; exit 2; }
done
# Each level of the name anchored: "runs=16/lease" alone, not "runs=16/lease-batch" too.
pattern="BenchmarkWriterRedisCost/$(sed 's|[^/][^/]*|^&$|g' <<<"$bench")"
out=$(mktemp -d)
port=${REDIS_COST_PORT:-18950}
go test -c -o "$out/recorder.test" ./recorder

# instructions EVENTS: the total instructions redis-server executed for a benchmark of EVENTS.
instructions() {
  local n=$1 vg
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.$n" \
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >"$out/valgrind.$n.log" 2>&1 &
  vg=$!
  for _ in $(seq 150); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
  AGUI_BENCH_REDIS_URL="redis://127.0.0.1:$port/0" "$out/recorder.test" -test.run '^$' \
    -test.bench "$pattern" -test.benchtime "${n}x" >"$out/bench.$n.log"
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$vg" || true
  callgrind_annotate "$out/cg.$n" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

a=$(instructions "$small")
if [ "$(grep -c '^BenchmarkWriterRedisCost' "$out/bench.$small.log")" != 1 ]; then
  echo "redis-cost: '$bench' does not name exactly one case of BenchmarkWriterRedisCost:" >&2
  cat "$out/bench.$small.log" >&2
  exit 2
fi
b=$(instructions "$big")
if [ -z "$a" ] || [ -z "$b" ]; then
  echo "redis-cost: no callgrind totals; logs in $out" >&2
  exit 1
fi
echo "BenchmarkWriterRedisCost/$bench: $(( (b - a) / (big - small) )) Redis instructions per event ($small and $big events: $a and $b)"
rm -rf "$out"
