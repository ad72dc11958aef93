#!/usr/bin/env bash
# Quickstart: the scripted demo agent on DEMO_LISTEN (127.0.0.1:8000) and agui-proxy in front of
# it on AGUI_LISTEN (127.0.0.1:8080) with the in-memory store and the inspector on. Ctrl-C
# stops both (exit status 0).
# `make demo` builds bin/ first (make build); run directly, this script builds only what is
# missing, with the same command, so the Go packages are compiled once.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DEMO_BIN:-bin} # (the binaries' directory; TestDemoScript runs the script on its own)
if [ ! -x "$bin/demo-agent" ] || [ ! -x "$bin/agui-proxy" ]; then
  ${MAKE:-make} --no-print-directory build
fi
export DEMO_LISTEN=${DEMO_LISTEN:-127.0.0.1:8000}
agent_log=$(mktemp)
"$bin/demo-agent" 2> >(tee "$agent_log" >&2) &
agent=$!
# Ctrl-C reaches the agent and the proxy, which stop cleanly; the agent may be gone already,
# so nothing here may fail (set -e would turn that into exit 1, and make into an error).
cleanup() {
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  rm -f "$agent_log"
}
trap cleanup EXIT
# Start the proxy only once the agent listens: if the agent cannot bind (the port is taken),
# a proxy would forward to whatever holds the port.
for _ in $(seq 100); do
  grep -q "demo agent listening" "$agent_log" && break
  if ! kill -0 $agent 2>/dev/null; then
    echo "demo.sh: the demo agent could not start on $DEMO_LISTEN (see its error above); not starting the proxy" >&2
    exit 1
  fi
  sleep 0.1
done
if ! grep -q "demo agent listening" "$agent_log"; then
  echo "demo.sh: the demo agent did not listen on $DEMO_LISTEN within 10 s; not starting the proxy" >&2
  exit 1
fi
# The inspector is on (the proxy logs its URL); AGUI_INSPECTOR=false turns it off.
AGUI_UPSTREAM=${AGUI_UPSTREAM:-http://$DEMO_LISTEN} AGUI_LISTEN=${AGUI_LISTEN:-127.0.0.1:8080} \
  AGUI_INSPECTOR=${AGUI_INSPECTOR:-true} "$bin/agui-proxy"
