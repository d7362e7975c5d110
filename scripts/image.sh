#!/usr/bin/env bash
# Builds the YOCO Serve container image (deploy/docker/Dockerfile) with podman into podman's
# default image store, and prints the image reference on its last line, e.g.
#   localhost/yoco-serve:0.1.0
# When no debian:12 image is present (no registry is reachable), it makes one with debootstrap
# from the mirror this machine's own apt sources name, and imports it.
#
# On a machine with a Docker engine, `docker build -f deploy/docker/Dockerfile .` does the same;
# the podman settings (scripts/podman-env.sh, --isolation=chroot) are for podman inside
# containers and sandboxes, where the default OCI runtime, ulimits and isolation do not work.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/podman-env.sh
command -v debootstrap > /dev/null || podman_install debootstrap
work=$PODMAN_WORK

# The first Debian mirror this machine's apt sources name for the main suite.
debian_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      /^deb[ \t]/ && $0 ~ /[ \t]bookworm([ \t]|$)/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }
      /^URIs:/ { uri = $2 }
      /^Suites:/ && uri != "" { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print uri; exit } }
      /^$/ { uri = "" }
    ' "$f"
  done | head -n 1
}

base=docker.io/library/debian:12
if ! podman image exists "$base"; then
  mirror=$(debian_mirror)
  if [ -z "$mirror" ]; then
    echo "image: no debian:12 image and no bookworm mirror in the apt sources" >&2
    exit 1
  fi
  echo "image: making $base with debootstrap from $mirror" >&2
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | podman import --change 'CMD ["bash"]' - "$base" > /dev/null
  rm -rf "$work/rootfs"
fi

# Tagged with the release in VERSION (what the manifests pin); the label says which commit.
version=$(cat VERSION)
revision=$(git describe --always --dirty --abbrev=40 2> /dev/null || echo unknown)
image=localhost/yoco-serve:$version
podman build --isolation=chroot --pull=never -f deploy/docker/Dockerfile \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  -t "$image" . >&2
echo "$image"
