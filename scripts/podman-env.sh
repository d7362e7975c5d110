# Sourced by the scripts that run podman: installs podman when it is missing and points it at a
# containers.conf in a temporary folder with the settings sandboxed machines need: the runc
# runtime (crun fails there) and default ulimits within the hard limits the containers can get
# (podman's defaults ask for more than a sandbox allows; the process limit seen inside one is
# 32768 even where `ulimit -Hu` says more). Sets PODMAN_WORK (removed on exit).

podman_install() {
  local need=("$@") SUDO=""
  [ ${#need[@]} -gt 0 ] || return 0
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "podman-env: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
}

podman_missing=()
command -v podman > /dev/null || podman_missing+=(podman runc)
# kube play builds its pause image around catatonit, a Recommends of podman.
command -v catatonit > /dev/null || podman_missing+=(catatonit)
podman_install "${podman_missing[@]}"

PODMAN_WORK=$(mktemp -d)
trap 'rm -rf "$PODMAN_WORK"' EXIT
podman_nofile=$(ulimit -Hn)
podman_nproc=$(ulimit -Hu)
if [ "$podman_nofile" = unlimited ] || [ "$podman_nofile" -gt 20000 ]; then podman_nofile=20000; fi
if [ "$podman_nproc" = unlimited ] || [ "$podman_nproc" -gt 32768 ]; then podman_nproc=32768; fi
cat > "$PODMAN_WORK/containers.conf" << CONF
[containers]
default_ulimits = ["nofile=$podman_nofile:$podman_nofile", "nproc=$podman_nproc:$podman_nproc"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$PODMAN_WORK/containers.conf"
