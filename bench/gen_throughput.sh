#!/bin/sh
# Generation host cost (issue 14 item 3): CPU seconds (user + sys) of
# `plena moe --no-run` for a preset (default qwen3-30b-a3b at T = 16, random
# weights: every routed expert's weights are generated and MX-encoded into
# hbm.bin). With two binaries (before, after) the runs alternate RUNS times,
# the medians and their ratio are printed, and the two build directories
# must be byte-identical (hbm.bin, program, images, layout).
# usage: bench/gen_throughput.sh PLENA_BIN [OTHER_PLENA_BIN]
# env: MODEL (qwen3-30b-a3b), TOKENS (16), RUNS (3).
set -eu
BIN=${1:?usage: gen_throughput.sh PLENA_BIN [OTHER_PLENA_BIN]}
BIN2=${2:-}
MODEL=${MODEL:-qwen3-30b-a3b}
TOKENS=${TOKENS:-16}
RUNS=${RUNS:-3}
TMP=$(mktemp -d /tmp/plena_gen_bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

bins="$BIN"
[ -n "$BIN2" ] && bins="$BIN $BIN2"
i=0
while [ "$i" -lt "$RUNS" ]; do
    k=0
    for b in $bins; do
        rm -rf "$TMP/out_$k"
        /usr/bin/time -f "%U %S" -o "$TMP/t" "$b" moe --model "$MODEL" --tokens "$TOKENS" \
            --no-run --out "$TMP/out_$k" >/dev/null
        awk '{ print $1 + $2 }' "$TMP/t" >>"$TMP/cpu_$k"
        k=$((k + 1))
    done
    i=$((i + 1))
done

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "generation: $MODEL T=$TOKENS, plena moe --no-run, median of $RUNS CPU-time runs"
k=0
for b in $bins; do
    echo "$b: $(median "$TMP/cpu_$k") s"
    k=$((k + 1))
done
if [ -n "$BIN2" ]; then
    awk 'NR == 1 { a = $1 } NR == 2 { b = $1 } END { printf "second / first: %.3fx\n", b / a }' \
        <<EOF
$(median "$TMP/cpu_0")
$(median "$TMP/cpu_1")
EOF
    if diff -r "$TMP/out_0" "$TMP/out_1" >/dev/null; then
        echo "build directories identical"
    else
        echo "build directories DIFFER" >&2
        exit 1
    fi
fi
