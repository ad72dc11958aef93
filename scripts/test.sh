#!/usr/bin/env bash
# The project's one test command (README "Run the tests"): installs what a fresh Debian machine
# lacks (redis-server, Node.js, Chromium, the pinned npm packages), then runs every Go test
# (unit, Redis contract and fault tests on a private redis-server, proxy and attach tests, the
# cross-language e2e with the official AG-UI client, the headless-browser EventSource check)
# under the race detector, go vet and a gofmt check, the @agui-proxy/client package's tests (Node
# and headless Chromium against the real binaries, npm pack), the CopilotKit runner's tests
# against the real CopilotKit runtime, the image build steps and the deploy manifest validation.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v curl >/dev/null 2>&1 || need_apt+=(curl ca-certificates) # the README examples test
command -v node >/dev/null 2>&1 || need_apt+=(nodejs npm)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
if [ ! -d e2e/node_modules/@ag-ui/client ]; then
  (cd e2e && npm ci --no-audit --no-fund)
fi
if [ ! -d e2e/browser/node_modules/playwright-core ] || [ ! -d e2e/browser/node_modules/esbuild ]; then
  (cd e2e/browser && npm ci --no-audit --no-fund)
fi
if [ ! -f e2e/tanstack/node_modules/.package-lock.json ] ||
  [ e2e/tanstack/package-lock.json -nt e2e/tanstack/node_modules/.package-lock.json ]; then
  (cd e2e/tanstack && npm ci --no-audit --no-fund --ignore-scripts)
fi
# --ignore-scripts: nothing in clients/ needs an install script (esbuild and typescript find
# their platform binaries in their optional dependencies), and one (an analytics ping) would
# reach beyond the package registry.
if [ ! -f clients/typescript/node_modules/.package-lock.json ] ||
  [ clients/typescript/package-lock.json -nt clients/typescript/node_modules/.package-lock.json ]; then
  (cd clients/typescript && npm ci --no-audit --no-fund --ignore-scripts)
fi
if [ ! -f clients/copilotkit/node_modules/.package-lock.json ] ||
  [ clients/copilotkit/package-lock.json -nt clients/copilotkit/node_modules/.package-lock.json ]; then
  (cd clients/copilotkit && npm ci --no-audit --no-fund --ignore-scripts)
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
go build ./...
go test -race -count=1 -timeout 15m "$@" ./...
# @agui-proxy/client (clients/typescript): built, then its Node, headless-Chromium and npm-pack
# tests against the agui-proxy and demo-agent binaries (built by the tests).
(cd clients/typescript && npm run --silent build && npm test --silent)
# The CopilotKit runner (clients/copilotkit): built, then run by the pinned @copilotkit/runtime
# in separate processes against the proxy, the demo agent and a private redis-server.
(cd clients/copilotkit && npm run --silent build && npm test --silent)
# The container build steps (same go build as deploy/Dockerfile, checked static and run) and the
# Compose/Kubernetes manifests (schema and consistency checks, no cluster needed).
scripts/build-image.sh
scripts/validate-deploy.sh
