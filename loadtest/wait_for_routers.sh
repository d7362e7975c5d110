# Sourced by the loadtest scripts: wait_for_routers ADDRESS... returns once each router has
# answered a two-token generation (its workers are up), trying for up to 30 s per router.
wait_for_routers() {
  local address i
  for address in "$@"; do
    for i in $(seq 1 150); do
      build/bin/yoco-cli --router "$address" generate --tokens 0,5 --max-new-tokens 2 \
        > /dev/null 2>&1 && break
      sleep 0.2
    done
  done
}
