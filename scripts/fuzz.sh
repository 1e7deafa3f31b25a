#!/bin/sh
# Builds and runs the libFuzzer targets for a bounded time
# (docs/trace-schema.md "Validator findings", docs/traces.md "safetensors reader").
# Usage: scripts/fuzz.sh [SECONDS=30] [BUILD_DIR=build-fuzz]
# Compiles the needed src/common and src/trace sources directly with clang
# (-fsanitize=fuzzer,address,undefined) and links jansson; the seed corpus in
# fuzz/corpus/<target>/ is read, new inputs go to a scratch copy so the repo
# corpus only changes by hand. Exits non-zero when a crash, leak or sanitizer
# report is found (the reproducer is left in BUILD_DIR/artifacts/).
set -eu
SECONDS_MAX=${1:-30}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$ROOT/build-fuzz}
CC=${CC_FUZZ:-clang}
mkdir -p "$OUT/artifacts"

JANSSON_CFLAGS=$(pkg-config --cflags jansson)
JANSSON_LIBS=$(pkg-config --libs jansson)
CFLAGS="-std=c11 -g -O1 -Wall -Wextra -Werror -ffp-contract=off -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
        -I$ROOT/src $JANSSON_CFLAGS"

build() { # name, sources...
    name=$1
    shift
    # shellcheck disable=SC2086
    $CC $CFLAGS -o "$OUT/$name" "$@" $JANSSON_LIBS -lm
}

build fuzz_trace_validate "$ROOT/fuzz/fuzz_trace_validate.c" \
    "$ROOT/src/common/alloc.c" "$ROOT/src/common/err.c" "$ROOT/src/common/fileio.c" \
    "$ROOT/src/trace/fields.c" "$ROOT/src/trace/validate.c" "$ROOT/src/trace/stats.c" \
    "$ROOT/src/common/json.c" "$ROOT/src/model/model.c"
build fuzz_safetensors "$ROOT/fuzz/fuzz_safetensors.c" "$ROOT/src/ckpt/safetensors.c" \
    "$ROOT/src/common/alloc.c" "$ROOT/src/common/err.c" "$ROOT/src/num/num.c"

status=0
# The time budget is split so the total stays SECONDS_MAX: three quarters for
# the validator, a quarter for the safetensors header parser (a much smaller
# input language).
for target in fuzz_trace_validate fuzz_safetensors; do
    case $target in
    fuzz_safetensors) secs=$((SECONDS_MAX / 4)) ;;
    *) secs=$((SECONDS_MAX - SECONDS_MAX / 4)) ;;
    esac
    [ "$secs" -ge 1 ] || secs=1
    seed="$ROOT/fuzz/corpus/${target#fuzz_}"
    work="$OUT/corpus_${target#fuzz_}"
    mkdir -p "$work"
    echo "fuzz.sh: running $target for ${secs}s (seed corpus $seed)"
    if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$OUT/$target" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
        -artifact_prefix="$OUT/artifacts/${target}-" -print_final_stats=1 \
        "$work" "$seed" >"$OUT/$target.log" 2>&1; then
        echo "fuzz.sh: $target FAILED; see $OUT/$target.log and $OUT/artifacts/" >&2
        tail -n 40 "$OUT/$target.log" >&2
        status=1
    else
        grep -E "stat::number_of_executed_units|Done" "$OUT/$target.log" | tail -n 2
    fi
done
exit $status
