#!/bin/sh
# Builds and runs the libFuzzer targets fuzz/fuzz_*.c for a bounded total time
# (docs/trace-schema.md "Validator findings", docs/design.md "Fuzzing").
# Usage: scripts/fuzz.sh [TOTAL_SECONDS=90] [BUILD_DIR=build-fuzz] [TARGET...]
# TOTAL_SECONDS is split evenly over the targets run (at least 3 s each), so
# `make test` stays bounded whatever the number of targets; `make fuzz-long`
# passes a longer total.
#
# Every library source (src/*/*.c except the CLI, tests, doc generators and
# the MPI transport; mpi_none.c stands in) plus the generated reference
# settings is compiled once with clang -fsanitize=fuzzer-no-link,address,
# undefined into one archive; each target links against it, so no per-target
# source list can go stale. The seed corpus fuzz/corpus/<name>/ is read, new
# inputs go to a scratch copy so the repo corpus only changes by hand. Exits
# non-zero when a crash, leak, timeout or sanitizer report is found (the
# reproducer is left in BUILD_DIR/artifacts/).
set -eu
TOTAL=${1:-90}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${2:-$ROOT/build-fuzz}
[ $# -ge 2 ] && shift 2 || shift $#
CC=${CC_FUZZ:-clang}
JOBS=${FUZZ_JOBS:-2}
mkdir -p "$OUT/artifacts" "$OUT/obj"

JANSSON_CFLAGS=$(pkg-config --cflags jansson)
JANSSON_LIBS=$(pkg-config --libs jansson)
VERSION=$(sed -n 's/^project(plena VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CFLAGS="-std=c11 -g -O1 -Wall -Wextra -Werror -ffp-contract=off
        -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DPLENA_VERSION=\"$VERSION\" $SAN
        -I$ROOT/src $JANSSON_CFLAGS"
export CC CFLAGS OUT

# the library: one object per source, rebuilt when missing or older than its
# source or any header (a header change rebuilds everything; cheap enough)
cmake -DIN="$ROOT/configs/plena_settings.toml" -DOUT="$OUT/reference_toml.c" \
    -P "$ROOT/src/settings/embed.cmake"
newest_h=$(find "$ROOT/src" -name '*.h' -o -name '*.def' | xargs ls -t | head -n 1)
srcs=$(find "$ROOT/src" -mindepth 2 -name '*.c' ! -name 'test_*' ! -name docgen.c \
    ! -path '*/src/cli/*' ! -name mpi.c | sort)
# shellcheck disable=SC2086
printf '%s\n' $srcs "$OUT/reference_toml.c" | xargs -P "$JOBS" -I{} sh -c '
    src={}; obj="$OUT/obj/$(echo "$src" | tr / _).o"
    if [ ! -e "$obj" ] || [ "$src" -nt "$obj" ] || [ "$1" -nt "$obj" ]; then
        $CC $CFLAGS -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || exit 255
    fi' sh "$newest_h"
rm -f "$OUT/libplena_fuzz.a"
ar rcs "$OUT/libplena_fuzz.a" "$OUT"/obj/*.o

if [ $# -gt 0 ]; then
    targets=$*
else
    targets=$(cd "$ROOT/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
fi
n=$(echo "$targets" | wc -w)
per=$((TOTAL / n))
[ "$per" -lt 3 ] && per=3
for target in $targets; do
    # shellcheck disable=SC2086
    $CC $CFLAGS -fsanitize=fuzzer -o "$OUT/$target" "$ROOT/fuzz/$target.c" \
        "$OUT/libplena_fuzz.a" $JANSSON_LIBS -lm -lpthread
done

status=0
for target in $targets; do
    seed="$ROOT/fuzz/corpus/${target#fuzz_}"
    work="$OUT/corpus_${target#fuzz_}"
    mkdir -p "$work" "$seed"
    echo "fuzz.sh: running $target for ${per}s (seed corpus $seed)"
    if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$OUT/$target" -max_total_time="$per" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
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
