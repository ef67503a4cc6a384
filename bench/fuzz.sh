#!/usr/bin/env bash
# bench/fuzz.sh: run every fuzz target in fuzz/fuzz_targets/ for a fixed time
# (issue 36, point 8) and print a Markdown table of what each run did.
#
# Uses cargo-fuzz (libFuzzer) with the nightly toolchain. Installs cargo-fuzz
# (`cargo install cargo-fuzz --locked`) if it is missing. Builds go to
# fuzz/target, the growing corpus to fuzz/corpus/TARGET and crashing inputs to
# fuzz/artifacts/TARGET (all gitignored). Per-target logs: bench/out/fuzz/.
#
# Environment (all optional):
#   SECONDS_PER_TARGET  libFuzzer -max_total_time per target (default 60)
#   TARGETS             space-separated target names (default: every
#                       fuzz/fuzz_targets/*.rs)
#   SANITIZER           cargo fuzz -s value: address (default) or none
#   FUZZ_ARGS           extra libFuzzer flags, e.g. "-max_len=8192"
#
# Every target stops by itself: -max_total_time bounds the fuzzing, -timeout
# bounds any single input (10 s), -rss_limit_mb bounds memory (2048), and an
# outer `timeout` kills a run that overstays its time by more than 120 s.
#
# Exit status: 0 when no target crashed, 1 when any did (or failed to run),
# 2 on a setup error (no nightly toolchain, cargo-fuzz not installable).
set -uo pipefail
cd "$(dirname "$0")/.."

SECS=${SECONDS_PER_TARGET:-60}
SANITIZER=${SANITIZER:-address}
FUZZ_ARGS=${FUZZ_ARGS:-}
OUT=bench/out/fuzz
mkdir -p "$OUT"

case "$SECS" in
    '' | *[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET must be a whole number of seconds, got '$SECS'" >&2; exit 2 ;;
esac

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz.sh: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked >&2 || { echo "fuzz.sh: could not install cargo-fuzz" >&2; exit 2; }
fi

if [ -n "${TARGETS:-}" ]; then
    read -r -a LIST <<<"$TARGETS"
else
    LIST=()
    for f in fuzz/fuzz_targets/*.rs; do
        LIST+=("$(basename "$f" .rs)")
    done
fi
for t in "${LIST[@]}"; do
    [ -f "fuzz/fuzz_targets/$t.rs" ] || { echo "fuzz.sh: no fuzz target '$t' in fuzz/fuzz_targets/" >&2; exit 2; }
done

# Build everything once, so the per-target times below are fuzzing only.
echo "fuzz.sh: building ${#LIST[@]} target(s) (sanitizer: $SANITIZER)" >&2
if [ -z "${TARGETS:-}" ]; then
    BUILD=("")   # one cargo invocation builds every target
else
    BUILD=("${LIST[@]}")
fi
for t in "${BUILD[@]}"; do
    # shellcheck disable=SC2086
    cargo +nightly fuzz build -s "$SANITIZER" $t >"$OUT/build.log" 2>&1 || {
        echo "fuzz.sh: build failed, see $OUT/build.log" >&2
        exit 1
    }
done

count_artifacts() {
    find "fuzz/artifacts/$1" -maxdepth 1 -type f \
        \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null | wc -l
}

ROWS=()
FAILED=0
for t in "${LIST[@]}"; do
    log="$OUT/$t.log"
    before=$(count_artifacts "$t")
    mkdir -p "fuzz/corpus/$t"
    corpus_before=$(find "fuzz/corpus/$t" -maxdepth 1 -type f | wc -l)
    echo "fuzz.sh: $t for ${SECS}s" >&2
    start=$(date +%s)
    # shellcheck disable=SC2086
    timeout --kill-after=10 $((SECS + 120)) \
        cargo +nightly fuzz run -s "$SANITIZER" "$t" -- \
        -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 $FUZZ_ARGS >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    after=$(count_artifacts "$t")
    crashes=$((after - before))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    if [ -z "$execs" ]; then
        execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    fi
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corpus_after=$(find "fuzz/corpus/$t" -maxdepth 1 -type f | wc -l)
    note=""
    if [ "$rc" -ne 0 ]; then
        FAILED=1
        if [ "$crashes" -eq 0 ]; then
            note="exit $rc, no artifact (see $log)"
            crashes="?"
        else
            note="exit $rc: $(grep -m1 -oE 'ERROR: libFuzzer: [a-z-]+|panicked at [^:]+:[0-9]+' "$log" || true)"
        fi
    elif [ "$crashes" -ne 0 ]; then
        FAILED=1
    fi
    ROWS+=("| $t | $took | ${execs:-?} | ${cov:-?} / ${ft:-?} | $corpus_before → $corpus_after | $crashes | $note |")
done

echo
echo "Fuzzing: $(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(rustup run nightly rustc --version), $(cargo fuzz --version), sanitizer $SANITIZER, ${SECS}s per target"
echo
echo "| target | seconds | executions | coverage (cov / ft) | corpus | crashes | notes |"
echo "|---|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${ROWS[@]}"
echo
if [ "$FAILED" -ne 0 ]; then
    echo "fuzz.sh: at least one target crashed or failed; inputs in fuzz/artifacts/TARGET/, logs in $OUT/" >&2
    exit 1
fi
echo "fuzz.sh: no crashes" >&2
