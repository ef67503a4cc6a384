#!/usr/bin/env bash
# bench/h3_cost.sh: the client's cost per HTTP/3 request against Debian's
# Caddy, counted rather than timed: system calls (perf stat's
# raw_syscalls:sys_enter tracepoint, at full speed) and user-space
# instructions (callgrind: this VM has no hardware counters for perf, and
# valgrind runs the tool ~50x slower, so with CG_N requests, default N/5).
# Counts do not depend on what else the machine is doing, so they compare
# commits and tools on a busy host where bench/run.sh's CPU seconds swing.
#
# Each count runs twice, with N (or CG_N) and with a tenth of it; the
# difference divided by nine tenths is the cost per request without start-up
# and handshakes. CG_N=0 skips callgrind.
#
# Environment: REDLINE (default target/release/redline), N (default 50000),
# CONNS (8), STREAMS (10), TOOLS (default "redline"; also "oha", "redline_h2"
# (redline --http2 to the same Caddy) and "h3client" (bench/h3-client, h3 +
# h3-quinn on tokio)), OHA_H3 (oha built with --features http3), H3CLIENT
# (default bench/h3-client/target/release/h3-client), CPU (the client's CPU,
# default 1; Caddy gets the other one), PERF (default perf), BREAKDOWN (1:
# also the system calls by name, per request, from one run of N).
# Needs perf (tracepoints readable), valgrind, caddy, openssl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
REDLINE=${REDLINE:-target/release/redline}
N=${N:-50000}
CONNS=${CONNS:-8}
STREAMS=${STREAMS:-10}
TOOLS=${TOOLS:-redline}
OHA_H3=${OHA_H3:-oha}
H3CLIENT=${H3CLIENT:-bench/h3-client/target/release/h3-client}
CPU=${CPU:-1}
PERF=${PERF:-perf}
SRV_CPU=$((CPU == 0 ? 1 : 0))
CG_N=${CG_N:-$((N / 5))}
[[ $N =~ ^[0-9]+$ && $N -ge 1000 ]] || { echo "N must be a number >= 1000" >&2; exit 2; }
[[ $CG_N =~ ^[0-9]+$ && ($CG_N == 0 || $CG_N -ge 1000) ]] || { echo "CG_N must be 0 or a number >= 1000" >&2; exit 2; }
for need in caddy openssl python3 "$PERF"; do
    command -v "$need" >/dev/null || { echo "$need not found" >&2; exit 1; }
done

# shellcheck source=bench/caddy.sh
. bench/caddy.sh
TMP=$(mktemp -d "${TMPDIR:-/tmp}/h3cost.XXXXXX")
CADDY_PID=
cleanup() {
    stop_pid "$CADDY_PID" TERM
    rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

mkdir -p "$TMP/root"
python3 -c 'import sys; open(sys.argv[1], "w").write("x" * 440)' "$TMP/root/small.html"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1
PORT=$(free_port)
caddy_start "$TMP/caddy" "$SRV_CPU" "$PORT" "$TMP/root" "$TMP/cert.pem" "$TMP/key.pem"
for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
    kill -0 "$CADDY_PID" 2>/dev/null || { cat "$TMP/caddy/stderr.log" >&2; exit 1; }
    sleep 0.1
done
sleep 0.3
URL="https://127.0.0.1:$PORT/small.html"

# cmd TOOL N: the command for N requests.
cmd() {
    case $1 in
        redline) CMD=("$REDLINE" run --http3 --insecure -c "$CONNS" --streams "$STREAMS" -n "$2" -t 1 -q --output json --no-save "$URL") ;;
        redline_h2) CMD=("$REDLINE" run --http2 --insecure -c "$CONNS" --streams "$STREAMS" -n "$2" -t 1 -q --output json --no-save "$URL") ;;
        oha) CMD=("$OHA_H3" --no-tui --http-version 3 --insecure -c "$CONNS" -p "$STREAMS" -n "$2" --output-format json "$URL") ;;
        h3client) CMD=("$H3CLIENT" -c "$CONNS" -p "$STREAMS" -n "$2" "$URL") ;;
        *) echo "unknown tool $1" >&2; exit 2 ;;
    esac
}
# syscalls TOOL N: the system calls of N requests.
syscalls() {
    cmd "$1" "$2"
    "$PERF" stat -x, -e raw_syscalls:sys_enter -o "$TMP/perf" \
        taskset -c "$CPU" "${CMD[@]}" >"$TMP/out" 2>"$TMP/err" || { echo "$1 failed:" >&2; tail -5 "$TMP/err" >&2; exit 1; }
    awk -F, '$3 ~ /sys_enter/ { print $1 }' "$TMP/perf"
}
# instructions TOOL N: the user-space instructions of N requests, all threads.
instructions() {
    cmd "$1" "$2"
    taskset -c "$CPU" valgrind --tool=callgrind --callgrind-out-file="$TMP/cg" \
        "${CMD[@]}" >"$TMP/out" 2>"$TMP/err" || { echo "$1 failed under valgrind:" >&2; tail -5 "$TMP/err" >&2; exit 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$TMP/cg"
}
echo "# syscalls: $N vs $((N / 10)) requests; instructions: $CG_N vs $((CG_N / 10)); $CONNS connections x $STREAMS streams, Caddy $(caddy version | awk '{print $1}') on CPU $SRV_CPU, client on CPU $CPU"
echo "| tool | syscalls per request | instructions (user space) per request |"
echo "|---|---:|---:|"
for t in $TOOLS; do
    s1=$(syscalls "$t" "$N")
    s0=$(syscalls "$t" $((N / 10)))
    i1=0 i0=0
    if ((CG_N > 0)); then
        i1=$(instructions "$t" "$CG_N")
        i0=$(instructions "$t" $((CG_N / 10)))
    fi
    if [[ -n ${BREAKDOWN:-} ]]; then
        # Which system calls (BREAKDOWN=1): N requests, the most frequent.
        cmd "$t" "$N"
        "$PERF" stat -x, -e 'syscalls:sys_enter_*' -o "$TMP/perf" taskset -c "$CPU" "${CMD[@]}" >/dev/null 2>&1 || true
        awk -F, -v n="$N" '$1 + 0 > 0 { sub(/syscalls:sys_enter_/, "", $3); printf "%.2f %s\n", $1 / n, $3 }' "$TMP/perf" | sort -rn | head -8 | paste -sd ' ' - | sed "s/^/$t per request: /"
    fi
    awk -v t="$t" -v i1="$i1" -v i0="$i0" -v s1="$s1" -v s0="$s0" -v n=$((N - N / 10)) -v cn=$((CG_N - CG_N / 10)) \
        'BEGIN { printf "| %s | %.2f | %s |\n", t, (s1 - s0) / n, (cn > 0 ? sprintf("%.0f", (i1 - i0) / cn) : "-") }'
done
