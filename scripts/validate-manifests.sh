#!/usr/bin/env bash
# Renders every Kubernetes overlay (deploy/k8s/overlays/*) and validates it offline: Kubernetes
# and Prometheus Operator schemas, field names (TypeScript), our container policy; then checks
# that the validator catches broken manifests. Installs its npm packages from the lockfile.
set -euo pipefail
cd "$(dirname "$0")/../deploy/k8s/validate"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund --loglevel=error > /dev/null
  touch node_modules
fi
node validate.mjs
node validate.mjs --self-test
