#!/usr/bin/env bash
# bench/run.sh: compare redline with other HTTP load generators.
#
# Starts its own nginx (one worker, pinned to CPU 0) on a free loopback port,
# then runs every load tool in turn against it, pinned to CPU 1, under
# /usr/bin/time. Reports requests/s, client CPU seconds, requests per client
# CPU-second and peak RSS as Markdown (stdout and $OUT/results.md).
# See bench/README.md and the "Benchmark protocol" in the design notes.
#
# Environment (all optional):
#   REDLINE    redline binary              (default target/release/redline)
#   REDLINE_BASE  a second redline binary to compare against, e.g. one built
#              from an older commit (default: none). Adds a "redline (base)"
#              row next to redline's in every round of every scenario (1-10),
#              with the same flags (flags its `run --help` does not list are
#              dropped when optional, else the row is skipped), and ratio
#              tables: base and head against each peer, and head/base.
#              Within a round, base and head run one after the other; which
#              one goes first alternates from round to round.
#   BUILD      1 = cargo build it if it is missing (default 0)
#   DURATION   seconds per tool run         (default 10)
#   CONNS      concurrent connections       (default 64)
#   OUT        output directory             (default bench/out)
#   SCENARIOS  scenario numbers, e.g. "1 5" (default 1)
#   TOOLS      restrict to these tools, e.g. "redline wrk" (default: all of
#              the scenario's tools)
#   SERVER_CPU / CLIENT_CPU  CPUs for nginx / the load tool (default 0 / 1)
#   NGINX      nginx binary                 (default nginx)
#   OHA        oha binary (default: oha on PATH, else ~/.cargo/bin/oha, else /opt/oha/bin/oha)
#   OHA_H3     oha built with its http3 feature, for scenario 11 (default: $OHA)
#   CADDY      caddy binary, for scenario 11 (default caddy)
#   PAUSE      seconds to rest between tool runs (default 2)
#   S6_REQUESTS  scenario 6's request counts (default "100000 10000000")
#   REPEAT     run each scenario's tools this many times, interleaved
#              (redline, wrk, ..., redline, wrk, ...), and add the median of
#              req per CPU-s and of req/s per tool, and their ratios to the
#              REF tool's (default 1; REF default: the scenario's, else wrk)
#
# Scenarios 7-10 are HTTP/2 and TLS shapes (issue 18): 7 h2c and 8 HTTP/2
# over TLS, 8 connections x 10 streams (REF h2load); 9 HTTP/1.1 over TLS
# (REF wrk); 10 open loop over h2c at 20,000 req/s next to h2load --rps.
# nginx gets two more listeners for them (h2c; TLS with a self-signed
# certificate made by openssl at start, offering h2 and http/1.1).
# Scenario 11 is HTTP/3 (issue 32): Debian's Caddy (HTTP/3 on by default over
# TLS; the same certificate and files, admin off, no access log), started
# only for it and pinned to SERVER_CPU, $H2_CONNS connections x $STREAMS
# streams: redline --http3 and oha --http-version 3 (REF oha), and redline
# --http2 against the same Caddy as a reference row.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
cd "$REPO_ROOT"

REDLINE=${REDLINE:-target/release/redline}
REDLINE_BASE=${REDLINE_BASE:-}
BUILD=${BUILD:-0}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
OUT=${OUT:-bench/out}
SCENARIOS=${SCENARIOS:-1}
TOOLS=${TOOLS:-}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX=${NGINX:-nginx}
CADDY=${CADDY:-caddy}
PAUSE=${PAUSE:-2}
REPEAT=${REPEAT:-1}
S6_REQUESTS=${S6_REQUESTS:-100000 10000000}
REF_SET=${REF:-}
REF=${REF:-wrk}
if [[ -z ${OHA:-} ]]; then
    OHA=$(command -v oha || { [[ -x $HOME/.cargo/bin/oha ]] && echo "$HOME/.cargo/bin/oha"; } || echo /opt/oha/bin/oha)
fi
OHA_H3=${OHA_H3:-$OHA}

STREAMS=${STREAMS:-10}
H2_CONNS=${H2_CONNS:-8}
SMALL_BYTES=440
PAGE_BYTES=51200

log() { printf '[bench] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- checks

[[ $DURATION =~ ^[0-9]+$ && $DURATION -gt 0 ]] || die "DURATION must be a positive integer (seconds), got '$DURATION'"
[[ $CONNS =~ ^[0-9]+$ && $CONNS -gt 0 ]] || die "CONNS must be a positive integer, got '$CONNS'"
[[ $REPEAT =~ ^[0-9]+$ && $REPEAT -gt 0 ]] || die "REPEAT must be a positive integer, got '$REPEAT'"
for n in $S6_REQUESTS; do
    [[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || die "S6_REQUESTS must be positive integers, got '$S6_REQUESTS'"
done
if [[ -n $REDLINE_BASE ]]; then
    [[ -x $REDLINE_BASE ]] || die "REDLINE_BASE: no executable at '$REDLINE_BASE'"
    "$REDLINE_BASE" run --help >/dev/null 2>&1 || die "REDLINE_BASE: '$REDLINE_BASE run --help' failed"
fi
for need in python3 taskset timeout awk openssl "$NGINX"; do
    command -v "$need" >/dev/null 2>&1 || die "'$need' not found (see bench/README.md)"
done
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (Debian package 'time')"
ncpu=$(nproc)
HZ=$(getconf CLK_TCK)
if ((ncpu < 2)); then
    log "warning: only $ncpu CPU; server and client will share it"
    SERVER_CPU=0 CLIENT_CPU=0
fi

if [[ ! -x $REDLINE && $BUILD == 1 ]]; then
    log "building redline (cargo build --release -p redline)"
    cargo build --release -p redline
fi

# Scenario 2 needs 10,000 connections: raise the soft fd limit to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mkdir -p "$OUT/raw"
OUT=$(cd "$OUT" && pwd)
RESULTS="$OUT/results.md"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redline-bench.XXXXXX")
NGINX_PID=
CADDY_PID=
# The server the current scenario runs against (its PID for its CPU ticks).
SRV_PID= SRV_NAME=nginx
# shellcheck source=bench/caddy.sh
. "$SCRIPT_DIR/caddy.sh"
cleanup() {
    stop_pid "$CADDY_PID" TERM
    stop_pid "$NGINX_PID" QUIT
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- helpers

# free_port: ask the kernel for an unused loopback port.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# http_probe URL: one keep-alive style GET; prints "status header_bytes body_bytes".
http_probe() {
    python3 - "$1" <<'PY'
import socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
try:
    s = socket.create_connection((u.hostname, u.port), timeout=2)
    s.sendall(f"GET {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise OSError("closed")
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    print(status, len(head) + 4, len(body))
except (OSError, ValueError, IndexError):
    print(0, 0, 0)
PY
}

# json_get FILE PATH...: print the first dotted PATH found in the JSON object
# in FILE (the file may hold text around one JSON object), or nothing. Only
# numbers and booleans (printed as true/false) count as found.
json_get() {
    python3 - "$@" <<'PY'
import json, sys
path, keys = sys.argv[1], sys.argv[2:]
text = open(path, encoding="utf-8", errors="replace").read()
doc = None
try:
    doc = json.loads(text)
except ValueError:
    start = text.find("{")
    if start >= 0:
        try:
            doc, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            doc = None
for key in keys:
    cur = doc
    for part in key.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            cur = None
            break
    if isinstance(cur, bool):
        print("true" if cur else "false")
        break
    if isinstance(cur, (int, float)):
        print(cur)
        break
PY
}

# grab PATTERN FIELD FILE: awk field FIELD of the first line matching PATTERN.
grab() { awk -v p="$1" -v f="$2" '$0 ~ p { print $f; exit }' "$3"; }

# busy_ticks: CPU ticks spent busy (not idle, not iowait) on all CPUs so far.
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# steal_ticks: CPU ticks the hypervisor took from this VM so far (all CPUs).
steal_ticks() { awk '$1 == "cpu" { print $9 + 0; exit }' /proc/stat; }

# server_ticks: CPU ticks (user + sys) used so far by the scenario's server
# (nginx's master and workers, or Caddy).
server_ticks() {
    local pid total=0 t
    for pid in "$SRV_PID" $(pgrep -P "$SRV_PID" || true); do
        t=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}

# answers PID URL TRIES: waits (TRIES x 0.1 s at most) until URL answers 200,
# while the server PID runs.
answers() {
    local probe
    for _ in $(seq 1 "$3"); do
        kill -0 "$1" 2>/dev/null || return 1
        probe=$(http_probe "$2")
        if [[ ${probe%% *} == 200 ]]; then return 0; fi
        sleep 0.1
    done
    return 1
}

# ---------------------------------------------------------------- nginx

make_docroot() {
    local root=$1
    mkdir -p "$root"
    # Two static pages of exact sizes: a small one (as in the source articles)
    # and a 50 KB page (the lighttpd/Apache comparison used one).
    python3 - "$root" "$SMALL_BYTES" "$PAGE_BYTES" <<'PY'
import sys
root, small, page = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def html(size, title):
    head = f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n<body>\n<p>"
    tail = "</p>\n</body></html>\n"
    filler = "redline benchmark page. " * (size // 24 + 1)
    body = head + filler[: size - len(head) - len(tail)] + tail
    assert len(body.encode()) == size
    return body
with open(f"{root}/small.html", "w") as f:
    f.write(html(small, "small"))
with open(f"{root}/page50k.html", "w") as f:
    f.write(html(page, "page50k"))
PY
}

start_nginx() {
    local prefix="$TMP/nginx"
    mkdir -p "$prefix/logs" "$prefix/tmp"
    make_docroot "$prefix/html"
    # Workers drop to an unprivileged user when started as root: let it read.
    chmod 755 "$TMP" "$prefix" "$prefix/html"
    chmod 644 "$prefix/html/"*.html
    PORT=$(free_port)
    H2C_PORT=$(free_port)
    TLS_PORT=$(free_port)
    # A throwaway self-signed certificate for the TLS scenarios (8, 9).
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
        -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$prefix/key.pem" -out "$prefix/cert.pem" >/dev/null 2>&1 \
        || die "openssl could not make a test certificate"
    cat >"$prefix/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile 20000;
daemon off;
pid $prefix/nginx.pid;
error_log $prefix/logs/error.log warn;

events {
    worker_connections 16384;
}

http {
    types { text/html html; }
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    client_body_temp_path $prefix/tmp/body;
    proxy_temp_path $prefix/tmp/proxy;
    fastcgi_temp_path $prefix/tmp/fastcgi;
    uwsgi_temp_path $prefix/tmp/uwsgi;
    scgi_temp_path $prefix/tmp/scgi;

    server {
        # A deep accept queue: scenario 2 opens 10,000 connections at once,
        # and the default (511) drops SYNs (redline: syn_retransmits).
        listen 127.0.0.1:$PORT backlog=16384;
        server_name localhost;
        root $prefix/html;
    }
    # HTTP/2 over cleartext, prior knowledge only (h2c; scenarios 7, 10).
    server {
        listen 127.0.0.1:$H2C_PORT http2 backlog=16384;
        server_name localhost;
        root $prefix/html;
        http2_max_requests 1000000;
    }
    # TLS offering h2 and http/1.1 by ALPN (scenarios 8, 9).
    server {
        listen 127.0.0.1:$TLS_PORT ssl http2 backlog=16384;
        server_name localhost;
        root $prefix/html;
        ssl_certificate $prefix/cert.pem;
        ssl_certificate_key $prefix/key.pem;
        http2_max_requests 1000000;
    }
}
EOF
    log "starting nginx on 127.0.0.1:$PORT (CPU $SERVER_CPU)"
    taskset -c "$SERVER_CPU" "$NGINX" -p "$prefix" -e "$prefix/logs/error.log" -c "$prefix/nginx.conf" \
        >"$prefix/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    if answers "$NGINX_PID" "http://127.0.0.1:$PORT/small.html" 50; then return 0; fi
    cat "$prefix/logs/stdout.log" "$prefix/logs/error.log" >&2 2>/dev/null || true
    die "nginx did not answer on 127.0.0.1:$PORT"
}

# start_caddy: Debian's Caddy (scenario 11) on CPU $SERVER_CPU, serving
# nginx's docroot over https (h1, h2 and h3; HTTP/3 on the same UDP port) with
# nginx's certificate, and over plain HTTP on a second port for the size
# probe. admin off, no access log. Sets CADDY_PORT and CADDY_HTTP_PORT.
start_caddy() {
    [[ -n $CADDY_PID ]] && return 0
    local dir="$TMP/caddy" prefix="$TMP/nginx"
    CADDY_PORT=$(free_port)
    CADDY_HTTP_PORT=$(free_port)
    log "starting caddy on 127.0.0.1:$CADDY_PORT, TCP and UDP (CPU $SERVER_CPU)"
    caddy_start "$dir" "$SERVER_CPU" "$CADDY_PORT" "$prefix/html" "$prefix/cert.pem" "$prefix/key.pem" "$CADDY_HTTP_PORT"
    if answers "$CADDY_PID" "http://127.0.0.1:$CADDY_HTTP_PORT/small.html" 100; then
        # Its UDP listener opens with the TCP one; a moment for both.
        sleep 0.3
        return 0
    fi
    tail -n 20 "$dir/stderr.log" >&2 2>/dev/null || true
    die "caddy did not answer on 127.0.0.1:$CADDY_HTTP_PORT"
}

# ---------------------------------------------------------------- tools
#
# Each tool has:
#   have_<tool>        succeeds if it can run (else prints why to stdout)
#   cmd_<tool> URL     sets the CMD array (without taskset/time)
#   parse_<tool> FILE  sets RPS (req/s), REQS (total completed, or empty to
#                      derive it as RPS x DURATION) and NOTE (errors etc.)

# knows BIN FLAG: BIN's `run --help` lists FLAG (helps are read once per binary).
declare -A RUN_HELP=()
knows() {
    if [[ -z ${RUN_HELP[$1]+set} ]]; then
        RUN_HELP[$1]=$("$1" run --help 2>/dev/null || true)
    fi
    grep -qE -- "(^|[ ,])$2([ ,=]|\$)" <<<"${RUN_HELP[$1]}"
}

# redline_cmd BIN URL [h2]: sets CMD for a redline binary in this scenario,
# and MISSING to the flags the scenario needs that BIN does not know. Flags
# that change nothing measured (--no-save) are left out when BIN does not know
# them. h2: HTTP/2 over TLS instead of the scenario's protocol (scenario 11's
# reference row).
redline_cmd() {
    local bin=$1 flag
    CMD=("$bin" run -c "$CONNS" -d "${DURATION}s" -t 1 --output json "$2")
    local need=()
    if [[ ${SCENARIO:-} == 3 ]]; then need+=(--no-keepalive); fi
    case ${SCENARIO:-} in
        7) need+=(--h2c --streams "$STREAMS") ;;
        8) need+=(--http2 --insecure --streams "$STREAMS") ;;
        9) need+=(--http1.1 --insecure) ;;
        11) need+=(--http3 --insecure --streams "$STREAMS") ;;
    esac
    if [[ ${3:-} == h2 ]]; then need=(--http2 --insecure --streams "$STREAMS"); fi
    MISSING=''
    for flag in "${need[@]}"; do
        if [[ $flag == --* ]] && ! knows "$bin" "$flag"; then MISSING="${MISSING:+$MISSING }$flag"; fi
    done
    CMD+=("${need[@]}")
    if knows "$bin" --no-save; then CMD+=(--no-save); fi
}

have_redline() {
    if [[ ! -x $REDLINE ]]; then
        echo "not found at '$REDLINE' (build it, or set REDLINE=..., or BUILD=1)"
        return 1
    fi
    if ! "$REDLINE" run --help >/dev/null 2>&1; then
        echo "'$REDLINE run --help' failed (no run subcommand yet?)"
        return 1
    fi
}
cmd_redline() { redline_cmd "$REDLINE" "$1"; }

# redline over HTTP/2 against the HTTP/3 scenario's server: a reference row.
have_redline_h2() { have_redline; }
cmd_redline_h2() { redline_cmd "$REDLINE" "$1" h2; }
parse_redline_h2() { parse_redline "$1"; }

# The base binary (REDLINE_BASE): the same flags; skipped in a scenario that
# needs a flag it does not know.
have_redline_base() {
    [[ -n $REDLINE_BASE ]] || { echo "REDLINE_BASE is not set"; return 1; }
    redline_cmd "$REDLINE_BASE" http://127.0.0.1/
    if [[ -n $MISSING ]]; then
        echo "'$REDLINE_BASE' does not know $MISSING"
        return 1
    fi
}
cmd_redline_base() { redline_cmd "$REDLINE_BASE" "$1"; }
parse_redline_base() { parse_redline "$1"; }

parse_redline() {
    local completed dur failed non2xx limited
    RPS=$(json_get "$1" requests_per_sec summary.requests_per_sec)
    completed=$(json_get "$1" counters.completed summary.completed)
    dur=$(json_get "$1" duration_s summary.duration_s)
    if [[ -z $RPS && -n $completed && -n $dur ]]; then
        RPS=$(awk -v n="$completed" -v d="$dur" 'BEGIN { if (d > 0) printf "%.2f", n / d }')
    fi
    REQS=$completed
    failed=$(json_get "$1" counters.failed)
    non2xx=$(json_get "$1" counters.non_2xx)
    limited=$(json_get "$1" client_limited)
    if [[ -n $failed && $failed != 0 ]]; then NOTE="failed=$failed"; fi
    if [[ -n $non2xx && $non2xx != 0 ]]; then NOTE="${NOTE:+$NOTE }non2xx=$non2xx"; fi
    if [[ $limited == true ]]; then NOTE="${NOTE:+$NOTE }redline says client-limited"; fi
}

have_wrk() { command -v wrk >/dev/null || { echo "not installed (apt-get install wrk)"; return 1; }; }
cmd_wrk() {
    CMD=(wrk -t1 -c"$CONNS" -d"${DURATION}s" "$1")
    # (wrk speaks HTTP/1.1 only: in the HTTP/2 scenarios it is not listed.)
    if [[ ${SCENARIO:-} == 3 ]]; then CMD+=(-H 'Connection: close'); fi
}
parse_wrk() {
    RPS=$(grab '^Requests/sec:' 2 "$1")
    REQS=$(grab 'requests in' 1 "$1")
    local e
    e=$(grep -E 'Socket errors|Non-2xx' "$1" | tr -s ' ' | paste -sd ';' - || true)
    NOTE=$e
}

have_h2load() { command -v h2load >/dev/null || { echo "not installed (apt-get install nghttp2-client)"; return 1; }; }
cmd_h2load() {
    case ${SCENARIO:-} in
        # HTTP/2: h2c by prior knowledge for http://, ALPN h2 for https://.
        7 | 8) CMD=(h2load -t1 -c"$CONNS" -m"$STREAMS" -D "$DURATION" "$1") ;;
        *) CMD=(h2load --h1 -t1 -c"$CONNS" -D "$DURATION" "$1") ;;
    esac
}
parse_h2load() {
    # finished in 3.00s, 52345.67 req/s, 29.81MB/s
    RPS=$(awk '/^finished in/ { print $4; exit }' "$1")
    # requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout
    REQS=$(awk '/^requests:/ { print $8; exit }' "$1")
    local failed errored
    failed=$(awk '/^requests:/ { print $10; exit }' "$1")
    errored=$(awk '/^requests:/ { print $12; exit }' "$1")
    if [[ ${failed:-0} != 0 || ${errored:-0} != 0 ]]; then NOTE="failed=$failed errored=$errored"; fi
}

have_ab() { command -v ab >/dev/null || { echo "not installed (apt-get install apache2-utils)"; return 1; }; }
# -n after -t: -t alone caps the run at 50000 requests.
cmd_ab() {
    if [[ ${SCENARIO:-} == 3 ]]; then
        CMD=(ab -c "$CONNS" -t "$DURATION" -n 100000000 "$1")
    else
        CMD=(ab -k -c "$CONNS" -t "$DURATION" -n 100000000 "$1")
    fi
}
parse_ab() {
    RPS=$(grab '^Requests per second:' 4 "$1")
    REQS=$(grab '^Complete requests:' 3 "$1")
    local failed non2xx
    failed=$(grab '^Failed requests:' 3 "$1")
    non2xx=$(grab '^Non-2xx responses:' 3 "$1")
    if [[ ${failed:-0} != 0 ]]; then NOTE="failed=$failed"; fi
    if [[ -n $non2xx ]]; then NOTE="${NOTE:+$NOTE }non2xx=$non2xx"; fi
}

have_hey() { command -v hey >/dev/null || { echo "not installed (apt-get install hey)"; return 1; }; }
cmd_hey() { CMD=(hey -z "${DURATION}s" -c "$CONNS" "$1"); }
parse_hey() {
    RPS=$(grab 'Requests/sec:' 2 "$1")
    # Status code distribution:  [200] 12345 responses
    REQS=$(awk '/^[ \t]*\[[0-9]+\][ \t]+[0-9]+ responses/ { n += $2 } END { if (n) print n }' "$1")
    local other
    other=$(awk '/^[ \t]*\[[0-9]+\][ \t]+[0-9]+ responses/ && $1 != "[200]" { n += $2 } END { print n + 0 }' "$1")
    if [[ $other != 0 ]]; then NOTE="non200=$other"; fi
    if grep -q '^Error distribution' "$1"; then NOTE="${NOTE:+$NOTE }errors (see raw output)"; fi
}

# oha_bin: the oha of this scenario (scenario 11 needs one built with http3).
oha_bin() { if [[ ${SCENARIO:-} == 11 ]]; then echo "$OHA_H3"; else echo "$OHA"; fi; }
have_oha() {
    local bin
    bin=$(oha_bin)
    [[ -x $bin ]] || { echo "not installed at '$bin' (cargo install oha --locked)"; return 1; }
    if [[ ${SCENARIO:-} == 11 ]] && "$bin" --no-tui -n 1 --http-version 3 https://127.0.0.1:9/ 2>&1 | grep -q 'not been built with HTTP/3'; then
        echo "'$bin' was built without HTTP/3 (cargo install oha --features http3 --locked; set OHA_H3)"
        return 1
    fi
}
cmd_oha() {
    local help bin
    bin=$(oha_bin)
    help=$("$bin" --help 2>&1 || true)
    if grep -q -- '--output-format' <<<"$help"; then
        CMD=("$bin" --no-tui -z "${DURATION}s" -c "$CONNS" --output-format json "$1")
    else
        CMD=("$bin" --no-tui -z "${DURATION}s" -c "$CONNS" --json "$1")
    fi
    if [[ ${SCENARIO:-} == 3 ]]; then CMD+=(--disable-keepalive); fi
    case ${SCENARIO:-} in
        7) CMD+=(--http2 -p "$STREAMS") ;;
        8) CMD+=(--http2 -p "$STREAMS" --insecure) ;;
        9) CMD+=(--insecure) ;;
        11) CMD+=(--http-version 3 -p "$STREAMS" --insecure) ;;
    esac
}
parse_oha() {
    local ok rate
    RPS=$(json_get "$1" summary.requestsPerSec)
    ok=$(json_get "$1" statusCodeDistribution.200)
    REQS=$ok
    rate=$(json_get "$1" summary.successRate)
    if [[ -n $rate ]] && awk -v r="$rate" 'BEGIN { exit !(r < 1) }'; then NOTE="successRate=$rate"; fi
    # oha 1.16's HTTP/3 waits at the end of a -z run (~30 s, the QUIC idle
    # time-out): its req/s is then its requests over that whole time. Said,
    # with the rate over the asked duration next to it.
    local total
    total=$(json_get "$1" summary.total)
    if [[ -n $total && -n $ok ]] && awk -v t="$total" -v d="$DURATION" 'BEGIN { exit !(t > 1.5 * d) }'; then
        NOTE="${NOTE:+$NOTE; }ran $(printf '%.1f' "$total") s for ${DURATION} s: $(awk -v n="$ok" -v d="$DURATION" 'BEGIN { printf "%.0f", n / d }') req/s over ${DURATION} s"
    fi
}

# tool_label TOOL: the tool's name in tables.
tool_label() {
    case $1 in
        redline_base) echo "redline (base)" ;;
        redline_h2) echo "redline --http2" ;;
        *) echo "$1" ;;
    esac
}

tool_version() {
    case $1 in
        redline) "$REDLINE" --version 2>/dev/null | head -1 || true ;;
        redline_h2) ;;
        redline_base) echo "$("$REDLINE_BASE" --version 2>/dev/null | head -1 || true) (base: $REDLINE_BASE)" ;;
        wrk) wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }' || true ;;
        h2load) h2load --version 2>&1 | head -1 || true ;;
        ab) ab -V 2>&1 | awk 'NR == 1 { print "ab", $5 }' | tr -d ',' || true ;;
        hey) dpkg-query -W -f='hey ${Version}\n' hey 2>/dev/null || echo hey ;;
        oha) "$(oha_bin)" --version 2>/dev/null | head -1 || true ;;
    esac
}

# ---------------------------------------------------------------- scenarios
#
# scenario_def N sets S_TITLE, S_PATH, S_TOOLS and S_BYTES (1 = also report
# MB/s and MB per client CPU-second). To add a scenario, add a case here;
# if it needs other tool flags, add a branch on $SCENARIO in the cmd_ function.

scenario_def() {
    S_BYTES=0
    S_CONNS=$CONNS
    S_BASE="http://127.0.0.1:$PORT"
    S_PROBE="http://127.0.0.1:$PORT"
    S_REF=wrk
    S_SRV=nginx
    case $1 in
        1)
            S_TITLE="Scenario 1: keep-alive GET of a small file ($SMALL_BYTES B)"
            S_PATH=/small.html
            S_TOOLS="redline wrk h2load ab hey oha"
            ;;
        2)
            S_TITLE="Scenario 2: keep-alive GET of a small file ($SMALL_BYTES B) at 10,000 connections"
            S_PATH=/small.html
            S_TOOLS="redline wrk h2load oha"
            S_CONNS=10000
            ;;
        3)
            S_TITLE="Scenario 3: a new connection for every request (no keep-alive), small file"
            S_PATH=/small.html
            S_TOOLS="redline ab wrk oha"
            ;;
        5)
            S_TITLE="Scenario 5: keep-alive GET of a 50 KB page ($PAGE_BYTES B)"
            S_PATH=/page50k.html
            S_TOOLS="redline wrk h2load"
            S_BYTES=1
            ;;
        7)
            S_TITLE="Scenario 7: HTTP/2 over cleartext (h2c), $H2_CONNS connections x $STREAMS streams, small file"
            S_PATH=/small.html
            S_TOOLS="redline h2load oha"
            S_CONNS=$H2_CONNS
            S_BASE="http://127.0.0.1:$H2C_PORT"
            S_REF=h2load
            ;;
        8)
            S_TITLE="Scenario 8: HTTP/2 over TLS (ALPN h2), $H2_CONNS connections x $STREAMS streams, small file"
            S_PATH=/small.html
            S_TOOLS="redline h2load oha"
            S_CONNS=$H2_CONNS
            S_BASE="https://127.0.0.1:$TLS_PORT"
            S_REF=h2load
            ;;
        9)
            S_TITLE="Scenario 9: HTTP/1.1 over TLS, keep-alive, small file"
            S_PATH=/small.html
            S_TOOLS="redline wrk h2load oha"
            S_BASE="https://127.0.0.1:$TLS_PORT"
            S_REF=wrk
            ;;
        11)
            command -v "$CADDY" >/dev/null 2>&1 || { log "scenario 11 needs caddy (apt-get install caddy)"; return 1; }
            start_caddy
            S_TITLE="Scenario 11: HTTP/3 (QUIC) against Caddy, $H2_CONNS connections x $STREAMS streams, small file (redline --http2 as a reference)"
            S_PATH=/small.html
            S_TOOLS="redline oha redline_h2"
            S_CONNS=$H2_CONNS
            S_BASE="https://127.0.0.1:$CADDY_PORT"
            S_PROBE="http://127.0.0.1:$CADDY_HTTP_PORT"
            S_REF=oha
            S_SRV=caddy
            ;;
        *)
            return 1
            ;;
    esac
}

# wanted TOOL: TOOL is not left out by $TOOLS (the base runs with redline).
wanted() {
    [[ -z $TOOLS || " $TOOLS " == *" $1 "* ]] && return 0
    [[ $1 == redline_base && " $TOOLS " == *" redline "* ]]
}

# redline_pair ROUND: redline, or with REDLINE_BASE the base and redline
# next to each other: base first in odd rounds, redline first in even ones,
# so neither always runs first.
redline_pair() {
    if [[ -z $REDLINE_BASE ]]; then
        echo redline
    elif (($1 % 2)); then
        echo redline_base redline
    else
        echo redline redline_base
    fi
}

# round_tools "TOOLS" ROUND: the tools of one round in the order they run.
round_tools() {
    local tool pair out=''
    for tool in $1; do
        pair=$tool
        if [[ $tool == redline ]]; then pair=$(redline_pair "$2"); fi
        for tool in $pair; do
            if wanted "$tool"; then out="${out:+$out }$tool"; fi
        done
    done
    echo "$out"
}

# run_tool TOOL URL: runs one tool; appends a table row to $ROWS and the
# command to $CMDS, or a skip line to $SKIPS.
run_tool() {
    local tool=$1 url=$2 why raw timef rc=0 label
    label=$(tool_label "$tool")
    if ! why=$("have_$tool"); then
        log "skip $label: $why"
        # Once per scenario, not once per round.
        grep -qxF -- "- $label: skipped, $why" "$SKIPS" || echo "- $label: skipped, $why" >>"$SKIPS"
        return 0
    fi
    "cmd_$tool" "$url"
    raw="$OUT/raw/s${SCENARIO}-$tool.txt"
    timef="$OUT/raw/s${SCENARIO}-$tool.time"
    log "scenario $SCENARIO: $label (${DURATION}s, $CONNS conns, CPU $CLIENT_CPU)"
    # Each distinct command once (REPEAT runs the same ones again).
    grep -qxF -- "taskset -c $CLIENT_CPU ${CMD[*]}" "$CMDS" || printf '%s\n' "taskset -c $CLIENT_CPU ${CMD[*]}" >>"$CMDS"
    if [[ " $RAN " != *" $tool "* ]]; then RAN="${RAN:+$RAN }$tool"; fi
    local busy0 srv0 busy1 srv1 steal0 steal1
    busy0=$(busy_ticks)
    srv0=$(server_ticks)
    steal0=$(steal_ticks)
    # Connections actually open, counted on the server side half-way through.
    (sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
        ss -Htn state established "( sport = :$PORT )" 2>/dev/null | wc -l >"$raw.open") &
    local sampler=$!
    /usr/bin/time -f '%U %S %M' -o "$timef" \
        taskset -c "$CLIENT_CPU" timeout -k 5 $((DURATION * 3 + 30)) "${CMD[@]}" \
        >"$raw" 2>"$raw.err" || rc=$?
    wait "$sampler" 2>/dev/null || true
    if ((CONNS > 1000)) && [[ -s $raw.open ]]; then
        NOTE_OPEN="open at mid-run: $(cat "$raw.open")"
    else
        NOTE_OPEN=''
    fi
    busy1=$(busy_ticks)
    srv1=$(server_ticks)
    steal1=$(steal_ticks)
    RPS='' REQS='' NOTE=''
    "parse_$tool" "$raw"
    if ((rc != 0)); then NOTE="${NOTE:+$NOTE; }exit status $rc"; fi
    if [[ -n $NOTE_OPEN ]]; then NOTE="${NOTE:+$NOTE; }$NOTE_OPEN"; fi
    if [[ -z $RPS ]]; then
        log "could not parse $label output ($raw, $raw.err)"
        echo "- $label: ran, but its output could not be parsed (exit status $rc; see raw/$(basename "$raw"))" >>"$SKIPS"
        return 0
    fi
    # /usr/bin/time may put "Command exited with non-zero status" first.
    local usr sys rss
    read -r usr sys rss < <(tail -n 1 "$timef")
    awk -v tool="$label" -v rps="$RPS" -v reqs="${REQS:-}" -v dur="$DURATION" \
        -v usr="$usr" -v sys="$sys" -v rss="$rss" -v bytes="$S_BYTES" \
        -v resp="$RESP_BYTES" -v note="$NOTE" -v hz="$HZ" \
        -v busy=$((busy1 - busy0)) -v srv=$((srv1 - srv0)) -v steal=$((steal1 - steal0)) \
        -v ncpu="$ncpu" -v srvname="$SRV_NAME" 'BEGIN {
            if (reqs == "") reqs = rps * dur
            cpu = usr + sys
            per_cpu = cpu > 0 ? sprintf("%.0f", reqs / cpu) : "-"
            row = sprintf("| %s | %.0f | %.2f | %s | %.1f |", tool, rps, cpu, per_cpu, rss / 1024)
            if (bytes == 1)
                row = row sprintf(" %.1f | %s |", rps * resp / 1e6, cpu > 0 ? sprintf("%.1f", reqs * resp / cpu / 1e6) : "-")
            # Server CPU says whether the server was the limit; CPU used by
            # anything else during the run makes the numbers suspect.
            other = busy / hz - srv / hz - cpu
            note = sprintf("%s %.1f CPU-s", srvname, srv / hz) (note != "" ? "; " note : "")
            if (other > 0.5 + 0.05 * dur) note = note sprintf("; other load %.1f CPU-s", other)
            # The hypervisor running other guests on our CPUs: the run measured
            # the host as much as the tools (more than 1 % of the CPU time).
            if (steal / hz > 0.01 * ncpu * dur) note = note sprintf("; host steal %.1f CPU-s", steal / hz)
            row = row " " note " |"
            print row
        }' >>"$ROWS"
    sleep "$PAUSE"
}

# Scenario 6: redline's peak RSS must not grow with the request count.
# With REDLINE_BASE, the base runs next to redline at each count.
run_memory_scenario() {
    local url="http://127.0.0.1:$PORT/small.html" n rc timef raw usr sys rss tool bin i=0
    have_redline >/dev/null || { log "skip scenario 6: redline missing"; return 0; }
    {
        echo "### Scenario 6: peak RSS against the request count (redline)"
        echo
        echo "| tool | requests | req/s | CPU s (user+sys) | peak RSS MB |"
        echo "|---|---:|---:|---:|---:|"
    } >>"$BODY"
    local cmds=''
    for n in $S6_REQUESTS; do
        i=$((i + 1))
        for tool in $(redline_pair "$i"); do
            bin=$REDLINE
            if [[ $tool == redline_base ]]; then bin=$REDLINE_BASE; fi
            raw="$OUT/raw/s6-$tool-$n.txt"
            timef="$OUT/raw/s6-$tool-$n.time"
            rc=0
            local extra=()
            if knows "$bin" --no-save; then extra=(--no-save); fi
            log "scenario 6: $(tool_label "$tool") -n $n"
            /usr/bin/time -f '%U %S %M' -o "$timef" \
                taskset -c "$CLIENT_CPU" timeout -k 5 900 "$bin" run -c "$CONNS" -n "$n" -t 1 --output json "${extra[@]}" "$url" \
                >"$raw" 2>"$raw.err" || rc=$?
            read -r usr sys rss < <(tail -n 1 "$timef")
            RPS='' REQS='' NOTE=''
            parse_redline "$raw"
            awk -v label="$(tool_label "$tool")" -v n="$n" -v rps="${RPS:-0}" -v usr="$usr" -v sys="$sys" -v rss="$rss" -v rc="$rc" 'BEGIN {
                printf "| %s | %d | %.0f | %.2f | %.1f |%s\n", label, n, rps, usr + sys, rss / 1024, rc != 0 ? " exit " rc : ""
            }' >>"$BODY"
            cmds="$cmds"$'\n'"taskset -c $CLIENT_CPU $bin run -c $CONNS -n $n -t 1 --output json ${extra[*]} $url"
            sleep "$PAUSE"
        done
    done
    printf '\nCommands:\n\n```%s\n```\n\n' "$cmds" >>"$BODY"
}

# Scenario 4: open loop at fixed rates: is the rate kept, and how late are sends?
run_rate_scenario() {
    local url="http://127.0.0.1:$PORT/small.html" rate raw timef rc usr sys rss cmds='' k tool
    have_redline >/dev/null || { log "skip scenario 4: redline missing"; return 0; }
    local runs="$TMP/runs.4"
    : >"$runs"
    {
        echo "### Scenario 4: open loop (redline -r), small file, ${DURATION} s per rate"
        echo
        echo "| tool | target req/s | achieved (sent) req/s | completed req/s | lag p99 | latency p99 | CPU s (user+sys) | host steal ms | peak RSS MB | notes |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    } >>"$BODY"
    # REPEAT runs each rate that many times, in turn (20k, 50k, 20k, 50k, ...);
    # with REDLINE_BASE the base runs next to redline at each rate.
    for ((k = 1; k <= REPEAT; k++)); do
        for rate in 20000 50000; do
            for tool in $(redline_pair "$k"); do
                local bin=$REDLINE
                if [[ $tool == redline_base ]]; then
                    bin=$REDLINE_BASE
                    if ! have_redline_base >/dev/null; then continue; fi
                fi
                raw="$OUT/raw/s4-$tool-$rate.txt"
                timef="$OUT/raw/s4-$tool-$rate.time"
                rc=0
                log "scenario 4: $(tool_label "$tool") -r $rate"
                local extra=()
                if knows "$bin" --no-save; then extra=(--no-save); fi
                /usr/bin/time -f '%U %S %M' -o "$timef" \
                    taskset -c "$CLIENT_CPU" timeout -k 5 $((DURATION * 3 + 30)) \
                    "$bin" run -r "$rate" -c 1000 -d "${DURATION}s" -t 1 --output json "${extra[@]}" "$url" \
                    >"$raw" 2>"$raw.err" || rc=$?
                read -r usr sys rss < <(tail -n 1 "$timef")
                python3 - "$raw" "$rate" "$usr" "$sys" "$rss" "$rc" "$(tool_label "$tool")" "$k" "$runs" >>"$BODY" <<'PY'
import json, sys
raw, rate, usr, sys_, rss, rc, label, k, runs = sys.argv[1:]
try:
    v = json.load(open(raw))
except Exception as e:
    print(f"| {label} | {rate} | - | - | - | - | - | - | - | unreadable output: {e} |")
    sys.exit(0)
notes = []
if v.get("client_limited"):
    notes.append("client-limited: " + "; ".join(w["code"] for w in v.get("warnings", [])))
if v["counters"]["failed"]:
    notes.append(f"failed={v['counters']['failed']}")
if rc != "0":
    notes.append(f"exit {rc}")
lag = v["scheduler_lag"]["percentiles_us"]["p99"]
lat = v["latency"]["percentiles_us"]["p99"]
steal = v.get("client", {}).get("steal_s", 0.0) * 1000
cpu = float(usr) + float(sys_)
print(f"| {label} | {rate} | {v['sent_per_sec']:.0f} | {v['requests_per_sec']:.0f} | {lag} µs | {lat} µs | "
      f"{cpu:.2f} | {steal:.0f} | {int(rss) / 1024:.1f} | {'; '.join(notes)} |")
with open(runs, "a") as f:
    f.write(f"{label}\t{rate}\t{k}\t{cpu:.3f}\t{v['requests_per_sec']:.1f}\t{lag}\t{int(not notes)}\n")
PY
                if ((k == 1)); then cmds="$cmds"$'\n'"taskset -c $CLIENT_CPU $bin run -r $rate -c 1000 -d ${DURATION}s -t 1 --output json ${extra[*]} $url"; fi
                sleep "$PAUSE"
            done
            if command -v h2load >/dev/null && [[ -z $TOOLS || " $TOOLS " == *" h2load "* ]]; then
                raw="$OUT/raw/s4-h2load-$rate.txt"
                timef="$OUT/raw/s4-h2load-$rate.time"
                rc=0
                log "scenario 4: h2load --rps $((rate / CONNS)) per connection"
                /usr/bin/time -f '%U %S %M' -o "$timef" \
                    taskset -c "$CLIENT_CPU" timeout -k 5 $((DURATION * 3 + 30)) \
                    h2load --h1 -t1 -c "$CONNS" --rps "$((rate / CONNS))" -D "$DURATION" "$url" \
                    >"$raw" 2>"$raw.err" || rc=$?
                read -r usr sys rss < <(tail -n 1 "$timef")
                local got
                got=$(awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($i ~ /req\/s/) { print $(i - 1); exit } }' "$raw" | tr -d ',')
                awk -v rate="$rate" -v got="${got:-0}" -v usr="$usr" -v sys="$sys" -v rss="$rss" 'BEGIN {
                    printf "| h2load --rps | %d | - | %.0f | - | - | %.2f | - | %.1f | no intended-time latency |\n", rate, got, usr + sys, rss / 1024
                }' >>"$BODY"
                printf 'h2load --rps\t%s\t%s\t%s\t%s\t-\t%s\n' "$rate" "$k" "$(awk -v u="$usr" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')" "${got:-0}" "$((rc == 0))" >>"$runs"
                if ((k == 1)); then cmds="$cmds"$'\n'"taskset -c $CLIENT_CPU h2load --h1 -t1 -c $CONNS --rps $((rate / CONNS)) -D $DURATION $url"; fi
                sleep "$PAUSE"
            fi
        done
    done
    echo >>"$BODY"
    if ((REPEAT > 1)) || [[ -n $REDLINE_BASE ]]; then
        rate_summary "$runs" >>"$BODY"
        echo >>"$BODY"
    fi
    printf 'Commands:\n\n```%s\n```\n\n' "$cmds" >>"$BODY"
}

# rate_summary RUNS: per rate, each tool's median client CPU s and scheduler
# lag p99 over the rounds, and the CPU ratios: base and head against
# h2load --rps, head against base (per-round medians, min-max). RUNS holds
# one line per run: label, rate, round, CPU s, completed req/s, lag p99 us,
# clean (1: no note). Only clean runs count when every tool has one.
rate_summary() {
    python3 - "$1" "$(tool_label redline_base)" <<'PY'
import statistics, sys
runs_path, base = sys.argv[1], sys.argv[2]
head, peer = "redline", "h2load --rps"
runs = {}
for line in open(runs_path):
    label, rate, k, cpu, rps, lag, ok = line.rstrip("\n").split("\t")
    runs.setdefault(int(rate), {}).setdefault(label, {})[int(k)] = (float(cpu), float(rps), lag, ok == "1")
def fmt(x):
    return f"{x:.2f}x"
print("| target req/s | tool | runs | median CPU s | median completed req/s | median lag p99 | CPU vs h2load --rps (per-round) | CPU vs base (per-round) |")
print("|---:|---|---:|---:|---:|---:|---:|---:|")
for rate in sorted(runs):
    tools = runs[rate]
    clean = all(any(r[3] for r in t.values()) for t in tools.values())
    def use(t, k):
        return k in tools.get(t, {}) and (not clean or tools[t][k][3])
    def ratios(a, b):
        xs = [tools[a][k][0] / tools[b][k][0] for k in tools.get(a, {}) if use(a, k) and use(b, k) and tools[b][k][0] > 0]
        if not xs:
            return "-"
        return f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})"
    for t in [x for x in (base, head, peer) if x in tools] + sorted(set(tools) - {base, head, peer}):
        ks = [k for k in tools[t] if use(t, k)]
        cpu = statistics.median(tools[t][k][0] for k in ks) if ks else 0
        rps = statistics.median(tools[t][k][1] for k in ks) if ks else 0
        lags = [float(tools[t][k][2]) for k in ks if tools[t][k][2] != "-"]
        lag = f"{statistics.median(lags):.0f} µs" if lags else "-"
        vs_peer = ratios(t, peer) if t != peer and peer in tools else "-"
        vs_base = ratios(t, base) if t == head and base in tools else "-"
        print(f"| {rate} | {t} | {len(ks)} | {cpu:.2f} | {rps:.0f} | {lag} | {vs_peer} | {vs_base} |")
print()
print("CPU ratios below 1.00x: less client CPU for the same rate. Runs with a note (client-limited, failures, exit status) are left out when every tool has a clean run.")
PY
}

# Scenario 10: open loop over h2c at a fixed rate: the client CPU it costs,
# next to h2load --rps (which paces per connection and has no intended-time
# latency). REPEAT rounds, interleaved.
run_h2_rate_scenario() {
    local url="http://127.0.0.1:$H2C_PORT/small.html" rate=${H2_RATE:-20000} raw timef rc usr sys rss cmds='' k
    local per_conn=$((rate / H2_CONNS))
    {
        echo "### Scenario 10: open loop over h2c at $rate req/s, $H2_CONNS connections x $STREAMS streams, ${DURATION} s"
        echo
        echo "| round | tool | completed req/s | CPU s (user+sys) | CPU s per 100k req | peak RSS MB | notes |"
        echo "|---:|---|---:|---:|---:|---:|---|"
    } >>"$BODY"
    local tool bin label
    for ((k = 1; k <= REPEAT; k++)); do
        for tool in $(redline_pair "$k"); do
            wanted "$tool" || continue
            if [[ $tool == redline_base ]]; then
                bin=$REDLINE_BASE
                if ! knows "$bin" --h2c || ! knows "$bin" --streams; then
                    log "skip redline (base) in scenario 10: it does not know --h2c/--streams"
                    continue
                fi
            else
                bin=$REDLINE
                have_redline >/dev/null || continue
            fi
            label=$(tool_label "$tool")
            local extra=()
            if knows "$bin" --no-save; then extra=(--no-save); fi
            raw="$OUT/raw/s10-$tool-$k.txt"
            timef="$OUT/raw/s10-$tool-$k.time"
            rc=0
            log "scenario 10: $label --h2c -r $rate (round $k)"
            /usr/bin/time -f '%U %S %M' -o "$timef" \
                taskset -c "$CLIENT_CPU" timeout -k 5 $((DURATION * 3 + 30)) \
                "$bin" run --h2c --streams "$STREAMS" -r "$rate" -c "$H2_CONNS" -d "${DURATION}s" -t 1 --output json "${extra[@]}" "$url" \
                >"$raw" 2>"$raw.err" || rc=$?
            read -r usr sys rss < <(tail -n 1 "$timef")
            RPS='' REQS='' NOTE=''
            parse_redline "$raw"
            awk -v k="$k" -v label="$label" -v rps="${RPS:-0}" -v reqs="${REQS:-0}" -v usr="$usr" -v sys="$sys" -v rss="$rss" -v rc="$rc" -v note="$NOTE" 'BEGIN {
                cpu = usr + sys
                printf "| %d | %s | %.0f | %.2f | %s | %.1f | %s%s |\n", k, label, rps, cpu, (reqs > 0 ? sprintf("%.3f", cpu / reqs * 100000) : "-"), rss / 1024, note, (rc != 0 ? " exit " rc : "")
            }' >>"$BODY"
            if ((k == 1)); then cmds="$cmds"$'\n'"taskset -c $CLIENT_CPU $bin run --h2c --streams $STREAMS -r $rate -c $H2_CONNS -d ${DURATION}s -t 1 --output json ${extra[*]} $url"; fi
            sleep "$PAUSE"
        done
        if command -v h2load >/dev/null && [[ -z $TOOLS || " $TOOLS " == *" h2load "* ]]; then
            raw="$OUT/raw/s10-h2load-$k.txt"
            timef="$OUT/raw/s10-h2load-$k.time"
            rc=0
            log "scenario 10: h2load --rps $per_conn per connection (round $k)"
            /usr/bin/time -f '%U %S %M' -o "$timef" \
                taskset -c "$CLIENT_CPU" timeout -k 5 $((DURATION * 3 + 30)) \
                h2load -t1 -c "$H2_CONNS" -m "$STREAMS" --rps "$per_conn" -D "$DURATION" "$url" \
                >"$raw" 2>"$raw.err" || rc=$?
            read -r usr sys rss < <(tail -n 1 "$timef")
            RPS='' REQS='' NOTE=''
            parse_h2load "$raw"
            awk -v k="$k" -v rps="${RPS:-0}" -v reqs="${REQS:-0}" -v usr="$usr" -v sys="$sys" -v rss="$rss" -v rc="$rc" -v note="$NOTE" 'BEGIN {
                cpu = usr + sys
                printf "| %d | h2load --rps | %.0f | %.2f | %s | %.1f | no intended-time latency%s%s |\n", k, rps, cpu, (reqs > 0 ? sprintf("%.3f", cpu / reqs * 100000) : "-"), rss / 1024, (note != "" ? "; " note : ""), (rc != 0 ? "; exit " rc : "")
            }' >>"$BODY"
            if ((k == 1)); then cmds="$cmds"$'\n'"taskset -c $CLIENT_CPU h2load -t1 -c $H2_CONNS -m $STREAMS --rps $per_conn -D $DURATION $url"; fi
            sleep "$PAUSE"
        fi
    done
    printf '\nCommands:\n\n```%s\n```\n\n' "$cmds" >>"$BODY"
}

# summary_tables ROWS REF: medians over the interleaved rounds of ROWS (one
# scenario's table rows) and their ratios to REF's; with a base binary, also
# base's and head's ratios against every peer, and head against base.
# A run disturbed by the host (steal) or by other load is left out of the
# medians when every tool has at least one clean run. A per-round ratio
# pairs each run with the other tool's run of the same round, which cancels
# slow drifts of the machine's speed; their spread (min-max) is the run's noise.
summary_tables() {
    awk -F'|' -v ref="$2" -v base="$(tool_label redline_base)" -v head=redline '
        { gsub(/^ +| +$/, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $5)
            if ($5 == "-") next
            if (!($2 in round)) order[++ntools] = $2
            k = ++round[$2]; pc[$2, k] = $5; rs[$2, k] = $3
            bad = ($(NF - 1) ~ /host steal|other load/)
            if (!bad) { pc_ok[$2, k] = 1; v[$2] = v[$2] " " $5; r[$2] = r[$2] " " $3 }
            va[$2] = va[$2] " " $5; ra[$2] = ra[$2] " " $3 }
        function median(list,   a, n, i, j, t) {
            n = split(list, a, " ")
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n == 0 ? 0 : n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        # per_round(A, B, VAL): the ratios A/B of the rounds both ran (clean
        # ones only when the medians are over clean runs), as a list.
        function per_round(a, b, val,   k, out, x, y) {
            out = ""
            for (k = 1; k <= round[a] && k <= round[b]; k++) {
                x = (val == "rps") ? rs[a, k] : pc[a, k]
                y = (val == "rps") ? rs[b, k] : pc[b, k]
                if (y > 0 && (!clean || (((a, k) in pc_ok) && ((b, k) in pc_ok)))) out = out " " x / y
            }
            return out
        }
        function spread(list,   a, n, i, lo, hi) {
            n = split(list, a, " ")
            if (n == 0) return "-"
            lo = hi = a[1] + 0
            for (i = 2; i <= n; i++) { if (a[i] + 0 < lo) lo = a[i] + 0; if (a[i] + 0 > hi) hi = a[i] + 0 }
            return sprintf("%.2fx (%.2f-%.2f)", median(list), lo, hi)
        }
        END {
            clean = 1
            for (t in va) if (!(t in v)) clean = 0
            if (!clean) for (t in va) { v[t] = va[t]; r[t] = ra[t] }
            print "| tool | runs | clean runs | median req/s | vs " ref " | median req per CPU-s | vs " ref " | median of per-round ratios |"
            print "|---|---:|---:|---:|---:|---:|---:|---:|"
            w = (ref in v) ? median(v[ref]) : 0
            wr = (ref in r) ? median(r[ref]) : 0
            for (i = 1; i <= ntools; i++) {
                t = order[i]
                m = median(v[t]); mr = median(r[t])
                n = split(va[t], x, " "); nc = split((t in v) ? v[t] : "", x, " ")
                pr = per_round(t, ref, "pc")
                printf "| %s | %d | %d | %.0f | %s | %.0f | %s | %s |\n", t, n, clean ? nc : 0, mr, (wr > 0 ? sprintf("%.2fx", mr / wr) : "-"), m, (w > 0 ? sprintf("%.2fx", m / w) : "-"), (pr != "" ? sprintf("%.2fx", median(pr)) : "-")
            }
            if (!clean) print "\nEvery run of some tool was disturbed (host steal or other load): the medians are over all runs."
            if (!(base in va) || !(head in va)) exit
            mb = median(v[base]); mh = median(v[head])
            print ""
            print "Head (" head ") against base (" base "), req per CPU-s: ratios of the medians, and the median (min-max) of the per-round ratios."
            print ""
            print "| against | base: ratio of medians | base: per-round | head: ratio of medians | head: per-round | head vs base (per-round medians) |"
            print "|---|---:|---:|---:|---:|---:|"
            for (i = 1; i <= ntools; i++) {
                t = order[i]
                if (t == base || t == head) continue
                p = median(v[t])
                pb = per_round(base, t, "pc"); ph = per_round(head, t, "pc")
                change = (pb != "" && ph != "" && median(pb) > 0) ? sprintf("%+.1f %%", (median(ph) / median(pb) - 1) * 100) : "-"
                printf "| %s | %s | %s | %s | %s | %s |\n", t, (p > 0 ? sprintf("%.2fx", mb / p) : "-"), spread(pb), (p > 0 ? sprintf("%.2fx", mh / p) : "-"), spread(ph), change
            }
            printf "| %s | 1.00x | - | %s | %s | - |\n", base, (mb > 0 ? sprintf("%.2fx", mh / mb) : "-"), spread(per_round(head, base, "pc"))
            rb = median(r[base]); rh = median(r[head])
            printf "\nHead against base, req/s: %s ratio of the medians; per-round %s.\n", (rb > 0 ? sprintf("%.2fx", rh / rb) : "-"), spread(per_round(head, base, "rps"))
        }' "$1"
}

run_scenario() {
    SCENARIO=$1
    if [[ $SCENARIO == 4 ]]; then
        run_rate_scenario
        return 0
    fi
    if [[ $SCENARIO == 6 ]]; then
        run_memory_scenario
        return 0
    fi
    if [[ $SCENARIO == 10 ]]; then
        run_h2_rate_scenario
        return 0
    fi
    if ! scenario_def "$SCENARIO"; then
        log "scenario $SCENARIO is not defined yet; skipping"
        printf '### Scenario %s\n\nNot defined yet.\n\n' "$SCENARIO" >>"$BODY"
        return 0
    fi
    local url="$S_BASE$S_PATH" probe status hdr body saved_conns=$CONNS
    CONNS=$S_CONNS
    # The size comes from the server's plain HTTP/1.1 listener (the same file).
    probe=$(http_probe "$S_PROBE$S_PATH")
    read -r status hdr body <<<"$probe"
    [[ $status == 200 ]] || die "GET $url returned status '$status'"
    RESP_BYTES=$((hdr + body))
    ROWS="$TMP/rows.$SCENARIO" CMDS="$TMP/cmds.$SCENARIO" SKIPS="$TMP/skips.$SCENARIO"
    if [[ $S_SRV == caddy ]]; then SRV_PID=$CADDY_PID SRV_NAME=caddy; else SRV_PID=$NGINX_PID SRV_NAME=nginx; fi
    : >"$ROWS"
    : >"$CMDS"
    : >"$SKIPS"
    local tool rep
    for ((rep = 1; rep <= REPEAT; rep++)); do
        for tool in $(round_tools "$S_TOOLS" "$rep"); do
            run_tool "$tool" "$url"
        done
    done
    {
        printf '### %s\n\n' "$S_TITLE"
        printf '%s connections, %s s per tool; response %s B (%s B headers + %s B body).\n\n' \
            "$CONNS" "$DURATION" "$RESP_BYTES" "$hdr" "$body"
        if ((S_BYTES)); then
            echo "| tool | req/s | CPU s (user+sys) | req per CPU-s | peak RSS MB | MB/s | MB per CPU-s | notes |"
            echo "|---|---:|---:|---:|---:|---:|---:|---|"
        else
            echo "| tool | req/s | CPU s (user+sys) | req per CPU-s | peak RSS MB | notes |"
            echo "|---|---:|---:|---:|---:|---|"
        fi
        cat "$ROWS"
        echo
        if ((REPEAT > 1)) || [[ -n $REDLINE_BASE ]]; then
            summary_tables "$ROWS" "${REF_SET:-$S_REF}"
            echo
        fi
        if [[ -s $SKIPS ]]; then
            cat "$SKIPS"
            echo
        fi
        echo "Commands (URL as run; the port is chosen per invocation):"
        echo
        echo '```'
        cat "$CMDS"
        echo '```'
        echo
    } >>"$BODY"
    CONNS=$saved_conns
}

# ---------------------------------------------------------------- main

b0=$(busy_ticks)
sleep 1
idle_load=$(awk -v b=$(($(busy_ticks) - b0)) -v hz="$HZ" 'BEGIN { printf "%.2f", b / hz }')
if awk -v l="$idle_load" 'BEGIN { exit !(l > 0.2) }'; then
    log "warning: the machine is busy before the benchmark ($idle_load CPU-s used in 1 s); results will be noisy"
fi
start_nginx
SRV_PID=$NGINX_PID
BODY="$TMP/body.md"
: >"$BODY"
RAN=''

for s in $SCENARIOS; do
    run_scenario "$s"
done

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
versions=
for t in $RAN; do
    versions="${versions:+$versions, }$(tool_version "$t")"
done
{
    echo "## Peer comparison, $(date -u +%F)"
    echo
    echo "Machine: $ncpu CPUs, ${cpu_model:-unknown CPU}, Linux $(uname -r)." \
        "Server: $("$NGINX" -v 2>&1 | sed 's/^nginx version: //'), 1 worker, pinned to CPU $SERVER_CPU," \
        "static files, keep-alive, access log off." \
        "${CADDY_PID:+Scenario 11: Caddy $("$CADDY" version 2>/dev/null | awk '{ print $1 }'), pinned to CPU $SERVER_CPU, admin and access log off.}" \
        "Client: each tool in turn, pinned to CPU $CLIENT_CPU, measured with \`/usr/bin/time -f '%U %S %M'\`."
    echo "Tools: ${versions:-none}."
    echo
    echo "req/s is each tool's own figure; req per CPU-s = completed requests / (user + sys CPU s);" \
        "completed requests are the tool's own count where it prints one, else req/s x duration." \
        "MB = 10^6 bytes; MB/s = req/s x response size (headers + body)."
    echo
    cat "$BODY"
} | tee "$RESULTS"
log "wrote $RESULTS (raw outputs in $OUT/raw)"
