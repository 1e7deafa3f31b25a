#!/bin/sh
# 2-rank MPI campaign against a --jobs 1 run (spec/traces-and-replay.md 7.7
# "identity"): canonical results (volatile keys removed) and the manifest's
# passed set must agree. Exit 77 (CTest skip) when plena lacks MPI.
# usage: scripts/ci_mpi.sh [PLENA_BIN]
set -eu
BIN=${1:-${PLENA_BIN:-build/plena}}
command -v mpirun >/dev/null 2>&1 || { echo "ci_mpi: no mpirun: skipped"; exit 77; }
TMP=$(mktemp -d /tmp/plena_ci_mpi.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if "$BIN" campaign run --traces /dev/null --out "$TMP/x" --mpi 2>&1 | grep -q "built without MPI"; then
    echo "ci_mpi: plena built without MPI: skipped"; exit 77
fi
mkdir -p "$TMP/in"
"$BIN" trace gen --model tiny-route-16x1 --tokens 4 --dist uniform --seed 1 --samples 3 \
    --out "$TMP/in/a.jsonl"
"$BIN" trace gen --model tiny-route-32x4 --tokens 8 --dist uniform --seed 2 --samples 3 \
    --out "$TMP/in/b.jsonl"
W=""
[ -n "${WORKER_CMD:-}" ] && W="--worker-cmd"
"$BIN" campaign run --traces "$TMP/in" --out "$TMP/serial" --jobs 1 --progress none \
    --no-determinism-gate ${W:+"$W" "$WORKER_CMD"}
mpirun --oversubscribe --allow-run-as-root -n 2 "$BIN" campaign run --mpi --traces "$TMP/in" \
    --out "$TMP/mpi" --jobs 1 --progress none --no-determinism-gate ${W:+"$W" "$WORKER_CMD"}
for d in "$TMP"/serial/replay/*/; do
    id=$(basename "$d")
    for f in results.json stage_profile.json; do
        [ -f "$d/$f" ] || continue
        a=$("$BIN" campaign canonical-hash "$d/$f" 2>/dev/null || sha256sum < "$d/$f")
        b=$("$BIN" campaign canonical-hash "$TMP/mpi/replay/$id/$f" 2>/dev/null ||
            sha256sum < "$TMP/mpi/replay/$id/$f")
        [ "$a" = "$b" ] || { echo "ci_mpi: $id/$f differs between --jobs 1 and 2 ranks"; exit 1; }
    done
done
for f in summary.csv stages.csv shared_vs_routed.csv routing_tax.csv; do
    [ -f "$TMP/serial/replay/$f" ] || continue
    cmp "$TMP/serial/replay/$f" "$TMP/mpi/replay/$f" ||
        { echo "ci_mpi: export $f differs"; exit 1; }
done
echo "ci_mpi: 2-rank campaign matches --jobs 1"
