#!/usr/bin/env bash
# bench/tui.sh: does the live view slow the engine? (issue 21)
#
# Starts its own nginx (one worker, pinned to CPU 0) serving a 440-byte file
# on a free loopback port, then runs `redline run -c CONNS -d DURATION` in a
# 120x40 tmux terminal, pinned to CPU 1, ROUNDS times with the live view and
# ROUNDS times with --no-tui, interleaved (tui, no-tui, tui, ...). Each run's
# completed requests come from its JSON record (stdout to a file; stderr
# stays the terminal, so the view is drawn) and its client CPU from
# /usr/bin/time. Prints a Markdown table: req/s, CPU s, requests per client
# CPU-second, the medians and their ratio (tui / no-tui).
#
# Environment (optional): REDLINE (default target/fat/redline),
# DURATION (5), CONNS (50), ROUNDS (5), SERVER_CPU/CLIENT_CPU (0/1),
# NGINX_BIN (nginx; not NGINX, which nginx itself reads), PAUSE (1 s between runs).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$SCRIPT_DIR/.."
REDLINE=$(realpath "${REDLINE:-target/fat/redline}")
DURATION=${DURATION:-5}
CONNS=${CONNS:-50}
ROUNDS=${ROUNDS:-5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX_BIN=${NGINX_BIN:-nginx}
PAUSE=${PAUSE:-1}

die() { echo "[bench] error: $*" >&2; exit 1; }
[[ -x $REDLINE ]] || die "$REDLINE not found (cargo build --profile fat -p redline)"
for need in tmux taskset python3 "$NGINX_BIN"; do
    command -v "$need" >/dev/null 2>&1 || die "'$need' not found"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (Debian package 'time')"

TMP=$(mktemp -d /tmp/redline-tui-bench.XXXXXX)
SOCK="redline-tui-bench-$$"
NGINX_PID=
cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    [[ -n $NGINX_PID ]] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$TMP/html" "$TMP/logs" "$TMP/tmp"
head -c 440 /dev/zero | tr '\0' 'x' >"$TMP/html/index.html"
chmod 755 "$TMP" "$TMP/html"
chmod 644 "$TMP/html/index.html"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;
events { worker_connections 4096; }
http {
    types { text/html html; }
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $TMP/tmp/body;
    proxy_temp_path $TMP/tmp/proxy;
    fastcgi_temp_path $TMP/tmp/fastcgi;
    uwsgi_temp_path $TMP/tmp/uwsgi;
    scgi_temp_path $TMP/tmp/scgi;
    server { listen 127.0.0.1:$PORT; root $TMP/html; }
}
EOF
taskset -c "$SERVER_CPU" "$NGINX_BIN" -p "$TMP" -e "$TMP/logs/error.log" -c "$TMP/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do
    (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done
URL="http://127.0.0.1:$PORT/index.html"

# One run in tmux; waits (bounded) for its end.
one() { # name flags...
    local name=$1; shift
    local line="taskset -c $CLIENT_CPU /usr/bin/time -o $TMP/$name.time -f '%U %S' $REDLINE run --no-save -c $CONNS -d ${DURATION}s -o json $* $URL >$TMP/$name.json; echo \$? >$TMP/$name.rc"
    tmux -L "$SOCK" -f /dev/null new-session -d -s "$name" -x 120 -y 40 "env TERM=xterm-256color sh -c \"$line\""
    # Mid-run, what the terminal shows (the view, or the progress line).
    sleep "$(awk "BEGIN { print $DURATION / 2 }")"
    tmux -L "$SOCK" capture-pane -p -t "$name" >"$TMP/$name.screen" 2>/dev/null || true
    for _ in $(seq $((DURATION * 10 + 300))); do
        [[ -s $TMP/$name.rc ]] && break
        sleep 0.1
    done
    [[ $(cat "$TMP/$name.rc" 2>/dev/null) == 0 ]] || die "$name did not end well (exit $(cat "$TMP/$name.rc" 2>/dev/null))"
    tmux -L "$SOCK" kill-session -t "$name" 2>/dev/null || true
    sleep "$PAUSE"
}

for r in $(seq "$ROUNDS"); do
    one "tui-$r"
    one "notui-$r" --no-tui
done

python3 - "$TMP" "$ROUNDS" <<'EOF'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
rows = {"tui": [], "notui": []}
print("| round | view | req/s | client CPU s | req per client CPU-s |")
print("|---|---|---|---|---|")
for r in range(1, rounds + 1):
    for v in ("tui", "notui"):
        rec = json.load(open(f"{tmp}/{v}-{r}.json"))
        screen = open(f"{tmp}/{v}-{r}.screen").read()
        shown = "Requests/s over time" in screen if v == "tui" else "req/s now," in screen
        if not shown:
            sys.exit(f"round {r} ({v}): the terminal did not show what it should:\n{screen}")
        done = rec["counters"]["completed"]
        u, s = map(float, open(f"{tmp}/{v}-{r}.time").read().split()[-2:])
        rps = done / rec["duration_s"]
        per = done / (u + s)
        rows[v].append((rps, u + s, per))
        name = "live view" if v == "tui" else "--no-tui"
        print(f"| {r} | {name} | {rps:,.0f} | {u + s:.2f} | {per:,.0f} |")
med = {v: (statistics.median(x[0] for x in rows[v]), statistics.median(x[2] for x in rows[v])) for v in rows}
print()
print(f"median req/s: live view {med['tui'][0]:,.0f}, --no-tui {med['notui'][0]:,.0f} (ratio {med['tui'][0] / med['notui'][0]:.3f})")
print(f"median req per client CPU-s: live view {med['tui'][1]:,.0f}, --no-tui {med['notui'][1]:,.0f} (ratio {med['tui'][1] / med['notui'][1]:.3f})")
ratios = [t[2] / n[2] for t, n in zip(rows["tui"], rows["notui"])]
print("per-round ratio of req per client CPU-s (live view / --no-tui): " + ", ".join(f"{r:.2f}" for r in ratios)
      + f"; median {statistics.median(ratios):.2f}")
EOF
