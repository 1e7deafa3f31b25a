#!/bin/sh
# The main job on a built-in default: a small DeepSeek-V2-Lite-shaped MoE layer
# (shared experts, routed experts) built, run on the emulator and checked
# bit for bit against the reference model. Falls back to the timing gates
# while `plena moe` is not built.
set -eu
BUILD=${1:-build}
OUT=${PLENA_DEMO_OUT:-$BUILD/demo}
if "$BUILD/plena" moe --help >/dev/null 2>&1 && ! "$BUILD/plena" moe --help 2>&1 | grep -q "not built"; then
    exec "$BUILD/plena" moe --model tiny-ds-fused --tokens 8 --out "$OUT" --check --profile
fi
exec "$BUILD/plena" gates timing --out "$OUT"
