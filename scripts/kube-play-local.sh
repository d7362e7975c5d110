#!/usr/bin/env bash
# Starts router, prefill and decode from the container image with `podman kube play` of the
# rendered `deploy/k8s/overlays/local` (host network, loopback), has yoco-cli on the host send a
# request through the router and compare the tokens with the image's in-process engine, then
# takes the pods down. Usage: scripts/kube-play-local.sh [IMAGE] (default: scripts/image.sh builds
# it). Needs build/bin/yoco-cli (scripts/build.sh) and ports 50051-50071, 9090-9092 free.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-$(bash scripts/image.sh | tail -n 1)}
source scripts/podman-env.sh

kubectl kustomize deploy/k8s/overlays/local > "$PODMAN_WORK/rendered.yaml"
# shellcheck disable=SC2046  # volume names are single words
/usr/bin/python3 deploy/k8s/podman/for_kube_play.py "$PODMAN_WORK/rendered.yaml" "$image" \
  $(podman volume ls --format '{{.Name}}') > "$PODMAN_WORK/play.yaml"
down() { podman kube down "$PODMAN_WORK/play.yaml" > /dev/null 2>&1 || true; }
trap 'down; rm -rf "$PODMAN_WORK"' EXIT
podman kube play --replace "$PODMAN_WORK/play.yaml" >&2

router=127.0.0.1:50051
tokens=0,17,5,99,254,31
for i in $(seq 1 150); do
  if served=$(build/bin/yoco-cli --router "$router" generate --tokens "$tokens" \
      --max-new-tokens 12 2> /dev/null); then
    break
  fi
  if [ "$i" = 150 ]; then
    echo "kube-play: no tokens from the router after 30 s; pod logs:" >&2
    for p in $(podman pod ps --format '{{.Name}}'); do podman pod logs "$p" 2>&1 | tail -n 20 >&2; done
    exit 1
  fi
  sleep 0.2
done
expected=$(podman run --rm --network=none "$image" yoco generate --model /opt/yoco/models/yoco-tiny \
  --tokens "$tokens" --max-new-tokens 12)
echo "kube-play: router served $served; in-process engine: $expected"
[ "$served" = "$expected" ]
