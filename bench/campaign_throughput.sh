#!/bin/sh
# Campaign throughput (docs/replay.md "Campaigns"): 40 small traces
# replayed with --jobs 1, --jobs 2 and, when the binary was built with MPI,
# 2 ranks. Scaling efficiency = (traces/s at 2) / (2 x traces/s at 1).
# usage: bench/campaign_throughput.sh [PLENA_BIN]
# env WORKER_CMD: a --worker-cmd template (e.g. src/campaign/testdata/
# fake_worker.sh) to measure the coordinator alone.
set -eu
BIN=${1:-${PLENA_BIN:-build/plena}}
TMP=$(mktemp -d /tmp/plena_campaign_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/in"
"$BIN" trace gen --model tiny-route-16x1 --tokens 4 --dist uniform --seed 1 --samples 20 \
    --out "$TMP/in/a.jsonl"
"$BIN" trace gen --model tiny-route-32x4 --tokens 8 --dist uniform --seed 2 --samples 20 \
    --out "$TMP/in/b.jsonl"

# the shipped settings with VECTOR_SRAM_SIZE 65536 rows: each replay's VRAM
# dump is 8 MiB instead of 512 MiB (same timing figures), as in
# bench/replay_throughput.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
sed '/^\[TRANSACTIONAL.CONFIG.VECTOR_SRAM_SIZE\]/{n;s/value = .*/value = 65536/}' \
    "$ROOT/configs/plena_settings.toml" > "$TMP/small.toml"

now() { date +%s.%N; }
# run_one LABEL PREFIX EXTRA: PREFIX is "" or an mpirun command line
run_one() {
    label=$1 prefix=$2 extra=$3
    out="$TMP/$label"
    set -- campaign run --traces "$TMP/in" --out "$out" --no-determinism-gate --progress none \
        --settings "$TMP/small.toml"
    [ -n "${WORKER_CMD:-}" ] && set -- "$@" --worker-cmd "$WORKER_CMD"
    t0=$(now)
    # shellcheck disable=SC2086
    $prefix "$BIN" "$@" $extra >/dev/null 2>"$TMP/$label.err" || true
    t1=$(now)
    passed=$(grep -c '"status":"passed"' "$out/manifest.jsonl" 2>/dev/null || true)
    awk -v l="$label" -v a="$t0" -v b="$t1" -v p="${passed:-0}" \
        'BEGIN { s = b - a; printf "%-6s %7.2f s  %3d/40 passed  %7.2f traces/s\n", l, s, p, 40 / s }'
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.9f\n", 40 / (b - a) }' > "$TMP/$label.rate"
}

run_one jobs1 "" "--jobs 1"
run_one jobs2 "" "--jobs 2"
r1=$(cat "$TMP/jobs1.rate") r2=$(cat "$TMP/jobs2.rate")
awk -v a="$r1" -v b="$r2" 'BEGIN { printf "scaling efficiency (jobs 2): %.3f\n", b / (2 * a) }'

# 2 ranks on this node: --jobs 2 is the node's width, divided by the 2
# ranks, so each rank runs one worker; --bind-to none keeps the ranks'
# workers off a single bound core. Container env: see scripts/ci_mpi.sh.
if command -v mpirun >/dev/null 2>&1 && "$BIN" campaign --help | grep -q "^mpi: built with MPI"; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    run_one mpi2 "mpirun --oversubscribe --allow-run-as-root --bind-to none -n 2" \
        "--mpi --jobs 2 --scratch $TMP/scratch"
    rm=$(cat "$TMP/mpi2.rate")
    awk -v a="$r1" -v b="$rm" 'BEGIN { printf "scaling efficiency (2 ranks): %.3f\n", b / (2 * a) }'
else
    echo "mpi2: skipped (plena built without MPI or no mpirun)"
fi
