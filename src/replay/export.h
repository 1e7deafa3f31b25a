/* Run-level exports of a replay (docs/replay.md "Exports"): summary.csv,
 * stages.csv, shared_vs_routed.csv, routing_tax.csv and replay_summary.json,
 * rebuilt from the results.json files one level below a root. The column
 * tables here are the one definition used both to build a result's rows
 * (replay.c) and to export them. Strict: a missing field is an error naming
 * the file; it never writes an empty column silently (upstream defect 19). */
#ifndef PLENA_REPLAY_EXPORT_H
#define PLENA_REPLAY_EXPORT_H

#include <stddef.h>

#include <jansson.h>

#include "common/err.h"

extern const char *const plena_replay_summary_cols[];
extern const size_t plena_replay_n_summary_cols;
extern const char *const plena_replay_stage_cols[];
extern const size_t plena_replay_n_stage_cols;
extern const char *const plena_replay_svr_cols[];
extern const size_t plena_replay_n_svr_cols;
extern const char *const plena_replay_tax_cols[];
extern const size_t plena_replay_n_tax_cols;

/* Routing tax by difference (docs/replay.md "Routing tax", device_minus_fixed): 1 when
 * `fixed` is the fixed-route result of the same trace (trace_sha256) and the
 * same options (inputs without fingerprint, routing_mode and pruned_inputs)
 * as the device-routed result `dev`. */
int plena_replay_results_pair(const json_t *dev, const json_t *fixed);
/* The device_minus_fixed row of device-routed result dev: the routing_tax.csv
 * columns (stage-derived ones null) with delta_cycles, delta_hbm_bytes_read
 * and delta_hbm_bytes_written = dev - fixed of run.sim_latency_cycles,
 * run.hbm_bytes_read and run.hbm_bytes_written, each null when fixed is NULL,
 * not its pair, or either figure is missing (a run that did not happen);
 * plus, in JSON only, router_topk_cycles (the device run's router_topk
 * stage, the router's own cost) and fixed_result (the pair's trace_id or
 * null). NULL only when out of memory. */
json_t *plena_replay_device_minus_fixed(const json_t *dev, const json_t *fixed);
/* 1 when build directory name `dir` is a device-routed one; then fixed
 * (n bytes) receives the name of its fixed-route sibling. */
int plena_replay_device_dir_pair(const char *dir, char *fixed, size_t n);

struct plena_replay_export_counts {
    size_t passed_numerical, passed_smoke, failed, skipped, exported;
};

/* Reads ROOT/<dir>/results.json for every directory one level below root and
 * writes the five exports into root, atomically. passed_only filters failed
 * results out. Errors: PLENA_E_INPUT naming the result file and field. */
int plena_replay_export(const char *root, int passed_only,
                        struct plena_replay_export_counts *counts, struct plena_err *err);

#endif
