#!/bin/sh
# Stand-in for `plena replay TRACE --out ROOT` in campaign tests: writes
# ROOT/DIR/results.json (decided, atomic via rename) and stage_profile.json.
# usage: fake_worker.sh TRACE ROOT TRACE_ID DIR FINGERPRINT
# env: FAKE_SLEEP=s (before writing), FAKE_FAIL=id1,id2 (gate.passed false),
#      FAKE_NORESULT=id (exit 3 without a result), FAKE_MARK=dir (touch DIR/<id>
#      when started), PLENA_TEST_NONDETERMINISM=1 (a varying non-volatile value),
#      FAKE_EXIT=id:code (exit code after writing a passing result).
trace=$1 root=$2 id=$3 dir=$4 fp=$5
[ -n "$FAKE_MARK" ] && : > "$FAKE_MARK/$id.started"
[ -n "$FAKE_SLEEP" ] && sleep "$FAKE_SLEEP"
case ",$FAKE_NORESULT," in *",$id,"*) echo "fake: no result for $id" >&2; exit 3;; esac
passed=true; code=0
case ",$FAKE_FAIL," in *",$id,"*) passed=false; code=1;; esac
bytes=$(wc -c < "$trace")
cycles=$((bytes * 3 + 7))
noise=0
[ "$PLENA_TEST_NONDETERMINISM" = 1 ] && noise=$$
mkdir -p "$root/$dir"
cat > "$root/$dir/stage_profile.json.tmp.$$" <<JSON
{"schema_version": 4, "total_picos": $((cycles * 1000)), "host_wall_time_seconds": 0.$$}
JSON
mv "$root/$dir/stage_profile.json.tmp.$$" "$root/$dir/stage_profile.json"
cat > "$root/$dir/results.json.tmp.$$" <<JSON
{"schema_version": 1, "result_kind": "plena.replay",
 "trace": {"trace_id": "$id", "source_path": "$trace"},
 "inputs": {"fingerprint": "$fp"},
 "run": {"sim_latency_cycles": $cycles, "hbm_bytes_read": $((bytes * 2)), "hbm_bytes_written": $bytes, "host_seconds": 0.$$, "noise": $noise},
 "routing_tax": {"routing_tax_fraction": 0.25},
 "shared_vs_routed": {"shared_fraction": 0.5},
 "notes": {"shared_vs_routed": "fake caveat"},
 "gate": {"passed": $passed, "kind": "numerical", "failed": $( [ $passed = true ] && echo '[]' || echo '["functional"]'), "decided_at_utc": "2026-01-01T00:00:00Z"}}
JSON
mv "$root/$dir/results.json.tmp.$$" "$root/$dir/results.json"
case "$FAKE_EXIT" in "$id":*) code=${FAKE_EXIT#*:};; esac
exit $code
