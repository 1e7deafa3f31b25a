#!/bin/sh
# Replay throughput (docs/replay.md "Pipeline"; issue 6 item 7): traces per
# minute of `plena replay` for qwen3-30b-a3b decode traces (1 token) and
# prefill traces (64 tokens), with and without the stage profile. Traces come
# from `plena trace gen --dist uniform`; each case replays them in one serial
# command (--jobs 1). Settings: the shipped file with VECTOR_SRAM_SIZE 65536
# rows (an 8 MiB VRAM dump instead of 512 MiB; same timing), because the dumps
# of the shipped 4194304-row VRAM otherwise dominate a decode replay.
# Throughput counts every replayed trace, passed or not (the gate verdict is
# printed next to it).
# usage: bench/replay_throughput.sh PLENA_BIN
# env: DECODE_TRACES (default 4), PREFILL_TRACES (default 1: about 3 minutes
# each on a RelWithDebInfo build; 0 skips the prefill cases), KEEP=1 keeps the
# scratch directory.
set -eu
BIN=${1:-${PLENA_BIN:-build/plena}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NDEC=${DECODE_TRACES:-4}
NPRE=${PREFILL_TRACES:-1}
TMP=$(mktemp -d /tmp/plena_replay_bench.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT

key='[TRANSACTIONAL.CONFIG.VECTOR_SRAM_SIZE]'
awk -v k="$key" '{ if (prev == k && $1 == "value") print "value = 65536"; else print; prev = $0 }' \
    "$ROOT/configs/plena_settings.toml" > "$TMP/settings.toml"
grep -q '^value = 65536$' "$TMP/settings.toml"

"$BIN" trace gen --model qwen3-30b-a3b --tokens 1 --phase decode --dist uniform --seed 11 \
    --samples "$NDEC" --out-dir "$TMP/decode"
if [ "$NPRE" -gt 0 ]; then
    "$BIN" trace gen --model qwen3-30b-a3b --tokens 64 --dist uniform --seed 12 \
        --samples "$NPRE" --out-dir "$TMP/prefill"
fi

now() { date +%s.%N; }
# case LABEL DIR N EXTRA
run_case() {
    label=$1 dir=$2 n=$3 extra=$4
    out="$TMP/out_$label"
    t0=$(now)
    # shellcheck disable=SC2086
    "$BIN" replay "$dir"/*.json --out "$out" --settings "$TMP/settings.toml" $extra \
        >"$TMP/$label.log" 2>&1 || true
    t1=$(now)
    passed=$(grep -c '^PASS replay' "$TMP/$label.log" || true)
    awk -v l="$label" -v a="$t0" -v b="$t1" -v n="$n" -v p="${passed:-0}" 'BEGIN {
        s = b - a
        printf "%-18s %3d traces %9.2f s %8.2f s/trace %8.2f traces/min  (%d passed)\n",
               l, n, s, s / n, 60 * n / s, p }'
}

echo "plena replay throughput, $(nproc) cores, settings VECTOR_SRAM_SIZE=65536, --jobs 1"
run_case decode_profile "$TMP/decode" "$NDEC" ""
run_case decode_noprofile "$TMP/decode" "$NDEC" "--no-profile"
if [ "$NPRE" -gt 0 ]; then
    run_case prefill_profile "$TMP/prefill" "$NPRE" ""
    run_case prefill_noprofile "$TMP/prefill" "$NPRE" "--no-profile"
fi
