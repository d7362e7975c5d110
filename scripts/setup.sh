#!/usr/bin/env bash
# Installs every Debian package the project needs to build and test. Idempotent: when all
# packages are already present it does nothing (and needs no network).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libabsl-dev          # absl::Status, StatusOr, Span, strings
  nlohmann-json3-dev   # params.json, safetensors headers
  libdnnl-dev          # oneDNN sgemm for the CPU backend
  ocl-icd-opencl-dev   # oneDNN's CMake package calls find_package(OpenCL); a Recommends we skip
  libucx-dev ucx-utils # UCX transport (ucx_perftest for the transfer benchmark baseline)
  libpcre2-dev         # tiktoken pre-tokenisation (Unicode classes, lookahead)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # gRPC API
  libssl-dev  # SHA-256 for prefix-cache keys; TLS to the Kubernetes API
  libboost-dev  # Boost.Beast and Boost.Asio (headers): the router's HTTP API, its Kubernetes API client
  prometheus-cpp-dev   # /metrics on every service
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  python3-yaml         # the deployment smoke test reads the rendered manifests
  python3-torch        # tools/train: the PyTorch YOCO the engine is checked against and trained with
  python3-grpcio python3-protobuf  # clients/python, the gRPC client (its example runs in the tests)
  gnuplot-nox          # yoco-loadtest's latency plots
  dnsmasq-base curl    # a real DNS server for the router's dns:/// discovery test; metrics
  qemu-user            # the CPU-baseline test runs a binary on an emulated pre-AVX2 CPU
  clang-14 libclang-rt-14-dev  # libFuzzer targets (scripts/fuzz.sh)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js runs js-tiktoken, the tokenizer tests' independent reference. Any installed node will
# do; Debian's is the fallback.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  missing+=(nodejs npm)
fi

# kubectl renders and checks the Kubernetes manifests (kustomize built in). These machines have
# it; elsewhere it comes from whichever apt source provides the `kubectl` package.
if ! command -v kubectl > /dev/null && apt-cache show kubectl > /dev/null 2>&1; then
  missing+=(kubectl)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
