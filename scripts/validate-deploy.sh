#!/usr/bin/env bash
# Validates deploy/ without a cluster, kubectl or Docker (deploy/README.md, "Validation"):
#   - every manifest of deploy/k8s against the Kubernetes JSON schemas of the kubernetes-models
#     npm package, plus structural checks (probes, ports, selectors, grace period vs drain,
#     security context, Redis AOF/noeviction/PVC, env names) in deploy/validate/validate.mjs;
#   - the overlays deploy/k8s-sentinel and deploy/k8s-cluster, rendered by the validator;
#   - deploy/compose.yaml and its Sentinel and Cluster variants (services, healthchecks, env
#     names, Redis AOF, topology, stop grace period);
#   - the output of `kubectl kustomize` of deploy/k8s and of each overlay too, when kubectl is
#     installed (optional);
#   - the validator's own mutation tests (node --test): every check must be able to fail.
# Variable names are read from `agui-proxy -h` and `demo-agent -h`, so they cannot drift.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v node >/dev/null 2>&1 || { echo "validate-deploy: node is not installed (apt-get install -y nodejs npm)" >&2; exit 1; }
if [ ! -f deploy/validate/node_modules/kubernetes-models/package.json ] || [ ! -f deploy/validate/node_modules/yaml/package.json ]; then
  (cd deploy/validate && npm ci --no-audit --no-fund)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./cmd/agui-proxy -h >"$tmp/proxy-help.txt" 2>&1
go run ./cmd/demo-agent -h >"$tmp/demo-help.txt" 2>&1

rendered=()
if command -v kubectl >/dev/null 2>&1; then
  # The base and every overlay, as applied: one stream of documents per directory, checked
  # one after the other by the same rules.
  for d in deploy/k8s deploy/k8s-*/; do
    kubectl kustomize "$d" >"$tmp/rendered-$(basename "$d").yaml"
    rendered+=(--rendered "$tmp/rendered-$(basename "$d").yaml")
  done
else
  echo "validate-deploy: kubectl not installed: the kustomize output is not checked (the files still are)"
fi

node deploy/validate/validate.mjs --deploy deploy --proxy-help "$tmp/proxy-help.txt" --demo-help "$tmp/demo-help.txt" "${rendered[@]}"
(cd deploy/validate && PROXY_HELP="$tmp/proxy-help.txt" DEMO_HELP="$tmp/demo-help.txt" node --test)
