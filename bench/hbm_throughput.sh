#!/bin/sh
# HBM model host cost (issue 14 item 1): host CPU nanoseconds per simulated
# 64-byte HBM transaction on a real MoE program (default qwen3-30b-a3b at
# T = 16, expert-major, random fixed routing, zero weights: the timing does
# not depend on values). Each binary runs the program twice, with
# --hbm-model ideal (the functional baseline: every transaction costs 0 ps)
# and with the default hbm2 model, no profile, no dumps; the HBM model's
# cost per transaction is (CPU(hbm2) - CPU(ideal)) / transactions. Runs
# alternate (binary by binary, ideal and hbm2 interleaved) RUNS times and the
# medians are used, so the ratios of one invocation compare the same stretch
# of a shared machine. Each binary also runs "full" (hbm2 with the stage
# profile, --asm for the labels): full / ideal is issue 14's acceptance
# ratio "timing + profile over the functional run". With two binaries
# (before, after) it also checks that both print the same summary lines
# (cycles and bytes).
# usage: bench/hbm_throughput.sh PLENA_BIN [OTHER_PLENA_BIN]
# env: MODEL (qwen3-30b-a3b), TOKENS (16), RUNS (5), KEEP=1 keeps the scratch.
set -eu
BIN=${1:?usage: hbm_throughput.sh PLENA_BIN [OTHER_PLENA_BIN]}
BIN2=${2:-}
MODEL=${MODEL:-qwen3-30b-a3b}
TOKENS=${TOKENS:-16}
RUNS=${RUNS:-5}
abs() { case "$1" in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
BIN=$(abs "$BIN")
[ -n "$BIN2" ] && BIN2=$(abs "$BIN2")
TMP=$(mktemp -d /tmp/plena_hbm_bench.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT

"$BIN" moe --model "$MODEL" --tokens "$TOKENS" --routing random --weights zero --no-run \
    --out "$TMP/b" >/dev/null
cd "$TMP/b"

# cpu BIN MODEL [ARGS]: CPU seconds (user + sys) of one run; the summary goes to $TMP/out.
cpu() {
    b=$1
    m=$2
    shift 2
    /usr/bin/time -f "%U %S" -o "$TMP/t" "$b" run --program program.mem --hbm hbm.bin \
        --fpsram fp_sram.bin --intsram int_sram.bin --vram vram_preload.bin --dump none \
        --hbm-model "$m" "$@" >"$TMP/out" 2>&1
    awk '{ print $1 + $2 }' "$TMP/t"
}

bins="$BIN"
[ -n "$BIN2" ] && bins="$BIN $BIN2"
i=0
while [ "$i" -lt "$RUNS" ]; do
    k=0
    for b in $bins; do
        cpu "$b" ideal >>"$TMP/ideal_$k"
        cpu "$b" hbm2 >>"$TMP/hbm2_$k"
        grep -v '^Topology' "$TMP/out" >"$TMP/summary_$k"
        cpu "$b" hbm2 --asm program.asm --profile "$TMP/profile.json" >>"$TMP/full_$k"
        k=$((k + 1))
    done
    i=$((i + 1))
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
bytes=$(sed -n 's/.*Bytes read: \([0-9]*\) | Bytes written: \([0-9]*\).*/\1 \2/p' "$TMP/summary_0")
txn=$(echo "$bytes" | awk '{ print ($1 + $2) / 64 }')
echo "HBM model cost: $MODEL T=$TOKENS, $txn transactions, median of $RUNS CPU-time runs"
k=0
for b in $bins; do
    mi=$(median "$TMP/ideal_$k")
    mh=$(median "$TMP/hbm2_$k")
    mf=$(median "$TMP/full_$k")
    awk -v b="$b" -v i="$mi" -v h="$mh" -v f="$mf" -v n="$txn" 'BEGIN {
        printf "%s\n  ideal %.2f s  hbm2 %.2f s  hbm2/ideal %.2fx  HBM model %.1f ns per transaction\n",
               b, i, h, h / i, 1e9 * (h - i) / n
        printf "  hbm2 + profile %.2f s  timing + profile / functional %.2fx\n", f, f / i }'
    echo "$mh $mi" >"$TMP/med_$k"
    k=$((k + 1))
done
if [ -n "$BIN2" ]; then
    awk -v n="$txn" '
        FNR == 1 && NR == 1 { h0 = $1; i0 = $2 }
        FNR == 1 && NR == 2 { h1 = $1; i1 = $2 }
        END { printf "second / first: HBM model ns per transaction %.3fx, hbm2 run CPU %.3fx\n",
                     (h1 - i1) / (h0 - i0), h1 / h0 }' "$TMP/med_0" "$TMP/med_1"
    if cmp -s "$TMP/summary_0" "$TMP/summary_1"; then
        echo "summary lines (cycles, bytes) identical"
    else
        echo "summary lines DIFFER:" >&2
        diff "$TMP/summary_0" "$TMP/summary_1" >&2 || true
        exit 1
    fi
fi
