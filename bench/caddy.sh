# bench/caddy.sh: sourced by bench/run.sh (scenario 11) and bench/h3_cost.sh:
# Debian's Caddy for the HTTP/3 benchmarks, and stopping a server by PID.
#
# caddy_start DIR CPU PORT ROOT CERT KEY [HTTP_PORT]: writes DIR/Caddyfile and
# starts `${CADDY:-caddy}` pinned to CPU, serving ROOT over https on
# 127.0.0.1:PORT (h1, h2 and h3: TCP and UDP) with CERT and KEY, and over
# plain HTTP on HTTP_PORT when given; admin off, no access log, its state in
# DIR. Sets CADDY_PID; the caller waits until it answers.
caddy_start() {
    local dir=$1 cpu=$2 port=$3 root=$4 cert=$5 key=$6 http_port=${7:-}
    mkdir -p "$dir"
    {
        cat <<EOF
{
    admin off
    auto_https disable_redirects
    default_sni 127.0.0.1
    storage file_system $dir/data
    servers {
        protocols h1 h2 h3
    }
}
https://127.0.0.1:$port {
    tls $cert $key
    root * $root
    file_server
}
EOF
        if [[ -n $http_port ]]; then
            printf 'http://127.0.0.1:%s {\n    root * %s\n    file_server\n}\n' "$http_port" "$root"
        fi
    } >"$dir/Caddyfile"
    HOME=$dir XDG_DATA_HOME=$dir/data XDG_CONFIG_HOME=$dir/config \
        taskset -c "$cpu" "${CADDY:-caddy}" run --adapter caddyfile --config "$dir/Caddyfile" \
        >"$dir/stdout.log" 2>"$dir/stderr.log" &
    CADDY_PID=$!
}

# stop_pid PID SIGNAL: sends SIGNAL to PID if it runs, waits up to 2 s for
# it to end, then kills it.
stop_pid() {
    local pid=$1 sig=$2
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
}
