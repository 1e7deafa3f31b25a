#!/bin/sh
# Replay at prefill scale (issue 14 item 6): for each (model, T) point, one
# uniform synthetic trace replayed by `plena replay` (timing with the HBM2
# model + stage profile + the functional check against the references: the
# full pipeline) next to the functional-only run of the same program (`plena
# run --hbm-model ideal --dump none` on the replay's build directory: the
# emulator alone, no check, no profile). Per point: CPU seconds (user + sys,
# /usr/bin/time, children included), max RSS, the simulated cycles of the timed
# run (summary.csv sim_latency_cycles) and those cycles per host CPU second for
# both runs, and the ratio full / functional. Then campaign throughput: one
# trace set replayed by `plena campaign run` at --jobs 1 and --jobs 2 (wall
# time, traces per minute, scaling efficiency = rate(2) / (2 x rate(1))).
# Settings: the shipped configs/plena_settings.toml for every run (the full
# 4194304-row VRAM, so T = 2048 fits; its dumps are part of a replay's cost).
# Sizes (first option):
#   --quick  qwen3-30b-a3b T = 1, 64; deepseek-v3 T = 1; campaign of 4
#            qwen3-30b-a3b decode traces (about 2 minutes on 2 cores)
#   --full   (default) qwen3-30b-a3b T = 1, 64, 512, 2048; deepseek-v3 T = 1,
#            64, 256; campaign of 4 qwen3-30b-a3b T = 64 traces. Needs far more
#            memory than --quick: deepseek-v3 at T >= 64 with --check was
#            estimated at ~29 GB before the streaming check (issue 14).
#   --points MODEL:T[,MODEL:T...]  only these points (campaign as --quick)
# A point whose replay fails (exit code, out of memory) prints its exit code
# and the others still run; the script exits 1 when any run failed.
# usage: bench/replay_scale.sh PLENA_BIN [--quick|--full|--points LIST]
# env: CAMPAIGN_TRACES, CAMPAIGN_TOKENS override the campaign set; KEEP=1
# keeps the scratch directory; TMPDIR where it goes; WEIGHT_CACHE=1 runs every
# replay and campaign with --weight-cache (a scratch directory), warmed first
# by an untimed replay of the same trace (campaigns: an untimed campaign run
# of the same set), so the figures are those of a warm cache (docs/design.md
# "Weight cache").
set -eu
BIN=${1:?usage: replay_scale.sh PLENA_BIN [--quick|--full|--points LIST]}
SIZE=${2:---full}
case "$BIN" in /*) ;; *) BIN=$(pwd)/$BIN ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SETTINGS=$ROOT/configs/plena_settings.toml
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "replay_scale: needs $TIME (Debian package time)" >&2; exit 2; }
[ -x "$BIN" ] || { echo "replay_scale: no plena binary at $BIN" >&2; exit 2; }

case "$SIZE" in
--quick)
    POINTS="qwen3-30b-a3b:1 qwen3-30b-a3b:64 deepseek-v3:1"
    CT=${CAMPAIGN_TOKENS:-1}
    ;;
--full)
    POINTS="qwen3-30b-a3b:1 qwen3-30b-a3b:64 qwen3-30b-a3b:512 qwen3-30b-a3b:2048"
    POINTS="$POINTS deepseek-v3:1 deepseek-v3:64 deepseek-v3:256"
    CT=${CAMPAIGN_TOKENS:-64}
    ;;
--points)
    POINTS=$(echo "${3:?--points needs MODEL:T[,MODEL:T...]}" | tr ',' ' ')
    CT=${CAMPAIGN_TOKENS:-1}
    ;;
*)
    echo "replay_scale: unknown size '$SIZE': expected --quick, --full or --points LIST" >&2
    exit 2
    ;;
esac
CN=${CAMPAIGN_TRACES:-4}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/plena_replay_scale.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$TMP"' EXIT
failed=0
WC=
[ "${WEIGHT_CACHE:-0}" = 1 ] && WC="--weight-cache $TMP/wcache"

# timed OUT CMD...: runs CMD with /usr/bin/time into OUT ("user sys maxrss_kb"
# on its last line) and returns CMD's exit code; CMD's output goes to OUT.log.
timed() {
    t_rec=$1
    shift
    t_rc=0
    "$TIME" -f "%U %S %M" -o "$t_rec" "$@" >"$t_rec.log" 2>&1 || t_rc=$?
    return $t_rc
}
# cpu FILE / rss_mb FILE: from a `timed` record
cpu() { tail -n 1 "$1" | awk '{ printf "%.2f", $1 + $2 }'; }
rss_mb() { tail -n 1 "$1" | awk '{ printf "%.0f", $3 / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }'; }
# per_s CYCLES SECONDS: cycles per host second, in millions
per_s() { awk -v c="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2f", c / s / 1e6; else print "-" }'; }

# gen_trace MODEL T SEED OUT: one uniform trace (decode phase at T = 1)
gen_trace() {
    phase=prefill
    [ "$2" = 1 ] && phase=decode
    "$BIN" trace gen --model "$1" --tokens "$2" --phase "$phase" --dist uniform --seed "$3" \
        --out "$4"
}

echo "plena replay at scale, $(nproc) cores, settings $SETTINGS, size $SIZE"
echo "full = plena replay (timing hbm2 + profile + check); func = plena run --hbm-model ideal"
echo "run_s = the timed run inside the replay (results.json run.host_seconds, wall)"
if [ -n "$WC" ]; then echo "weight cache: warm ($TMP/wcache)"; else echo "weight cache: none"; fi
printf '%-15s %5s | %9s %8s %8s | %9s %8s | %6s %6s | %13s %11s %11s %11s | %s\n' model T \
    full_cpu_s full_MB run_s func_cpu_s func_MB full/f run/f sim_cycles Mcyc/s_full \
    Mcyc/s_run Mcyc/s_func verdict
seed=100
for pt in $POINTS; do
    model=${pt%%:*} tok=${pt#*:}
    seed=$((seed + 1))
    d=$TMP/$model.t$tok
    mkdir -p "$d"
    if ! gen_trace "$model" "$tok" "$seed" "$d/trace.json" >"$d/gen.log" 2>&1; then
        printf '%-15s %5s | trace gen failed: %s\n' "$model" "$tok" "$(tail -n 1 "$d/gen.log")"
        failed=1
        continue
    fi
    if [ -n "$WC" ]; then # warm the cache: an untimed replay of the same trace
        # shellcheck disable=SC2086
        "$BIN" replay "$d/trace.json" --out "$d/warm" --settings "$SETTINGS" --progress none \
            $WC >/dev/null 2>&1 || true
        rm -rf "$d/warm"
    fi
    rc=0
    # shellcheck disable=SC2086
    timed "$d/full" "$BIN" replay "$d/trace.json" --out "$d/out" --settings "$SETTINGS" \
        --progress none $WC || rc=$?
    verdict=$(grep -E '^(PASS|FAIL)' "$d/full.log" | head -n 1 | awk '{ print $1, $4, $5 }')
    # a failed check still leaves the timed run's figures: print them with
    # the verdict (the first failed check and its exit code)
    cyc=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "sim_latency_cycles") c = i }
                   NR == 2 { print $c }' "$d/out/summary.csv" 2>/dev/null || true)
    b=$(find "$d/out" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1)
    if [ "$rc" != 0 ]; then
        failed=1
        if [ -z "$cyc" ] || [ ! -f "$b/program.mem" ]; then
            printf '%-15s %5s | replay exit %s (%s); CPU %s s, max RSS %s MB\n' "$model" "$tok" \
                "$rc" "${verdict:-no verdict}" "$(cpu "$d/full")" "$(rss_mb "$d/full")"
            continue
        fi
        verdict="$verdict exit=$rc: $(grep -m 1 ': functional: \|: check' "$d/full.log" |
            sed 's/.*: functional: //')"
    fi
    frc=0
    timed "$d/func" "$BIN" run --program "$b/program.mem" --hbm "$b/hbm.bin" \
        --fpsram "$b/fp_sram.bin" --intsram "$b/int_sram.bin" --vram "$b/vram_preload.bin" \
        --settings "$SETTINGS" --hbm-model ideal --dump none || frc=$?
    fc=$(cpu "$d/full")
    if [ "$frc" != 0 ]; then
        printf '%-15s %5s | %9s %8s | functional run exit %s\n' "$model" "$tok" "$fc" \
            "$(rss_mb "$d/full")" "$frc"
        failed=1
        continue
    fi
    uc=$(cpu "$d/func")
    rs=$(awk -F'[:,]' '/"host_seconds"/ { printf "%.2f", $2; exit }' "$b/results.json")
    printf '%-15s %5s | %9s %8s %8s | %9s %8s | %6s %6s | %13s %11s %11s %11s | %s\n' "$model" \
        "$tok" "$fc" "$(rss_mb "$d/full")" "$rs" "$uc" "$(rss_mb "$d/func")" \
        "$(ratio "$fc" "$uc")" "$(ratio "$rs" "$uc")" "$cyc" "$(per_s "$cyc" "$fc")" \
        "$(per_s "$cyc" "$rs")" "$(per_s "$cyc" "$uc")" "$verdict"
    # the next point's replay should not share the disk with this one's images
    [ "${KEEP:-0}" = 1 ] || rm -rf "$d/out"
done

# ---- campaign throughput: the same CN traces at --jobs 1 and --jobs 2 ----
mkdir -p "$TMP/camp_in"
phase=prefill
[ "$CT" = 1 ] && phase=decode
"$BIN" trace gen --model qwen3-30b-a3b --tokens "$CT" --phase "$phase" --dist uniform --seed 7 \
    --samples "$CN" --out-dir "$TMP/camp_in" >/dev/null
echo
echo "campaign: $CN qwen3-30b-a3b traces at T = $CT, no determinism gate${WC:+, warm weight cache}"
now() { date +%s.%N; }
if [ -n "$WC" ]; then
    # shellcheck disable=SC2086
    "$BIN" campaign run --traces "$TMP/camp_in" --out "$TMP/camp_warm" --no-determinism-gate \
        --progress none --settings "$SETTINGS" $WC >/dev/null 2>&1 || true
    rm -rf "$TMP/camp_warm"
fi
for j in 1 2; do
    out=$TMP/camp_j$j
    t0=$(now)
    rc=0
    # shellcheck disable=SC2086
    timed "$out.time" "$BIN" campaign run --traces "$TMP/camp_in" --out "$out" \
        --no-determinism-gate --progress none --settings "$SETTINGS" --jobs "$j" $WC || rc=$?
    t1=$(now)
    passed=$(grep -c '"status":"passed"' "$out/manifest.jsonl" 2>/dev/null || true)
    awk -v j="$j" -v a="$t0" -v b="$t1" -v n="$CN" -v p="${passed:-0}" -v c="$(cpu "$out.time")" \
        -v m="$(rss_mb "$out.time")" -v rc="$rc" 'BEGIN {
        s = b - a
        printf "--jobs %s  %8.2f s wall %9.2f s CPU  %8.2f traces/min  %d/%d passed  max RSS %s MB%s\n",
               j, s, c, 60 * n / s, p, n, m, rc == 0 ? "" : "  (exit " rc ")" }'
    awk -v a="$t0" -v b="$t1" -v n="$CN" 'BEGIN { printf "%.9f\n", n / (b - a) }' >"$TMP/rate$j"
    [ "$rc" = 0 ] || failed=1
    [ "${KEEP:-0}" = 1 ] || rm -rf "$out/replay"
done
awk -v a="$(cat "$TMP/rate1")" -v b="$(cat "$TMP/rate2")" \
    'BEGIN { printf "scaling efficiency (jobs 2): %.3f\n", b / (2 * a) }'
exit $failed
