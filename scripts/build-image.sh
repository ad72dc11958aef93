#!/usr/bin/env bash
# Runs the build steps of deploy/Dockerfile without a Docker engine, so CI proves them:
#   1. checks the Dockerfile still uses exactly the go build env, flags and packages below
#      (change both together), plus its image promises (non-root user, port, listen address);
#   2. runs that go build into a temporary directory;
#   3. checks each binary is a static, cgo-free, trimmed, stripped ELF (go version -m, file when
#      installed, and deploy/checkbinary, which reads the ELF headers and Go build information);
#   4. smoke-tests the binaries as the image and deploy/compose.yaml use them: demo-agent and
#      agui-proxy on loopback ports, probed by agui-healthcheck (/healthz, /readyz, /metrics),
#      then SIGTERM and a clean exit.
# Usage: scripts/build-image.sh [OUTDIR]   (default: a temporary directory, removed at exit)
set -euo pipefail
cd "$(dirname "$0")/.."

dockerfile=deploy/Dockerfile
# The Dockerfile's build step, word for word. GOOS/GOARCH come from buildx's TARGETOS/TARGETARCH
# there; here they are the host's.
build_env=(CGO_ENABLED=0 GOFLAGS=-buildvcs=false)
build_flags=(-trimpath -ldflags "-s -w")
packages=(./cmd/agui-proxy ./cmd/demo-agent ./deploy/agui-healthcheck)
binaries=(agui-proxy demo-agent agui-healthcheck)

fail() { echo "build-image: $*" >&2; exit 1; }

# 1. The Dockerfile says the same thing.
expect_line() { # expect_line REGEX DESCRIPTION
  grep -Eq -- "$1" "$dockerfile" || fail "$dockerfile has no line matching /$1/ ($2): keep it in sync with scripts/build-image.sh"
}
escape() { printf '%s' "$1" | sed 's/[][\.*^$/+?(){}|]/\\&/g'; }
for e in "${build_env[@]}"; do
  expect_line "^ENV $(escape "$e")\$" "build environment"
done
run_line="go build -trimpath -ldflags \"-s -w\" -o /out/ ${packages[*]}"
[ "${build_flags[*]}" = '-trimpath -ldflags -s -w' ] || fail "build_flags changed: update run_line too"
expect_line "^RUN GOOS=\\\$TARGETOS GOARCH=\\\$TARGETARCH $(escape "$run_line")\$" "the go build step"
go_minor=$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/\1/p' go.mod)
expect_line "^ARG GO_VERSION=$(escape "$go_minor")\$" "Go version of go.mod"
expect_line '^FROM --platform=\$BUILDPLATFORM golang:\$\{GO_VERSION\} AS build$' "build stage"
expect_line '^FROM (gcr\.io/distroless/static-debian[0-9]+:nonroot|scratch)$' "static final stage"
expect_line '^USER 65532:65532$' "non-root user"
expect_line '^EXPOSE 8080$' "port"
expect_line '^ENV AGUI_LISTEN=0\.0\.0\.0:8080$' "listen address"
expect_line '^ENTRYPOINT \["/usr/local/bin/agui-proxy"\]$' "entrypoint"
for b in "${binaries[@]}"; do
  expect_line "^COPY --from=build .*/out/$b( |\$)" "copies $b"
done
echo "build-image: $dockerfile matches: ${build_env[*]} go build ${build_flags[0]} ${build_flags[1]} \"${build_flags[2]}\" ${packages[*]}"

# 2. The build.
own_out=
if [ $# -ge 1 ]; then
  out=$1
  mkdir -p "$out"
else
  out=$(mktemp -d)
  own_out=1
  trap 'rm -rf "$out"' EXIT
fi
env "${build_env[@]}" go build "${build_flags[@]}" -o "$out/" "${packages[@]}"

# 3. Static, cgo-free, trimmed, stripped.
for b in "${binaries[@]}"; do
  [ -x "$out/$b" ] || fail "go build did not produce $b"
  info=$(go version -m "$out/$b")
  grep -q $'\tbuild\tCGO_ENABLED=0$' <<<"$info" || fail "$b: go version -m lacks CGO_ENABLED=0:"$'\n'"$info"
  grep -q $'\tbuild\t-trimpath=true$' <<<"$info" || fail "$b: go version -m lacks -trimpath=true:"$'\n'"$info"
  if command -v file >/dev/null 2>&1; then
    desc=$(file -b "$out/$b")
    grep -q 'statically linked' <<<"$desc" || fail "$b: file says: $desc"
  else
    echo "build-image: file(1) not installed; the ELF check below still runs"
  fi
done
go run ./deploy/checkbinary "${binaries[@]/#/$out/}"

# 4. Smoke test, as the image runs them (only 127.0.0.1, ports chosen by the kernel).
logs=$(mktemp -d)
pids=()
cleanup_smoke() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$logs"
  [ -z "$own_out" ] || rm -rf "$out"
}
trap cleanup_smoke EXIT
wait_addr() { # wait_addr LOGFILE PATTERN: prints the addr= value of the first matching line
  for _ in $(seq 1 100); do
    addr=$(sed -n "s/.*$2.*addr=\\([0-9.:]*\\).*/\\1/p" "$1" | head -n1)
    [ -n "$addr" ] && { echo "$addr"; return 0; }
    sleep 0.1
  done
  cat "$1" >&2
  return 1
}
DEMO_LISTEN=127.0.0.1:0 "$out/demo-agent" 2>"$logs/agent.log" &
pids+=($!)
agent=$(wait_addr "$logs/agent.log" "demo agent listening") || fail "demo-agent did not start"
"$out/agui-healthcheck" -status 405 "http://$agent/" || fail "demo-agent healthcheck (compose) failed"
AGUI_LISTEN=127.0.0.1:0 AGUI_UPSTREAM="http://$agent" "$out/agui-proxy" 2>"$logs/proxy.log" &
proxy_pid=$!
pids+=("$proxy_pid")
proxy=$(wait_addr "$logs/proxy.log" "agui-proxy listening") || fail "agui-proxy did not start"
for path in /healthz /readyz /metrics; do
  "$out/agui-healthcheck" "http://$proxy$path" || fail "agui-proxy $path failed"
done
kill -TERM "$proxy_pid"
code=0
wait "$proxy_pid" || code=$?
[ "$code" -eq 0 ] || { cat "$logs/proxy.log" >&2; fail "agui-proxy exited $code after SIGTERM, want 0"; }
grep -q "agui-proxy stopped" "$logs/proxy.log" || fail "agui-proxy did not log its clean stop"
ls -l "${binaries[@]/#/$out/}" | awk '{printf "build-image: %s %d bytes\n", $NF, $5}'
echo "build-image: ok"
