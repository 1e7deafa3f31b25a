#!/bin/sh
# The main job on a built-in default: a small DeepSeek-V2-Lite-shaped MoE layer
# (64 experts, top-6, two fused shared experts; hidden 512, expert width 256)
# built, run on the emulator with timing and profiling, checked bit for bit
# against the reference model, and its stage table printed; then its Perfetto
# timeline (OUT/timeline.json, docs/timeline.md) and HTML report
# (OUT/report.html, docs/report.md).
set -eu
BUILD=${1:-build}
OUT=${PLENA_DEMO_OUT:-$BUILD/demo}
"$BUILD/plena" moe --model deepseek-v2-lite-mini --tokens 4 --out "$OUT" --check --profile \
    --timeline "$OUT/timeline.json"
"$BUILD/plena" report "$OUT"
echo "open $OUT/report.html in a browser; load $OUT/timeline.json in https://ui.perfetto.dev"
