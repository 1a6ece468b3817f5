#!/usr/bin/env bash
# Issue 18's must-show: `./dev test` from fresh clones, N runs one after another, while two
# busy loops load the machine's cores. Prints one line per run (exit status, wall time, load).
#   bench/suite_under_load.sh [RUNS] [WORKDIR]      (defaults: 3, /tmp/moo-suite-under-load)
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-3}"
work="${2:-/tmp/moo-suite-under-load}"
rev=$(git -C "$repo" rev-parse HEAD)
mkdir -p "$work"
echo "commit $rev, $runs runs, start $(date +%T)"
python3 -c 'while 1: pass' & b1=$!
python3 -c 'while 1: pass' & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT
sleep 45  # let the 1-minute load rise first
for i in $(seq 1 "$runs"); do
    rm -rf "$work/run$i"
    git clone -q "$repo" "$work/run$i" && git -C "$work/run$i" checkout -q "$rev"
    start=$(date +%s); load0=$(cut -d' ' -f1 /proc/loadavg)
    (cd "$work/run$i" && ./dev test) > "$work/run$i.log" 2>&1; rc=$?
    echo "run $i: exit $rc, wall $(( $(date +%s) - start )) s, load $load0 -> $(cut -d' ' -f1 /proc/loadavg):" \
         "$(grep -E '(passed|failed)' "$work/run$i.log" | tail -1)"
done
echo "end $(date +%T)"
