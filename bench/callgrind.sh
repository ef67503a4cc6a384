#!/usr/bin/env bash
# bench/callgrind.sh: user-space instructions per request, counted by callgrind.
#
# Instruction counts do not depend on what else the machine is doing, so this
# figure can be compared across commits (and against wrk) even on a busy
# machine. It counts only user-space work: the kernel's share (syscalls) is not
# in it, which is why bench/run.sh's CPU seconds matter too.
#
# Environment: REDLINE (default target/fat/redline), N requests (default 20000),
# CONNS (default 16). Needs valgrind and nginx (and wrk for the comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
REDLINE=${REDLINE:-target/fat/redline}
N=${N:-20000}
CONNS=${CONNS:-16}
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'kill "$SRV" 2>/dev/null || true; rm -rf "$TMP"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$REDLINE" serve --port "$PORT" -t 1 >/dev/null &
SRV=$!
sleep 0.5

ir_of() { { callgrind_annotate "$1" 2>/dev/null || true; } | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }'; }
# Sums the instructions of all threads but the first (the workers), or of all.
sum_threads() { # PREFIX FIRST(1 = include the main thread)
    local t=0 f
    for f in "$1"-*; do
        [ "$2" = 1 ] || [ "${f##*-}" != 01 ] || continue
        t=$((t + $(ir_of "$f")))
    done
    echo "$t"
}

# Per thread: the main thread's report and save scale with the run's length
# (one series point per second, and valgrind makes the run ~50x longer), so the
# stable per-request figure is the worker threads' own.
for n in "$N" 100; do
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$TMP/redline.$n" \
        "$REDLINE" run -n "$n" -c "$CONNS" -t 1 -q -o json --no-save "http://127.0.0.1:$PORT/" >/dev/null 2>&1
done
w=$(( ($(sum_threads "$TMP/redline.$N" 0) - $(sum_threads "$TMP/redline.100" 0)) / (N - 100) ))
a=$(( ($(sum_threads "$TMP/redline.$N" 1) - $(sum_threads "$TMP/redline.100" 1)) / (N - 100) ))
echo "redline $("$REDLINE" --version | awk '{print $2}'): $w instructions per request in the worker thread ($a for the whole process, incl. the per-second report work that valgrind's slowness inflates; user space; $N vs 100 requests, $CONNS connections)"
if command -v wrk >/dev/null; then
    # wrk runs for a time, not a count: divide by the requests it reports.
    valgrind --tool=callgrind --callgrind-out-file="$TMP/wrk.out" \
        wrk -t1 -c"$CONNS" -d3s "http://127.0.0.1:$PORT/" >"$TMP/wrk.txt" 2>/dev/null
    reqs=$(awk '/requests in/ { print $1; exit }' "$TMP/wrk.txt")
    echo "wrk: $(( $(ir_of "$TMP/wrk.out") / reqs )) instructions per request (user space, incl. start-up; $reqs requests)"
fi
