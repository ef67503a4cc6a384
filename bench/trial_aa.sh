#!/usr/bin/env bash
# bench/trial_aa.sh: is `redline trial` calibrated? 20 A/A trials (state A
# and state B the same: a reload of one unchanged nginx configuration), each
# 3+3 rounds; counts the trials called significant on any metric. The
# verdict's intervals are simultaneous 95 % ones, so about 1 in 20 is
# expected by chance; the bar (issue 37) is at most 1 of 20.
#
# Environment: REDLINE (default target/debug/redline), TRIALS (default 20),
# ARGS (each round's run flags, default "-c 4 -d 1s"). Needs nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
REDLINE=${REDLINE:-target/debug/redline}
TRIALS=${TRIALS:-20}
ARGS=${ARGS:--c 4 -d 1s}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx not installed" >&2; exit 1; }
TMP=$(mktemp -d)
NGINX_PID=
trap '[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$TMP/html" "$TMP/logs" "$TMP/tmp"
head -c 440 /dev/zero | tr '\0' 'x' >"$TMP/html/small.html"
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $TMP/tmp/body;
    proxy_temp_path $TMP/tmp/proxy;
    fastcgi_temp_path $TMP/tmp/fastcgi;
    uwsgi_temp_path $TMP/tmp/uwsgi;
    scgi_temp_path $TMP/tmp/scgi;
    server { listen 127.0.0.1:$PORT; root $TMP/html; }
}
EOF
"$NGINX" -p "$TMP" -e "$TMP/logs/error.log" -c "$TMP/nginx.conf" >"$TMP/logs/stdout.log" 2>&1 &
NGINX_PID=$!
for _ in $(seq 1 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/small.html" 2>/dev/null && break
    sleep 0.1
done
SAME="kill -HUP $NGINX_PID"
called=0
echo "| trial | req/s A | req/s B | req/s change [interval] | called different on |"
echo "|---|---|---|---|---|"
for i in $(seq 1 "$TRIALS"); do
    # shellcheck disable=SC2086
    "$REDLINE" trial "http://127.0.0.1:$PORT/small.html" --before "$SAME" --after "$SAME" \
        --settle 300ms --no-save -q -o json $ARGS >"$TMP/t.json" 2>"$TMP/t.err" \
        || { cat "$TMP/t.err" >&2; exit 1; }
    python3 - "$TMP/t.json" "$i" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
m = {r["metric"]: r for r in t["verdict"]["metrics"]}
r = m["Requests/sec"]
diff = [x["metric"] for x in t["verdict"]["metrics"] if x["call"] in ("better", "worse")]
lo, hi = r.get("ci_pct") or (0, 0)
print(f"| {sys.argv[2]} | {r['a']:.0f} | {r['b']:.0f} | {r.get('change_pct', 0):+.1f}% [{lo:+.1f}%, {hi:+.1f}%] | {', '.join(diff) or '-'} |")
PY
    if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["verdict"]["significant"] else 1)' "$TMP/t.json"; then
        called=$((called + 1))
    fi
done
echo
echo "A/A trials called significant: $called of $TRIALS (bar: at most 1 of 20)"
[ "$called" -le $(( (TRIALS + 19) / 20 )) ]
