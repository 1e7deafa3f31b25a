/* Run-level exports of a replay (docs/replay.md "Exports"): summary.csv,
 * stages.csv, shared_vs_routed.csv, routing_tax.csv and replay_summary.json,
 * rebuilt from the results.json files one level below a root. The column
 * tables here are the one definition used both to build a result's rows
 * (replay.c) and to export them. Strict: a missing field is an error naming
 * the file; it never writes an empty column silently (upstream defect 19). */
#ifndef PLENA_REPLAY_EXPORT_H
#define PLENA_REPLAY_EXPORT_H

#include <stddef.h>

#include "common/err.h"

extern const char *const plena_replay_summary_cols[];
extern const size_t plena_replay_n_summary_cols;
extern const char *const plena_replay_stage_cols[];
extern const size_t plena_replay_n_stage_cols;
extern const char *const plena_replay_svr_cols[];
extern const size_t plena_replay_n_svr_cols;
extern const char *const plena_replay_tax_cols[];
extern const size_t plena_replay_n_tax_cols;

struct plena_replay_export_counts {
    size_t passed_numerical, passed_smoke, failed, skipped, exported;
};

/* Reads ROOT/<dir>/results.json for every directory one level below root and
 * writes the five exports into root, atomically. passed_only filters failed
 * results out. Errors: PLENA_E_INPUT naming the result file and field. */
int plena_replay_export(const char *root, int passed_only,
                        struct plena_replay_export_counts *counts, struct plena_err *err);

#endif
