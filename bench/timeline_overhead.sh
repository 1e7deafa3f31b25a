#!/usr/bin/env bash
# Cost of the Perfetto timeline (docs/timeline.md), on one MoE layer built once
# by `plena moe --no-run`, run through `plena run` in three configurations:
#   base:     BASE_BIN (optional: a build without the timeline hook), no timeline
#   off:      PLENA_BIN, no --timeline (the default run: the hook is one untaken branch)
#   timeline: PLENA_BIN --timeline t.json (default detail: group)
# Runs alternate (off and timeline in turn first) and repeat RUNS times; the
# ratios are of the median CPU times (user + sys) measured in this one run,
# and the median of the RUNS pairs' own ratios is printed too: off/base is what the hook costs a run
# that asks for no timeline, timeline/off what writing one costs. The
# timeline's size is printed too. With WHOLE=1 the same ratio is also taken
# on the whole `plena moe` command (generation, the timed run with its stage
# profile, the summary) with and without --timeline: what the timeline costs
# the command a user types (issue 15: "under 10 % of the run's time").
# With PERF=1, one `plena moe --timeline` runs under `perf record -e
# cpu-clock` and the share of its samples in the functions of
# src/timeline/timeline.c (read from the build's object file with nm) is
# printed: a figure of one run that the host's noise between runs does not
# move the way it moves CPU-time medians. Samples are matched by symbol name,
# so a static function of the same name elsewhere that is not inlined would
# count too (none is in the current build: check with perf report). The
# same share is printed for one bare `plena run --timeline` of the layer.
# With COUNT=1, the instructions of one run without and one with --timeline
# are counted under valgrind's cachegrind and their ratio printed: a figure
# the host's noise does not move at all, though instructions are not time
# (about 60x slower than the run: use TOKENS of 256 or less).
# usage: bench/timeline_overhead.sh PLENA_BIN [BASE_BIN|-] [MODEL [TOKENS [RUNS]]]
set -euo pipefail
BIN=${1:?usage: timeline_overhead.sh PLENA_BIN [BASE_BIN|-] [MODEL [TOKENS [RUNS]]]}
BASE=${2:--}
MODEL=${3:-deepseek-v2-lite-mini}
TOKENS=${4:-4}
RUNS=${5:-5}
case "$BIN" in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
if [ "$BASE" != - ]; then case "$BASE" in /*) ;; *) BASE=$(pwd)/$BASE ;; esac; fi
DIR=$(mktemp -d /tmp/plena_bench_tl_XXXXXX)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"
"$BIN" moe --model "$MODEL" --tokens "$TOKENS" --routing random --out d --no-run >/dev/null

# appends "cpu_ms" of one run of binary $1 (extra arguments after it) to file $2
measure() {
  local bin=$1 out=$2 t
  shift 2
  TIMEFORMAT='%3U %3S'
  t=$( { time "$bin" run --program d/program.mem --asm d/program.asm --hbm d/hbm.bin \
           --fpsram d/fp_sram.bin --intsram d/int_sram.bin --vram d/vram_preload.bin \
           --dump none "$@" >/dev/null; } 2>&1 )
  echo "$t" | awk '{ printf "%.1f\n", ($1 + $2) * 1000 }' >> "$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: > base.txt; : > off.txt; : > tl.txt
for i in $(seq "$RUNS"); do
  if [ "$BASE" != - ]; then measure "$BASE" base.txt; fi
  # the order alternates: a drift of the machine's speed within a pair
  # does not always count against the second run
  if [ $((i % 2)) = 1 ]; then
    measure "$BIN" off.txt
    measure "$BIN" tl.txt --timeline t.json
  else
    measure "$BIN" tl.txt --timeline t.json
    measure "$BIN" off.txt
  fi
done
off=$(median < off.txt); tl=$(median < tl.txt)
pair=$(paste off.txt tl.txt | awk '{ print $2 / $1 }' | median)
echo "timeline_overhead: $MODEL T=$TOKENS, median of $RUNS runs (CPU ms)"
if [ "$BASE" != - ]; then
  base=$(median < base.txt)
  awk -v b="$base" -v o="$off" 'BEGIN { printf "  base %.1f  off %.1f  off/base %.3f\n", b, o, o / b }'
fi
awk -v o="$off" -v t="$tl" -v p="$pair" \
  'BEGIN { printf "  off %.1f  timeline %.1f  timeline/off %.3f  (median of the pairs'"'"' ratios %.3f)\n", o, t, t / o, p }'
echo "  timeline size $(stat -c %s t.json) bytes"

if [ "${WHOLE:-0}" = 1 ]; then
  # whole command: CPU ms of one `plena moe` (extra arguments after the file) into file $1
  measure_moe() {
    local out=$1 t
    shift
    TIMEFORMAT='%3U %3S'
    t=$( { time "$BIN" moe --model "$MODEL" --tokens "$TOKENS" --routing random --out w "$@" \
             >/dev/null; } 2>&1 )
    echo "$t" | awk '{ printf "%.1f\n", ($1 + $2) * 1000 }' >> "$out"
    rm -rf w
  }
  : > moe_off.txt; : > moe_tl.txt
  for i in $(seq "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      measure_moe moe_off.txt
      measure_moe moe_tl.txt --timeline tw.json
    else
      measure_moe moe_tl.txt --timeline tw.json
      measure_moe moe_off.txt
    fi
  done
  mo=$(median < moe_off.txt); mt=$(median < moe_tl.txt)
  echo "whole plena moe command, median of $RUNS runs (CPU ms)"
  awk -v o="$mo" -v t="$mt" 'BEGIN { printf "  off %.1f  timeline %.1f  timeline/off %.3f\n", o, t, t / o }'
fi

# prints the share of the timeline's functions (syms.txt) in perf.data ($1: what ran)
share() {
  perf report -i perf.data --no-children --sort symbol -F overhead,symbol --stdio 2>/dev/null |
    awk -v what="$1" 'NR == FNR { want[$1] = 1; next }
         /^#/ || NF < 3 { next }
         { pct = $1; sub(/%/, "", pct); total += pct; if ($3 in want) tl += pct }
         END { printf "perf: timeline functions %.2f %% of the samples of one %s", tl, what
               printf " (about %.1f %% of it without them)\n", 100 * tl / (100 - tl) }' \
      syms.txt -
}
# perf record of one command (its arguments) into perf.data; 1 when it failed
record() {
  if perf record -q -e cpu-clock -F 999 -o perf.data "$@" >/dev/null 2>perf.err; then return 0; fi
  echo "PERF=1: perf record failed (perf_event_paranoid?): $(head -c 300 perf.err); skipped"
  return 1
}

if [ "${PERF:-0}" = 1 ]; then
  OBJ=$(dirname "$BIN")/src/timeline/CMakeFiles/plena_timeline_obj.dir/timeline.c.o
  if ! command -v perf >/dev/null 2>&1 || [ ! -f "$OBJ" ]; then
    echo "PERF=1: perf or $OBJ not found; skipped"
  else
    nm --defined-only "$OBJ" | awk '$2 ~ /^[tT]$/ { print $3 }' > syms.txt
    if record "$BIN" moe --model "$MODEL" --tokens "$TOKENS" --routing random --out p \
        --timeline tp.json; then
      share "plena moe --timeline"
    fi
    if record "$BIN" run --program d/program.mem --asm d/program.asm --hbm d/hbm.bin \
        --fpsram d/fp_sram.bin --intsram d/int_sram.bin --vram d/vram_preload.bin --dump none \
        --timeline tr.json; then
      share "plena run --timeline"
    fi
  fi
fi

if [ "${COUNT:-0}" = 1 ]; then
  if ! command -v valgrind >/dev/null 2>&1; then
    echo "COUNT=1: valgrind not found; skipped"
    exit 0
  fi
  # instructions of one run (extra arguments after the output file $1)
  count() {
    local out=$1
    shift
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$BIN" run \
      --program d/program.mem --asm d/program.asm --hbm d/hbm.bin --fpsram d/fp_sram.bin \
      --intsram d/int_sram.bin --vram d/vram_preload.bin --dump none "$@" 2>&1 >/dev/null |
      awk '/I *refs:/ { gsub(",", "", $NF); print $NF }' > "$out"
  }
  count i_off.txt
  count i_tl.txt --timeline tc.json
  awk -v o="$(cat i_off.txt)" -v t="$(cat i_tl.txt)" \
    'BEGIN { printf "instructions (cachegrind): off %.0f  timeline %.0f  timeline/off %.4f\n", o, t, t / o }'
fi
