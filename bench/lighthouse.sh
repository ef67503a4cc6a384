#!/usr/bin/env bash
# bench/lighthouse.sh: `redline audit` against Lighthouse (issue 33, point 7).
#
# Writes the fixture pages of bench/lighthouse/site.py (real JPEG and PNG
# photographs, long CSS and JS, render-blocking and deferred resources,
# images shown smaller than they are) into a temporary folder, serves them
# with Debian's nginx in two configurations on a free loopback port —
# "debian" (as installed: gzip for HTML only, no Cache-Control) and "partly"
# (gzip for CSS and JS too, one hour of caching for images) —, runs
# Lighthouse (npm `lighthouse` 12.8.2 on Node 22, desktop preset, headless Chromium)
# and `redline audit -o json --no-probes` on each page, and prints the
# comparison (bench/lighthouse/compare.py) as Markdown: per audit, the
# resources each flags, those in both, and redline's bytes over
# Lighthouse's for the resources in both.
#
# Then, with COPIES=1 (the default when they are installed), the same on
# copies of public sites' pages that Debian ships (`apache2-doc`: the
# httpd.apache.org manual; `python3-doc`: docs.python.org; `sqlite3-doc`:
# sqlite.org; `postgresql-doc-15`: postgresql.org/docs; not `nodejs-doc`:
# installing it removes a Node.js that is not Debian's), copied into the work folder and served by the
# "debian" nginx as the sites' own pages, files and links unchanged.
#
# Needs: nginx, chromium, node/npm (any Node for npm itself), python3 with
# venv. Installed into the work folder, each only when missing: Node 22 as
# npm's `node` package (`npm i -E node@22.23.3`: a node binary under
# node22/node_modules/.bin; the system's node is left alone), Lighthouse
# 12.8.2 run on it (`npm i -E lighthouse@12.8.2`: its render-blocking audit
# reads Chromium 156's traces, 12.2.3's failed on them; 13.x has no
# render-blocking-resources audit, only the render-blocking insight; 12.3+
# needs Node 22), Pillow in a venv.
#
# Environment (all optional):
#   REDLINE   the redline binary (default: target/debug/redline, built here)
#   WORK      work folder (default: a new one under /tmp; removed at the end
#             unless KEEP=1)
#   MARKDOWN  also write the tables to this file (default: bench/out/lighthouse.md)
#   COPIES    1: also the public-site copies, 0: not, only: only them
#             (default: 1 when apache2-doc is installed)
#   MOBILE    1: Lighthouse's mobile preset (its default: a 412 px phone,
#             150 ms / 1.6 Mbit/s) against `redline audit --mobile`
#             (default 0: the desktop preset against plain `audit`)
#   AUDITS    Lighthouse's audits, comma-separated (default: the eight the
#             comparison reads; e.g. AUDITS=render-blocking-resources)
#   LH_SAVE   1: Lighthouse also saves its trace and DevTools log beside
#             each JSON (`--save-assets`: lh-*-0.trace.json; kept with
#             KEEP=1), and redline's port of its render-blocking graph is
#             replayed on them (crates/web/examples/lighthouse_replay.rs,
#             bench/lighthouse/replay.py): a line per table saying whether
#             it gives Lighthouse's own lists and times
#   REDLINE_FLAGS  more flags for every `redline audit`, split at spaces
#             (e.g. `--browser`: the page's scripts run in Chromium, so the
#             images they insert are judged as Lighthouse judges them)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MARKDOWN="${MARKDOWN:-bench/out/lighthouse.md}"
if [ -z "${REDLINE:-}" ]; then
    echo "== cargo build -p redline" >&2
    cargo build -q -p redline >&2
    REDLINE="$ROOT/target/debug/redline"
fi
WORK="${WORK:-$(mktemp -d /tmp/redline-lh.XXXXXX)}"
mkdir -p "$WORK"
NGINX_PID=""
cleanup() {
    if [ -n "$NGINX_PID" ]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

NODE_VERSION=22.23.3
LH_VERSION=12.8.2
NODE22="$WORK/node22/node_modules/.bin"
if [ "$("$NODE22/node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
    echo "== npm i -E node@$NODE_VERSION (into $WORK/node22)" >&2
    mkdir -p "$WORK/node22"
    # A package.json of its own, so npm does not install into a parent folder's.
    [ -f "$WORK/node22/package.json" ] || echo '{"private": true}' > "$WORK/node22/package.json"
    (cd "$WORK/node22" && npm i -E "node@$NODE_VERSION" --no-audit --no-fund >&2)
fi
# Lighthouse and the npm that installs it run on Node 22 (`#!/usr/bin/env node`).
export PATH="$NODE22:$PATH"
LH="$WORK/lh/node_modules/.bin/lighthouse"
if [ "$("$LH" --version 2>/dev/null)" != "$LH_VERSION" ]; then
    echo "== npm i -E lighthouse@$LH_VERSION (into $WORK/lh, on node $(node --version))" >&2
    mkdir -p "$WORK/lh"
    [ -f "$WORK/lh/package.json" ] || echo '{"private": true}' > "$WORK/lh/package.json"
    (cd "$WORK/lh" && npm i -E "lighthouse@$LH_VERSION" --no-audit --no-fund >&2)
fi
if [ ! -x "$WORK/venv/bin/python" ]; then
    echo "== python3 -m venv + pip install pillow (into $WORK)" >&2
    python3 -m venv "$WORK/venv" >&2
    "$WORK/venv/bin/pip" install -q pillow >&2
fi
"$WORK/venv/bin/python" bench/lighthouse/site.py "$WORK/site"

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_nginx() {
    local variant=$1 root=${2:-$WORK/site} extra=""
    case "$variant" in
        debian) extra="gzip on;" ;;
        partly) extra="gzip on; gzip_types text/css application/javascript;
  location ~* \\.(png|jpe?g)\$ { expires 1h; }" ;;
    esac
    mkdir -p "$WORK/nginx/tmp"
    cat > "$WORK/nginx/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; pid $WORK/nginx/nginx.pid; error_log $WORK/nginx/error.log;
events { worker_connections 256; }
http {
  access_log off;
  include /etc/nginx/mime.types;
  client_body_temp_path $WORK/nginx/tmp/body; proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fcgi; uwsgi_temp_path $WORK/nginx/tmp/uwsgi; scgi_temp_path $WORK/nginx/tmp/scgi;
  server {
    listen 127.0.0.1:$PORT;
    root $root;
    $extra
  }
}
CONF
    /usr/sbin/nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
    NGINX_PID=$!
    for _ in $(seq 1 100); do
        if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then return 0; fi
        sleep 0.1
    done
    echo "nginx did not start: $(cat "$WORK/nginx/error.log")" >&2
    exit 1
}
stop_nginx() {
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=""
}

if [ "${MOBILE:-0}" = 1 ]; then
    LH_PRESET=()
    RL_SCREEN=(--mobile)
else
    LH_PRESET=(--preset=desktop)
    RL_SCREEN=()
fi
read -r -a RL_FLAGS <<< "${REDLINE_FLAGS:-}"
LH_EXTRA=()
REPLAY=""
if [ "${LH_SAVE:-0}" = 1 ]; then
    LH_EXTRA=(--save-assets)
    echo "== cargo build -p redline-web --example lighthouse_replay" >&2
    cargo build -q -p redline-web --example lighthouse_replay >&2
    REPLAY="$ROOT/target/debug/examples/lighthouse_replay"
fi
# The replay line for the Lighthouse files of `pairs` (LH_SAVE=1 only).
replay() {
    [ -n "$REPLAY" ] || return 0
    local lhs=() mob=() i
    for ((i = 0; i < ${#pairs[@]}; i += 2)); do lhs+=("${pairs[i]}"); done
    if [ "${MOBILE:-0}" = 1 ]; then mob=(--mobile); fi
    echo
    "$WORK/venv/bin/python" bench/lighthouse/replay.py "$REPLAY" "${mob[@]}" "${lhs[@]}"
}

AUDITS="${AUDITS:-uses-text-compression,uses-long-cache-ttl,uses-responsive-images,modern-image-formats,render-blocking-resources,unminified-css,unminified-javascript,offscreen-images}"
# Lighthouse and redline on each page ($1: a name for the files; the rest
# page paths); appends the result files to `pairs`.
run_pages() {
    local tag=$1 page url lh rl
    shift
    for page in "$@"; do
        url="http://127.0.0.1:$PORT/$page"
        lh="$WORK/lh-$tag-${page//\//_}.json"
        rl="$WORK/rl-$tag-${page//\//_}.json"
        echo "== $tag $page: lighthouse" >&2
        CHROME_PATH=$(command -v chromium) "$LH" "$url" --quiet --output=json --output-path="$lh" \
            "${LH_PRESET[@]}" "${LH_EXTRA[@]}" --only-audits="$AUDITS" \
            --chrome-flags="--headless=new --no-sandbox --disable-gpu --disable-background-networking --disable-dev-shm-usage" >&2
        echo "== $tag $page: redline audit" >&2
        "$REDLINE" audit -o json -q --no-probes "${RL_SCREEN[@]}" "${RL_FLAGS[@]}" "$url" > "$rl" || true
        pairs+=("$lh" "$rl")
    done
}
header() {
    echo "Lighthouse $("$LH" --version) (Node $(node --version)), $(chromium --version), $(/usr/sbin/nginx -v 2>&1), redline $("$REDLINE" --version | awk '{print $2}')${REDLINE_FLAGS:+ with $REDLINE_FLAGS}, $(date -u +%Y-%m-%d)"
    echo
}
COPIES="${COPIES:-$([ -d /usr/share/doc/apache2-doc/manual ] && echo 1 || echo 0)}"
mkdir -p "$(dirname "$MARKDOWN")"
: > "$MARKDOWN"
if [ "$COPIES" != only ]; then
    pairs=()
    for variant in debian partly; do
        start_nginx "$variant"
        run_pages "$variant" shop.html blog.html
        stop_nginx
    done
    { echo "## Fixture pages"; echo; header; "$WORK/venv/bin/python" bench/lighthouse/compare.py "${pairs[@]}"; replay; echo; } | tee -a "$MARKDOWN"
fi
if [ "$COPIES" != 0 ]; then
    # Public sites' pages as Debian ships them: (copy name, folder, pages).
    COPY="$WORK/copies"
    mkdir -p "$COPY"
    pages=()
    add_copy() {
        local name=$1 dir=$2 page
        shift 2
        if [ ! -d "$dir" ]; then
            echo "== $dir missing: $name left out" >&2
            return
        fi
        [ -d "$COPY/$name" ] || cp -rL "$dir" "$COPY/$name"
        for page in "$@"; do pages+=("$name/$page"); done
    }
    add_copy httpd /usr/share/doc/apache2-doc/manual en/index.html en/rewrite/intro.html
    add_copy python /usr/share/doc/python3-doc/html index.html howto/logging.html
    add_copy sqlite /usr/share/doc/sqlite3 index.html atomiccommit.html
    add_copy postgresql /usr/share/doc/postgresql-doc-15/html sql-select.html
    pairs=()
    start_nginx debian "$COPY"
    run_pages copies "${pages[@]}"
    stop_nginx
    { echo "## Public-site copies (Debian -doc packages, Debian-default nginx)"; echo; header; "$WORK/venv/bin/python" bench/lighthouse/compare.py "${pairs[@]}"; replay; } | tee -a "$MARKDOWN"
fi
