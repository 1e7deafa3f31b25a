#!/bin/sh
# Golden recording: runs a fixed set of plena commands and writes everything
# they print and write into OUT, so a restructuring or a speed-up can be
# checked byte for byte against the committed recording in tests/golden/expected.
#   tests/golden/record.sh PLENA_BIN OUT
# Each case NAME gives OUT/NAME.out (stdout, then "--- stderr", then
# "--- exit N") and, for cases that write a directory, OUT/NAME.files: one line
# per file, "path sha256" (binaries and large files) or the path followed by
# the text itself (JSON/CSV/text files up to 64 KiB). The scratch directory's
# absolute path is replaced by <W> and the source tree's by <SRC> everywhere,
# so the recording does not depend on where the checkout lives.
# CTest `golden_outputs` runs this and diffs against tests/golden/expected;
# `make golden` rewrites the expected files (do that only for a deliberate
# behaviour change, and say so in the commit).
set -eu
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
OUT=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/plena_golden.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W"
unset PLENA_SETTINGS_TOML PLENA_TEST_NONDETERMINISM RUST_LOG PLENA_EMULATOR_RUST_LOG || true
export LC_ALL=C TZ=UTC

# Keys whose values are host time, wall-clock dates or process ids (the
# volatile keys of docs/replay.md), replaced by <volatile>.
VOLATILE='[a-z_]*_at_utc|host_[a-z_]*seconds|host_seconds|worker_pid|hostname'
scrub() {
    sed -E -e "s#$W#<W>#g" -e "s#$SRC#<SRC>#g" -e "s/(\"($VOLATILE)\": )[^,}]*/\1<volatile>/g"
}

# run NAME CMD...: stdout, stderr and exit status of one command.
run() {
    name=$1; shift
    set +e
    "$@" >"$W/.o" 2>"$W/.e"
    rc=$?
    set -e
    { cat "$W/.o"; echo "--- stderr"; cat "$W/.e"; echo "--- exit $rc"; } | scrub >"$OUT/$name.out"
}

# files NAME DIR: every file under DIR, sorted, text inline or hashed.
files() {
    name=$1; dir=$2
    : >"$OUT/$name.files"
    (cd "$dir" && find . -type f | LC_ALL=C sort) | while read -r f; do
        p="$dir/$f"
        sz=$(wc -c <"$p")
        case "$f" in
        *.json|*.csv|*.md|*.txt|*.asm|*.jsonl|*.log)
            if [ "$sz" -le 65536 ]; then
                { echo "=== $f"; cat "$p"; echo; } | scrub >>"$OUT/$name.files"
                continue
            fi ;;
        esac
        echo "=== $f sha256 $(sha256sum <"$p" | cut -d' ' -f1) bytes $sz" >>"$OUT/$name.files"
    done
}

# --- help texts of every command and subcommand
run help_plena "$BIN" help
for c in asm disasm run gates moe trace replay campaign; do
    run "help_$c" "$BIN" "$c" --help
done
for s in validate stats gen import split pack; do
    run "help_trace_$s" "$BIN" trace "$s" --help
done
run trace_rules "$BIN" trace rules

# --- make demo (scripts/demo.sh on a fixed output directory)
PLENA_DEMO_OUT=demo run demo sh "$SRC/scripts/demo.sh" "$(dirname "$BIN")"
files demo demo

# --- plena moe, three presets and both routing paths, with --profile
run moe_gptoss "$BIN" moe --model tiny-gpt-oss --tokens 3 --out moe_gptoss --check --profile
files moe_gptoss moe_gptoss
run moe_llama4 "$BIN" moe --model tiny-llama4 --tokens 5 --routing random --seed 9 \
    --out moe_llama4 --check --profile
files moe_llama4 moe_llama4
run moe_qwen2 "$BIN" moe --model tiny-qwen2-gated --tokens 4 --out moe_qwen2 --check --profile
files moe_qwen2 moe_qwen2
run moe_qwen3 "$BIN" moe --model qwen3-30b-a3b --tokens 2 --routing random --out moe_qwen3 \
    --check --profile
files moe_qwen3 moe_qwen3
run moe_list "$BIN" moe --list-models
# pair-major for comparison, and the lowering's bad input: an unknown name, a
# token count beyond the hardware loop count, a routing file naming expert 32 of 32
run moe_pm "$BIN" moe --model tiny-route-32x4 --tokens 6 --lowering pair-major --out moe_pm --check
run moe_bad_lowering "$BIN" moe --model tiny-route-32x4 --tokens 6 --lowering sideways --out moe_x
run moe_too_many_tokens "$BIN" moe --model tiny-route-32x4 --tokens 4294967295 --program-only \
    --out moe_x
"$BIN" trace gen --model tiny-route-32x4 --tokens 2 --dist uniform --seed 1 >ids.json 2>/dev/null || true
sed '/"topk_indices"/{n;s/\[[0-9]*,/[32,/}' ids.json >ids_bad.json
run moe_bad_ids "$BIN" moe --model tiny-route-32x4 --tokens 2 --routing ids_bad.json --out moe_x

# --- hardening (issue 16): refused inputs and outputs, each naming where and what
printf 'S_ADDI_INT gp1, gp0, 1\nH_PREFETCH_V gp0, gp0, a0, 1\n' >h16.asm
echo '{"hidden_size":65536,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":65536}' >h16_huge.json
run h16_huge_expert "$BIN" moe --model ./h16_huge.json --tokens 1 --program-only --out moe_x
echo '{"hidden_size":64,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":64,"rms_norm_eps":"1e-6"}' >h16_eps.json
run h16_model_string_eps "$BIN" moe --model ./h16_eps.json --tokens 1 --program-only --out moe_x
{ cat "$SRC/configs/plena_settings.toml"; printf '\n[TRANSACTIONAL.CONFIG.CLOCK_PERIOD_PS]\nvalue = 4611686018427387904\n'; } >h16_clk.toml
run h16_clock_2p62 "$BIN" run --program h16.asm --settings h16_clk.toml --dump none
{ cat "$SRC/configs/plena_settings.toml"; printf '\n[TRANSACTIONAL.CONFIG.NOT_A_KEY]\nvalue = 1\n'; } >h16_unknown.toml
run h16_settings_unknown_key "$BIN" run --program h16.asm --settings h16_unknown.toml --dump none
run h16_asm_device_output "$BIN" asm h16.asm -o /dev/null
run h16_asm_all_or_none sh -c '"$0" asm h16.asm -o h16.mem --stage-map nodir/m.json; rc=$?; test -e h16.mem && echo h16.mem written; exit $rc' "$BIN"
run h16_settings_dev_zero "$BIN" run --program h16.asm --settings /dev/zero --dump none
run h16_hbm_size_zero "$BIN" run --program h16.asm --hbm-size 0 --dump none
echo '{"hidden_size":96,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":64}' >h16_h96.json
run h16_moe_hidden_not_mlen "$BIN" moe --model ./h16_h96.json --tokens 4 --program-only --out moe_x
run h16_moe_routing_shape "$BIN" moe --model tiny-route-32x4 --tokens 1 --routing ids.json --out moe_x
run h16_replay_blen3 "$BIN" replay "$SRC/src/trace/testdata/example_v2.json" --blen 3 --out replay_b3
run h16_replay_weight_cache_file "$BIN" replay "$SRC/src/trace/testdata/example_v2.json" --out replay_wc --weight-cache h16.asm
run h16_moe_weight_cache_file "$BIN" moe --model tiny-route-32x4 --tokens 4 --no-run --out moe_wc --weight-cache h16.asm
run moe_weight_cache sh -c 'for o in a b; do "$0" moe --model tiny-route-32x4 --tokens 4 --routing random --no-run --out wc_$o --weight-cache wcache || exit; done; cmp wc_a/hbm.bin wc_b/hbm.bin && echo hbm.bin identical' "$BIN"
sed 's/^value = 17179869184$/value = 65536/' "$SRC/configs/plena_settings.toml" >h16_hbm64k.toml
run h16_moe_hbm_too_small sh -c '"$0" moe --model tiny-gpt-oss --tokens 3 --settings h16_hbm64k.toml --no-run --out moe_hbm; rc=$?; test -e moe_hbm && echo moe_hbm written; exit $rc' "$BIN"

# --- plena trace gen | validate | stats
mkdir gen
run trace_gen "$BIN" trace gen --model tiny-route-32x4 --tokens 8 --dist zipf:1.2 --seed 7 --out gen/gen.json
files trace_gen gen
run trace_gen_stdout "$BIN" trace gen --model tiny-ds-fused --tokens 5 --dist uniform --seed 3
"$BIN" trace gen --model tiny-ds-fused --tokens 5 --dist uniform --seed 3 >fused.json 2>/dev/null || true
run trace_validate "$BIN" trace validate "$SRC/src/trace/testdata/example_v2.json" \
    "$SRC/src/trace/testdata/gen_zipf1.2_seed7.json" fused.json
run trace_validate_replay "$BIN" trace validate --replay "$SRC/src/trace/testdata/example_v2.json" fused.json
run trace_stats "$BIN" trace stats "$SRC/src/trace/testdata/gen_zipf1.2_seed7.json" fused.json
run trace_stats_json "$BIN" trace stats --json "$SRC/src/trace/testdata/gen_zipf1.2_seed7.json"

# --- plena replay of two traces
run replay "$BIN" replay "$SRC/src/trace/testdata/gen_zipf1.2_seed7.json" fused.json --out replay
files replay replay

# --- plena gates timing
run gates_timing "$BIN" gates timing --out gates
files gates gates
