#!/usr/bin/env bash
# bench/compare_noise.sh: how often does `redline compare` call two identical
# runs different? (issue 20: "compare's confidence is honest").
#
# Starts its own nginx (one worker, pinned to CPU 0) on a free loopback port,
# then makes PAIRS pairs of identical back-to-back runs against it (redline
# pinned to CPU 1, `-d DURATION -c CONNS`, saved as run-record files, never in
# the user's history) and compares each pair. A pair is "significant" when any
# row of its comparison says better or worse. The goal: at most one of 20.
# Prints a Markdown summary (stdout and $OUT/compare_noise.md) with the date
# and the machine, and each pair's claims.
#
# Environment (all optional):
#   REDLINE    redline binary          (default target/fat/redline)
#   PAIRS      pairs of runs            (default 20)
#   DURATION   seconds per run          (default 2; 6 exercises the per-second tests)
#   CONNS      connections              (default 16)
#   OUT        output directory         (default bench/out)
#   NGINX      nginx binary             (default nginx)
#   SERVER_CPU / CLIENT_CPU  (default 0 / 1)
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$SCRIPT_DIR/.."

REDLINE=${REDLINE:-target/fat/redline}
PAIRS=${PAIRS:-20}
DURATION=${DURATION:-2}
CONNS=${CONNS:-16}
OUT=${OUT:-bench/out}
NGINX=${NGINX:-nginx}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

log() { printf '[compare_noise] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $PAIRS =~ ^[0-9]+$ && $PAIRS -gt 0 && $PAIRS -le 1000 ]] || die "PAIRS must be 1..1000, got '$PAIRS'"
[[ $DURATION =~ ^[0-9]+$ && $DURATION -gt 0 && $DURATION -le 600 ]] || die "DURATION must be 1..600 seconds, got '$DURATION'"
[[ $CONNS =~ ^[0-9]+$ && $CONNS -gt 0 ]] || die "CONNS must be a positive integer, got '$CONNS'"
[[ -x $REDLINE ]] || die "no redline binary at $REDLINE (cargo build --profile fat -p redline, or set REDLINE)"
for need in python3 taskset "$NGINX"; do
    command -v "$need" >/dev/null 2>&1 || die "'$need' not found"
done
if (($(nproc) < 2)); then
    SERVER_CPU=0 CLIENT_CPU=0
fi

TMP=$(mktemp -d /tmp/redline-compare-noise.XXXXXX)
NGINX_PID=
cleanup() {
    if [[ -n $NGINX_PID ]]; then
        kill "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$TMP/nginx/logs" "$TMP/nginx/tmp" "$TMP/nginx/html" "$TMP/runs"
chmod 755 "$TMP" "$TMP/nginx" "$TMP/nginx/html"
# A 440-byte page, as in the benchmark protocol.
python3 -c 'import sys; sys.stdout.write("x" * 439 + "\n")' >"$TMP/nginx/html/small.html"
chmod 644 "$TMP/nginx/html/small.html"
cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
    default_type text/html;
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT;
        root $TMP/nginx/html;
    }
}
EOF
taskset -c "$SERVER_CPU" "$NGINX" -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" \
    -c "$TMP/nginx/nginx.conf" >"$TMP/nginx/logs/stdout.log" 2>&1 &
NGINX_PID=$!
URL="http://127.0.0.1:$PORT/small.html"
up=0
for _ in $(seq 1 50); do
    kill -0 "$NGINX_PID" 2>/dev/null || break
    if "$REDLINE" run -q --no-save -n 1 -c 1 "$URL" >/dev/null 2>&1; then
        up=1
        break
    fi
    sleep 0.1
done
((up)) || { cat "$TMP/nginx/logs/error.log" >&2 2>/dev/null || true; die "nginx did not answer on $URL"; }
log "nginx on $URL (CPU $SERVER_CPU); $PAIRS pairs of -d ${DURATION}s -c $CONNS runs (CPU $CLIENT_CPU)"

run() {
    taskset -c "$CLIENT_CPU" "$REDLINE" run -q --no-save -o json -d "${DURATION}s" -c "$CONNS" -t 1 "$URL" >"$1"
}

significant=0
rows=""
for i in $(seq 1 "$PAIRS"); do
    run "$TMP/runs/a$i.json"
    run "$TMP/runs/b$i.json"
    "$REDLINE" compare "$TMP/runs/a$i.json" "$TMP/runs/b$i.json" >"$TMP/runs/c$i.txt"
    # Table rows whose verdict is a claim.
    claims=$(awk '/^(Requests\/sec|Latency|Errors|Transfer\/sec)/ && / (better|worse) / {
        n = $1; if ($1 == "Latency") n = $1 " " $2;
        v = ($0 ~ / better /) ? "better" : "worse";
        out = out (out ? ", " : "") n " " v } END { print out }' "$TMP/runs/c$i.txt")
    rps=$(awk '/^Requests\/sec/ { print $2 " -> " $3 " (" $4 ")" }' "$TMP/runs/c$i.txt")
    p99=$(awk '/^Latency p99/ { print $3 " -> " $4 " (" $5 ")" }' "$TMP/runs/c$i.txt")
    if [[ -n $claims ]]; then
        significant=$((significant + 1))
    fi
    rows+="| $i | $rps | $p99 | ${claims:-none} |"$'\n'
    log "pair $i: ${claims:-no claim}"
done

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
summary=$(cat <<EOF
### compare_noise: $(date -u +%Y-%m-%dT%H:%M:%SZ)

Machine: $(nproc) CPUs ($cpu), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg).
nginx $("$NGINX" -v 2>&1 | sed 's/^nginx version: nginx\///'), 1 worker on CPU $SERVER_CPU, 440 B page; redline $("$REDLINE" --version | awk '{print $2}') on CPU $CLIENT_CPU,
\`-d ${DURATION}s -c $CONNS -t 1\`, two identical runs back to back per pair, \`redline compare a.json b.json\`.

**$significant of $PAIRS pairs had a significant verdict** (any row better or worse; goal: at most 1 of 20).

| pair | req/s A -> B (change) | p99 A -> B (change) | claims |
|---|---|---|---|
$rows
EOF
)
mkdir -p "$OUT"
printf '%s\n' "$summary" | tee "$OUT/compare_noise.md"
