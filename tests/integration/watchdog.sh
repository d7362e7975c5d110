# Sourced by the integration tests: a deadline of their own, below CTest's TIMEOUT. CTest kills a
# test that runs over without a word about where it stood; this prints the step in progress
# (the last `step NAME`), how long the test has run, and the tail of every log in $log, then
# ends the test, so a hang on a CI machine can be read from its output.
#   start_watchdog SECONDS   (once the services are started and in $pids, which it kills)
#   step NAME                (before each phase; the ok/FAIL lines need not change)
step() { printf '%s' "$1" > "$log/.step"; }

start_watchdog() {
  local limit=$1 test_pid=$$
  (
    # The sleep must not hold the test's output open: CTest waits for that to close.
    sleep "$limit" < /dev/null > /dev/null 2>&1 &
    wait $!
    echo "WATCHDOG: still running after ${limit} s, in step: $(cat "$log/.step" 2> /dev/null)"
    for f in "$log"/*; do
      case "$f" in *.pem | *.key | *.csr | *.ext) continue ;; esac
      [ -f "$f" ] || continue
      echo "--- tail of $(basename "$f")"
      tail -c 1500 "$f" 2> /dev/null || true; echo
    done
    for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
    kill -TERM "$test_pid" 2> /dev/null
  ) &
  pids+=($!)
}
