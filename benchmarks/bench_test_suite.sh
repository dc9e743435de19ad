#!/usr/bin/env bash
# The README's test command, timed, with the machine's load before and after.
#
#   bash benchmarks/bench_test_suite.sh [BUSY] [-- extra pytest arguments]
#
# BUSY (default 0): how many busy loops (`python3 -c 'while 1: pass'`, each bounded by
# `timeout`) run beside the tests, to measure at a known extra load: 6 on top of an idle
# 2-core machine gives a load average of about 6 after a minute. They are started here, waited
# a minute for the load average to follow, and stopped by their process ids when the tests end.
# Prints the commit, `uptime` before and after, the wall time and the user and system CPU of
# the whole command (its child processes included), and pytest's last line.
set -euo pipefail
cd "$(dirname "$0")/.."

busy="${1:-0}"
shift || true
[ "${1:-}" = "--" ] && shift
export LITELLM_OFFLINE_MODE=true

pids=()
stop_busy() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop_busy EXIT
for _ in $(seq 1 "$busy"); do
    timeout 3600 python3 -c 'while 1: pass' &
    pids+=("$!")
done
if [ "$busy" -gt 0 ]; then
    sleep 60  # not synchronisation: the 1-minute load average needs a minute to show them
fi

log="$(mktemp)"
before="$(uptime)"
start="$(date +%s.%N)"
set +e
/usr/bin/time -q -f "user %U s, sys %S s" -o "$log.time" python -m pytest -q -p no:randomly \
    -p no:cacheprovider -rfE "$@" >"$log" 2>&1
status=$?
set -e
end="$(date +%s.%N)"
after="$(uptime)"
{
    echo "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD) busy=$busy exit=$status"
    echo "before: $before"
    echo "after:  $after"
    printf "wall %.0f s, %s\n" "$(python3 -c "print($end - $start)")" "$(cat "$log.time")"
    grep -E '^(FAILED|ERROR) ' "$log" || true
    tail -n 1 "$log"
}
rm -f "$log" "$log.time"
exit "$status"
