#!/bin/sh
# 2-rank MPI campaigns against --jobs 1 runs (docs/replay.md "Campaigns": identical
# results, the determinism gate's parallel pass uses the ranks, resume). CTest test
# `campaign_mpi` (labels mpi, no_sanitize). Exit 77 (CTest skip) when plena was
# built without MPI or mpirun is missing.
# usage: scripts/ci_mpi.sh [PLENA_BIN]
#
# Environment this needs in a container (set below, documented here):
#   --allow-run-as-root   OpenMPI refuses to start as root otherwise (the same
#                         as OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
#   --oversubscribe       2 ranks on a machine with fewer slots
#   --bind-to none        a bound rank's workers would all share its one core
#                         (and --jobs auto would see 1 core)
#   OMPI_MCA_btl_vader_single_copy_mechanism=none
#                         containers often forbid the cross-process memory
#                         attach (CMA/ptrace) the shared-memory transport uses
#   OMPI_MCA_rmaps_base_oversubscribe=1 is implied by --oversubscribe.
# MPIEXEC (from CMake) overrides the launcher path.
set -eu
BIN=${1:-${PLENA_BIN:-build/plena}}
MPIRUN=${MPIEXEC:-mpirun}
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "ci_mpi: no mpirun: skipped"; exit 77; }
TMP=$(mktemp -d /tmp/plena_ci_mpi.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if ! "$BIN" campaign --help | grep -q "^mpi: built with MPI"; then
    echo "ci_mpi: plena built without MPI: skipped"; exit 77
fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
SRC=${PLENA_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
WK="/bin/sh $SRC/src/campaign/testdata/fake_worker.sh {trace} {out} {trace_id} {dir} {fingerprint}"
t_start=$(date +%s)

fail() { echo "ci_mpi: FAIL: $*"; exit 1; }
# mpi2 ARGS...: 2 ranks of plena; exit code in $rc
mpi2() {
    rc=0
    "$MPIRUN" --oversubscribe --allow-run-as-root --bind-to none -n 2 \
        -x FAKE_FAIL="${FAKE_FAIL:-}" "$BIN" "$@" || rc=$?
}
hash() { "$BIN" campaign canonical-hash "$@"; }
# same_results A B: every results.json / stage_profile.json of A/replay equals B's
same_results() {
    n=0
    for d in "$1"/replay/*/; do
        id=$(basename "$d")
        for f in results.json stage_profile.json; do
            [ -f "$d/$f" ] || continue
            [ -f "$2/replay/$id/$f" ] || fail "$2/replay/$id/$f missing"
            [ "$(hash "$d/$f")" = "$(hash "$2/replay/$id/$f")" ] ||
                fail "$id/$f differs between $1 and $2 (canonical, volatile keys removed)"
            n=$((n + 1))
        done
    done
    [ "$n" -gt 0 ] || fail "no results compared in $1"
}
passed_lines() { grep -c '"status":"passed"' "$1/manifest.jsonl" || true; }

mkdir -p "$TMP/in" "$TMP/real"
"$BIN" trace gen --model tiny-route-16x1 --tokens 4 --dist uniform --seed 1 --samples 4 \
    --out "$TMP/in/a.jsonl"
"$BIN" trace gen --model tiny-route-32x4 --tokens 8 --dist uniform --seed 2 --samples 4 \
    --out "$TMP/in/b.jsonl"
"$BIN" trace gen --model tiny-route-16x1 --tokens 4 --dist uniform --seed 1 --samples 2 \
    --out "$TMP/real/a.jsonl"

# --- usage: --mpi only distributes run and determinism ---
rc=0; "$BIN" campaign status --traces "$TMP/in" --out "$TMP/x" --mpi 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "campaign status --mpi: exit $rc, expected 2"
rc=0; "$BIN" campaign run --traces "$TMP/in" --out "$TMP/x" --shared-fs 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "--shared-fs without --mpi: exit $rc, expected 2"

# --- A: fake worker, determinism gate on: serial vs 2 ranks (gate's parallel pass on ranks) ---
"$BIN" campaign run --traces "$TMP/in" --out "$TMP/serial" --jobs 1 --progress none \
    --worker-cmd "$WK" >/dev/null 2>&1 || fail "serial fake run failed"
mpi2 campaign run --mpi --traces "$TMP/in" --out "$TMP/mpi" --jobs 1 --progress none \
    --worker-cmd "$WK" --scratch "$TMP/scratch"
[ "$rc" = 0 ] || fail "2-rank fake run exited $rc"
grep -q '"ranks": 2' "$TMP/mpi/determinism.json" || fail "determinism.json lacks the 2 ranks"
same_results "$TMP/serial" "$TMP/mpi"
[ "$(hash "$TMP/serial/determinism.json")" = "$(hash "$TMP/mpi/determinism.json" --drop mpi)" ] ||
    fail "determinism.json differs"
[ "$(passed_lines "$TMP/mpi")" = 8 ] || fail "expected 8 passed manifest lines"
[ "$(wc -l < "$TMP/mpi/manifest.jsonl")" = 8 ] || fail "expected exactly 8 manifest lines"
grep -q '"worker":1}' "$TMP/mpi/manifest.jsonl" || fail "no trace was replayed by rank 1"
grep -q '"worker":0}' "$TMP/mpi/manifest.jsonl" || fail "no trace was replayed by rank 0"
[ -z "$(ls -A "$TMP/scratch")" ] || fail "rank scratch not removed: $(ls "$TMP/scratch")"
for d in serial mpi; do
    "$BIN" campaign report --traces "$TMP/in" --out "$TMP/$d" >/dev/null || fail "report $d"
done
cmp "$TMP/serial/report.csv" "$TMP/mpi/report.csv" || fail "report.csv differs"
[ "$(grep -v -i width "$TMP/serial/report.md")" = "$(grep -v -i width "$TMP/mpi/report.md")" ] ||
    fail "report.md differs (width lines excluded)"
[ "$(hash "$TMP/serial/report.json" --drop width)" = "$(hash "$TMP/mpi/report.json" --drop width)" ] ||
    fail "report.json differs (width excluded)"

# --- B: a failure on rank 1 is the worst status of every rank; the rerun resumes ---
# cost order puts the 32x4 traces first: n1 is item 1, rank 1's
bad=syn_uniform_tiny-route-32x4_t8_s2_n1_l0
FAKE_FAIL=$bad mpi2 campaign run --mpi --traces "$TMP/in" --out "$TMP/resume" --jobs 1 \
    --progress none --worker-cmd "$WK" --no-determinism-gate --scratch "$TMP/scratch"
[ "$rc" = 1 ] || fail "2 ranks with a failing trace exited $rc, expected 1"
grep -q "\"trace_id\":\"$bad\"" "$TMP/resume/failures.jsonl" || fail "failure not logged"
[ -f "$TMP/resume/replay/$bad/campaign_worker.log" ] || fail "rank 1's worker log not shipped"
mpi2 campaign run --mpi --traces "$TMP/in" --out "$TMP/resume" --jobs 1 --progress none \
    --worker-cmd "$WK" --no-determinism-gate --scratch "$TMP/scratch"
[ "$rc" = 0 ] || fail "resumed 2-rank run exited $rc"
[ "$(wc -l < "$TMP/resume/manifest.jsonl")" = 9 ] || fail "resume re-ran passed traces"
[ "$(passed_lines "$TMP/resume")" = 8 ] || fail "resume: expected 8 passed lines"
same_results "$TMP/serial" "$TMP/resume"

# --- C: --shared-fs: ranks write into --out, only completions travel ---
mpi2 campaign run --mpi --shared-fs --traces "$TMP/in" --out "$TMP/shared" --jobs 1 \
    --progress none --worker-cmd "$WK" --no-determinism-gate --scratch "$TMP/scratch"
[ "$rc" = 0 ] || fail "--shared-fs run exited $rc"
same_results "$TMP/serial" "$TMP/shared"

# --- D: the real `plena replay` worker: results, profiles and exports identical ---
"$BIN" campaign run --traces "$TMP/real" --out "$TMP/rserial" --jobs 1 --progress none \
    --no-determinism-gate >/dev/null 2>&1 || true
rs=$(passed_lines "$TMP/rserial")
mpi2 campaign run --mpi --traces "$TMP/real" --out "$TMP/rmpi" --jobs 2 --progress none \
    --no-determinism-gate --scratch "$TMP/scratch"
[ "$(passed_lines "$TMP/rmpi")" = "$rs" ] || fail "real replay: passed counts differ"
same_results "$TMP/rserial" "$TMP/rmpi"
for f in summary.csv stages.csv shared_vs_routed.csv routing_tax.csv; do
    [ -f "$TMP/rserial/replay/$f" ] || continue
    cmp "$TMP/rserial/replay/$f" "$TMP/rmpi/replay/$f" || fail "export $f differs"
done
# rank 1 sent only the small files: its build dir has no HBM image
[ ! -e "$TMP/rmpi/replay/syn_uniform_tiny-route-16x1_t4_s1_n1_l0/hbm.bin" ] ||
    fail "rank 1's trace was not gathered through rank 0"
echo "ci_mpi: 2-rank campaigns match --jobs 1 (real replay passed $rs/2) in $(($(date +%s) - t_start)) s"
