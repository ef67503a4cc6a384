#!/usr/bin/env bash
# bench/callgrind.sh: user-space instructions per request, counted by callgrind.
#
# Instruction counts do not depend on what else the machine is doing, so this
# figure can be compared across commits (and against wrk) even on a busy
# machine. It counts only user-space work: the kernel's share (syscalls) is not
# in it, which is why bench/run.sh's CPU seconds matter too.
#
# Environment: REDLINE (default target/release/redline), N requests (default 20000),
# CONNS (default 16). Needs valgrind and nginx (and wrk for the comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
REDLINE=${REDLINE:-target/release/redline}
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

valgrind --tool=callgrind --callgrind-out-file="$TMP/redline.out" \
    "$REDLINE" run -n "$N" -c "$CONNS" -t 1 -q -o json "http://127.0.0.1:$PORT/" >"$TMP/r.json" 2>/dev/null
base_n=100
valgrind --tool=callgrind --callgrind-out-file="$TMP/redline0.out" \
    "$REDLINE" run -n "$base_n" -c "$CONNS" -t 1 -q -o json "http://127.0.0.1:$PORT/" >/dev/null 2>/dev/null
ir=$(ir_of "$TMP/redline.out")
ir0=$(ir_of "$TMP/redline0.out")
echo "redline $("$REDLINE" --version | awk '{print $2}'): $(( (ir - ir0) / (N - base_n) )) instructions per request (user space; $N vs $base_n requests, $CONNS connections)"
if command -v wrk >/dev/null; then
    # wrk runs for a time, not a count: divide by the requests it reports.
    valgrind --tool=callgrind --callgrind-out-file="$TMP/wrk.out" \
        wrk -t1 -c"$CONNS" -d3s "http://127.0.0.1:$PORT/" >"$TMP/wrk.txt" 2>/dev/null
    reqs=$(awk '/requests in/ { print $1; exit }' "$TMP/wrk.txt")
    echo "wrk: $(( $(ir_of "$TMP/wrk.out") / reqs )) instructions per request (user space, incl. start-up; $reqs requests)"
fi
