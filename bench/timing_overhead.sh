#!/bin/sh
# Timing + profiling cost versus functional-only speed (issue "Timing model",
# target <= 1.5x). Runs the same program twice through `plena run`:
#   baseline: --hbm-model ideal, no profile (functional-speed baseline, 8.1)
#   measured: default HBM2 model, --profile and --overlap
# and prints both wall times and their ratio.
# usage: bench/timing_overhead.sh PLENA_BIN [REPS]
set -eu
BIN=${1:?usage: timing_overhead.sh PLENA_BIN [REPS]}
REPS=${2:-20000}
DIR=$(mktemp -d /tmp/plena_bench_XXXXXX)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"
# settings: small VRAM, a large loop budget
"$BIN" gates timing --out g >/dev/null 2>&1 || true
cp g/cases/g2_prefetch_only/plena_settings.toml s.toml
sed -i 's/^\(.*MAX_LOOP_INSTRUCTIONS.*value *= *\).*/\1100000000/' s.toml 2>/dev/null || true
cp g/cases/g2_prefetch_only/hbm.bin hbm.bin
{
  echo "; @stage=expert_weight_prefetch"
  cat g/cases/g2_prefetch_only/program.asm
  echo "; @stage=expert_projection"
  echo "C_LOOP_START gp7, $REPS"
  echo "S_ADDI_INT gp2, gp0, 0"
  echo "H_PREFETCH_V gp6, gp2, a3, 1, 0"
  echo "M_MV gp0, gp0, gp0"
  echo "V_ADD_VV gp6, gp6, gp6"
  echo "S_ADD_INT gp3, gp3, gp3"
  echo "C_LOOP_END gp7"
} > prog.asm
t() { s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
base=$(t "$BIN" run --settings s.toml --program prog.asm --hbm hbm.bin --dump none --hbm-model ideal)
full=$(t "$BIN" run --settings s.toml --program prog.asm --hbm hbm.bin --dump none --profile p.json --overlap)
echo "functional-only (ideal HBM, no profile): ${base}s"
echo "timing + profile + overlap:              ${full}s"
echo "ratio: $(echo "scale=3; $full / $base" | bc)"
