#!/bin/sh
# `make bench`: every benchmark of README.md "Benchmarks", one after the other,
# each printing its own figures and ratios (measured in the same run). Sizes
# are short by default (about 50 s in all on 2 cores of a RelWithDebInfo
# build); BENCH_FULL=1 uses each benchmark's own defaults (the README figures,
# many minutes). A benchmark that fails is reported and the others still run;
# the exit status is 1 when any failed. Needs no perf, valgrind or MPI
# (campaign_throughput skips its MPI case without mpirun).
# usage: bench/run_all.sh [BUILD_DIR]   (default: build)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:-build}" && pwd) || exit 2
BIN=$B/plena
[ -x "$BIN" ] || { echo "run_all: no plena binary at $BIN" >&2; exit 2; }
FULL=${BENCH_FULL:-0}

failed=""
# bench NAME CMD...: runs one benchmark, timed, and records a failure.
bench() {
    name=$1
    shift
    echo "=== $name: $*"
    t0=$(date +%s)
    if "$@"; then
        echo "=== $name: done in $(($(date +%s) - t0)) s"
    else
        echo "=== $name: FAILED (exit $?)" >&2
        failed="$failed $name"
    fi
    echo
}

cd "$ROOT"
if [ "$FULL" = 1 ]; then
    bench asm_throughput bash bench/asm_throughput.sh "$BIN"
    bench emu_throughput "$B/bench/emu_throughput"
    bench timing_overhead bash bench/timing_overhead.sh "$BIN"
    bench timeline_overhead bash bench/timeline_overhead.sh "$BIN" - deepseek-v2-lite-mini 8 7
    bench moe_costs "$B/bench/moe_costs"
    bench replay_throughput sh bench/replay_throughput.sh "$BIN"
    bench lowering_compare "$B/bench/lowering_compare" --dir "${TMPDIR:-/tmp}"
else
    bench asm_throughput bash bench/asm_throughput.sh "$BIN" 1000000 3
    bench emu_throughput "$B/bench/emu_throughput" 1 3
    bench timing_overhead bash bench/timing_overhead.sh "$BIN" 1 3
    bench timeline_overhead bash bench/timeline_overhead.sh "$BIN" - deepseek-v2-lite-mini 4 3
    bench moe_costs "$B/bench/moe_costs"
    DECODE_TRACES=${DECODE_TRACES:-2} PREFILL_TRACES=${PREFILL_TRACES:-0} \
        bench replay_throughput sh bench/replay_throughput.sh "$BIN"
    bench lowering_compare "$B/bench/lowering_compare" --quick --dir "${TMPDIR:-/tmp}"
fi
bench campaign_throughput sh bench/campaign_throughput.sh "$BIN"
if [ "$FULL" = 1 ]; then
    bench hbm_throughput sh bench/hbm_throughput.sh "$BIN"
    bench gen_throughput sh bench/gen_throughput.sh "$BIN"
    bench replay_scale sh bench/replay_scale.sh "$BIN" --full
else
    MODEL=qwen3-30b-a3b TOKENS=1 RUNS=1 bench hbm_throughput sh bench/hbm_throughput.sh "$BIN"
    MODEL=qwen3-30b-a3b TOKENS=1 RUNS=1 bench gen_throughput sh bench/gen_throughput.sh "$BIN"
    bench replay_scale sh bench/replay_scale.sh "$BIN" --points qwen3-30b-a3b:1
fi

if [ -n "$failed" ]; then
    echo "run_all: failed:$failed" >&2
    exit 1
fi
echo "run_all: every benchmark ran"
