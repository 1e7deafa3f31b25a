#!/usr/bin/env bash
# Assembler throughput: generates a 5,000,000-line PLENA assembly file (mixed
# opcodes, comments and stage markers) in a temporary directory, times
# `plena asm` on it RUNS times and prints best and median lines/second.
# usage: bench/asm_throughput.sh [BUILD_DIR|PLENA_BIN] [LINES] [RUNS]
set -euo pipefail
target=${1:-build}
lines=${2:-5000000}
runs=${3:-5}
if [ -x "$target" ] && [ ! -d "$target" ]; then bin=$target; else bin=$target/plena; fi
[ -x "$bin" ] || { echo "asm_throughput: no plena binary at $bin" >&2; exit 2; }
tmp=$(mktemp -d /tmp/plena_asm_bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
awk -v n="$lines" 'BEGIN {
  split("S_ADDI_INT gp1, gp2, 262143|S_ADD_INT gp3, gp4, gp5|S_LUI_INT gp2, 4194303|" \
        "M_MM 0, gp2, gp1|M_MM_WO gp3, gp0, 64|M_MV_WO gp3, 4|H_PREFETCH_M gp8, gp6, a0, 1, 0|" \
        "H_PREFETCH_V gp1, gp2, a3, 1, 1|V_ADD_VV gp4, gp5, gp6, 1|V_SUB_VF gp1, gp2, f3, 0, 1|" \
        "V_EXP_V gp1, gp2, 1|V_RED_SUM f1, gp2|V_TOPK gp1, gp2, gp3, 15|C_SET_TOPK_REG gp4|" \
        "S_LD_FP f2, gp3, 7|S_ADD_FP f1, f2, f3|S_MAP_V_FP gp1, gp2, 0|C_SET_ADDR_REG a1, gp0, gp5|" \
        "C_SET_SCALE_REG gp6|C_LOOP_START gp4, 16|C_LOOP_END gp4|V_SHFT_V gp1, gp2, gp3|C_BREAK|" \
        "S_LD_INT gp7, gp1, 0x3FF  ; trailing comment", ops, "|");
  m = length(ops);
  for (i = 0; i < n; i++) {
    if (i % 1000 == 0) print "; @stage=expert_projection @pair=" int(i / 1000);
    else if (i % 97 == 0) print "; plain comment line";
    else print "    " ops[(i * 7) % m + 1];
  }
}' > "$tmp/big.asm"
count=$(wc -l < "$tmp/big.asm")
times=()
for r in $(seq 1 "$runs"); do
  s=$(date +%s.%N)
  "$bin" asm "$tmp/big.asm" -o "$tmp/big.mem"
  e=$(date +%s.%N)
  times+=("$(echo "$e - $s" | bc -l)")
done
sorted=$(printf '%s\n' "${times[@]}" | sort -g)
best=$(echo "$sorted" | head -1)
median=$(echo "$sorted" | sed -n "$(( (runs + 1) / 2 ))p")
printf 'asm_throughput: %d lines, %d runs: best %.3f s (%.2f M lines/s), median %.3f s (%.2f M lines/s)\n' \
  "$count" "$runs" "$best" "$(echo "$count / $best / 1000000" | bc -l)" \
  "$median" "$(echo "$count / $median / 1000000" | bc -l)"
