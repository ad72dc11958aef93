#!/usr/bin/env bash
# Quickstart: the scripted demo agent on 127.0.0.1:8000 and agui-proxy in front of it on
# 127.0.0.1:8080 with the in-memory store. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/ ./cmd/demo-agent ./cmd/agui-proxy
DEMO_LISTEN=${DEMO_LISTEN:-127.0.0.1:8000} ./bin/demo-agent &
agent=$!
trap 'kill $agent 2>/dev/null; wait $agent 2>/dev/null' EXIT
AGUI_UPSTREAM=${AGUI_UPSTREAM:-http://127.0.0.1:8000} AGUI_LISTEN=${AGUI_LISTEN:-127.0.0.1:8080} ./bin/agui-proxy
