#!/usr/bin/env bash
# bench/diagnose.sh: the diagnosis bench (issue 30, point 7).
#
# Starts each real-server setup of crates/testkit/src/setups.rs (Apache
# prefork and event, nginx, php-fpm, an nginx proxy to a slow backend, a
# memory cgroup, a CPU-pinned pool, a listen backlog of 1, a tbf-shaped link
# in a network namespace, a starved client), runs redline against it, reads
# the server's own evidence of its limit, and prints the verdict table:
# right when the diagnosis names the setup's known limit, wrong when it names
# another resource, not known for "unknown". Every setup stops its servers by
# PID and removes its cgroups, namespace and files, also on Ctrl-C.
# See docs/diagnosis-setups.md.
#
# Needs root for the cgroup, namespace and pinned setups (they are skipped
# otherwise), and apache2, nginx, php-fpm, iproute2 (ip, tc), taskset.
#
# Environment (all optional):
#   ROUNDS    runs of each setup                  (default 1)
#   REDLINE   the redline binary to judge          (default: target/release/redline,
#             built here with cargo build --release -p redline)
#   SETUPS    setup names, e.g. "shaped_link listen_backlog" (default: all)
#   MARKDOWN  also write the table to this file    (default: bench/out/diagnose.md)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS="${ROUNDS:-1}"
MARKDOWN="${MARKDOWN:-bench/out/diagnose.md}"
if [ -z "${REDLINE:-}" ]; then
    echo "== cargo build --release -p redline" >&2
    cargo build --release -p redline >&2
    REDLINE=target/release/redline
fi
echo "== cargo build -p redline-testkit --example diagnose" >&2
cargo build -q -p redline-testkit --example diagnose >&2
mkdir -p "$(dirname "$MARKDOWN")"
# shellcheck disable=SC2086
exec target/debug/examples/diagnose --redline "$REDLINE" --repeat "$ROUNDS" \
    --markdown "$MARKDOWN" ${SETUPS:-}
