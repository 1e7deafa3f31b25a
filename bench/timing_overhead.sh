#!/usr/bin/env bash
# Timing + profiling cost versus functional-only speed (issue "Timing model",
# target <= 1.5x on every bench program). Each program runs through
# `plena run` in two configurations:
#   base: --hbm-model ideal, no profile, no overlay (functional-speed baseline)
#   full: default HBM2 model, --profile and --overlap
# Programs (generated here, all on the G2 gate's settings and HBM image):
#   g2loop  the G2 prefetch, then a loop of H_PREFETCH_V / M_MV / V_ADD_VV / S_*
#   moe     MoE-like: double-buffered H_PREFETCH_M of a [64, 2048] MXFP8 weight
#           (128 transactions each) every ~30 instructions, M_MM / M_MM_WO heavy,
#           with vector and scalar ops in between
#   vecio   activations: H_PREFETCH_V, vector ops, H_STORE_V (sequential issue)
# The machine may be shared and noisy: base and full runs alternate, each is
# repeated RUNS times, and the ratio of the medians is reported per program,
# for CPU time (user + sys: what the run costs, insensitive to other load) and
# for wall time; "overall" is the ratio of the summed medians.
# With PLENA_BENCH_COUNT=instructions the figure is instead the number of
# instructions executed (valgrind callgrind, one run each): exact and
# repeatable on a loaded machine, but blind to cache and branch effects
# (use SCALE 0.05 or so: callgrind is ~50x slower).
# usage: bench/timing_overhead.sh PLENA_BIN [SCALE [RUNS]]
#   SCALE: multiplies every program's loop count (default 1; may be fractional)
set -euo pipefail
BIN=${1:?usage: timing_overhead.sh PLENA_BIN [SCALE [RUNS]]}
SCALE=${2:-1}
RUNS=${3:-7}
case "$BIN" in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
DIR=$(mktemp -d /tmp/plena_bench_XXXXXX)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"
"$BIN" gates timing --out g >/dev/null 2>&1 || true
cp g/cases/g2_prefetch_only/plena_settings.toml s.toml
cp g/cases/g2_prefetch_only/hbm.bin hbm.bin

# loop count n scaled by SCALE (at least 1)
cnt() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 1 ? 1 : v) }'; }

# ---- g2loop ----
{
  echo "; @stage=expert_weight_prefetch"
  cat g/cases/g2_prefetch_only/program.asm
  echo "; @stage=expert_projection"
  echo "C_LOOP_START gp7, $(cnt 200000)"
  echo "S_ADDI_INT gp2, gp0, 0"
  echo "H_PREFETCH_V gp6, gp2, a3, 1, 0"
  echo "M_MV gp0, gp0, gp0"
  echo "V_ADD_VV gp6, gp6, gp6"
  echo "S_ADD_INT gp3, gp3, gp3"
  echo "C_LOOP_END gp7"
} > g2loop.asm

# ---- moe ----
# gp1 HBM offset (bytes, advances one 64-column block), gp8/gp9 the two MRAM
# tiles, gp3 VRAM input rows, gp5 VRAM output, gp6/gp7 vector temporaries.
mm_block() { # $1 = matrix tile register
  for c in 0 1 2 3; do
    echo "S_ADDI_INT gp10, $1, $((c * 256))"
    echo "M_MM gp0, gp10, gp3"
    echo "M_MM gp0, gp10, gp3"
    echo "M_MM gp0, gp10, gp3"
    echo "M_MM_WO gp5, gp0, $((c * 4))"
  done
  echo "V_ADD_VV gp6, gp6, gp7"
  echo "V_MUL_VV gp7, gp6, gp7"
  echo "V_EXP_V gp6, gp6"
  echo "S_ADD_INT gp11, gp11, gp12"
  echo "S_MUL_INT gp12, gp12, gp11"
}
{
  echo "; @stage=expert_weight_address"
  echo "S_LUI_INT gp4, 32"             # SCALE = 131072 (elements of a [64, 2048] weight)
  echo "C_SET_SCALE_REG gp4"
  echo "S_ADDI_INT gp4, gp0, 2048"     # STRIDE = one weight row
  echo "C_SET_STRIDE_REG gp4"
  echo "C_SET_ADDR_REG a0, gp0, gp0"
  echo "S_ADDI_INT gp8, gp0, 0"
  echo "S_ADDI_INT gp9, gp0, 4096"
  echo "S_ADDI_INT gp3, gp0, 8192"
  echo "S_ADDI_INT gp5, gp0, 16384"
  echo "S_ADDI_INT gp6, gp0, 24576"
  echo "S_ADDI_INT gp7, gp0, 24640"
  echo "S_ADDI_INT gp11, gp0, 3"
  echo "S_ADDI_INT gp12, gp0, 5"
  echo "; @stage=expert_weight_prefetch"
  echo "H_PREFETCH_M gp8, gp0, a0, 1, 0"
  echo "C_LOOP_START gp13, $(cnt 750)"
  echo "S_ADDI_INT gp1, gp0, 64"
  echo "C_LOOP_START gp14, 15"
  echo "; @stage=expert_weight_prefetch"
  echo "H_PREFETCH_M gp9, gp1, a0, 1, 0"
  echo "S_ADDI_INT gp1, gp1, 64"
  echo "; @stage=expert_projection"
  mm_block gp8
  echo "; @stage=expert_weight_prefetch"
  echo "H_PREFETCH_M gp8, gp1, a0, 1, 0"
  echo "S_ADDI_INT gp1, gp1, 64"
  echo "; @stage=expert_activation"
  mm_block gp9
  echo "C_LOOP_END gp14"
  echo "C_LOOP_END gp13"
} > moe.asm

# ---- vecio ----
{
  echo "; @stage=gather"
  echo "S_ADDI_INT gp4, gp0, 65536"
  echo "C_SET_SCALE_REG gp4"
  echo "S_ADDI_INT gp4, gp0, 64"
  echo "C_SET_STRIDE_REG gp4"
  echo "C_SET_ADDR_REG a1, gp0, gp0"
  echo "S_ADDI_INT gp6, gp0, 4096"
  echo "S_ADDI_INT gp7, gp0, 8192"
  echo "C_LOOP_START gp13, $(cnt 2400)"
  echo "S_ADDI_INT gp1, gp0, 0"
  echo "C_LOOP_START gp14, 32"
  echo "; @stage=gather"
  echo "H_PREFETCH_V gp6, gp1, a1, 1, 0"
  echo "; @stage=scatter_combine"
  echo "V_ADD_VV gp7, gp7, gp6"
  echo "V_MUL_VF gp6, gp6, f1"
  echo "V_RED_SUM f2, gp7"
  echo "V_ADD_VV gp7, gp7, gp6"
  echo "S_ADDI_INT gp1, gp1, 256"
  echo "S_ADD_FP f3, f3, f2"
  echo "H_STORE_V gp7, gp1, a1, 1, 0"
  echo "C_LOOP_END gp14"
  echo "C_LOOP_END gp13"
} > vecio.asm

# argument lists of the two configurations for program $2 ($1 = base | full)
args() {
  ARGS=(run --settings s.toml --program "$2.asm" --hbm hbm.bin --dump none)
  if [ "$1" = base ]; then ARGS+=(--hbm-model ideal); else ARGS+=(--profile "$2.json" --overlap); fi
}
# appends "wall_ms cpu_ms" of one run of configuration $1 on program $2 to $OUT
measure() {
  local t
  args "$1" "$2"
  TIMEFORMAT='%3R %3U %3S'
  t=$( { time "$BIN" "${ARGS[@]}" >/dev/null; } 2>&1 )
  echo "$t" | awk '{ printf "%.1f %.1f\n", $1 * 1000, ($2 + $3) * 1000 }' >> "$OUT"
}
# instruction count mode: "instr instr" (both columns) of one callgrind run
if [ "${PLENA_BENCH_COUNT:-}" = instructions ]; then
  RUNS=1
  measure() {
    local n
    args "$1" "$2"
    n=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" "${ARGS[@]}" 2>&1 >/dev/null |
      sed -n 's/.*Collected : *\([0-9]*\).*/\1/p')
    [ -n "$n" ] || { echo "timing_overhead: callgrind failed on $2 ($1)" >&2; exit 1; }
    echo "$n $n" >> "$OUT"
  }
fi
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

sbw=0; sfw=0; sbc=0; sfc=0
# figures are ms (time mode) or instructions, printed in millions (count mode)
U=ms; DIV=1
if [ "${PLENA_BENCH_COUNT:-}" = instructions ]; then U=Mi; DIV=1000000; fi
printf '%-8s %10s %10s %7s   %10s %10s %7s\n' program base_cpu full_cpu ratio base_wall full_wall ratio
for p in g2loop moe vecio; do
  args base "$p"; "$BIN" "${ARGS[@]}" >/dev/null # warm caches; both must complete (set -e)
  args full "$p"; "$BIN" "${ARGS[@]}" >/dev/null
  : > b.txt
  : > f.txt
  for ((i = 0; i < RUNS; i++)); do
    OUT=b.txt measure base "$p"
    OUT=f.txt measure full "$p"
  done
  bw=$(cut -d' ' -f1 b.txt | median); bc_=$(cut -d' ' -f2 b.txt | median)
  fw=$(cut -d' ' -f1 f.txt | median); fc=$(cut -d' ' -f2 f.txt | median)
  sbw=$(echo "$sbw + $bw" | bc -l); sfw=$(echo "$sfw + $fw" | bc -l)
  sbc=$(echo "$sbc + $bc_" | bc -l); sfc=$(echo "$sfc + $fc" | bc -l)
  printf "%-8s %8.1f$U %8.1f$U %7.3f   %8.1f$U %8.1f$U %7.3f\n" "$p" "$(echo "$bc_ / $DIV" | bc -l)" \
    "$(echo "$fc / $DIV" | bc -l)" "$(echo "$fc / $bc_" | bc -l)" "$(echo "$bw / $DIV" | bc -l)" \
    "$(echo "$fw / $DIV" | bc -l)" "$(echo "$fw / $bw" | bc -l)"
done
printf "%-8s %8.1f$U %8.1f$U %7.3f   %8.1f$U %8.1f$U %7.3f\n" overall "$(echo "$sbc / $DIV" | bc -l)" \
  "$(echo "$sfc / $DIV" | bc -l)" "$(echo "$sfc / $sbc" | bc -l)" "$(echo "$sbw / $DIV" | bc -l)" \
  "$(echo "$sfw / $DIV" | bc -l)" "$(echo "$sfw / $sbw" | bc -l)"
