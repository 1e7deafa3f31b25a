/* Stand-alone replay gates (docs/replay.md "Gates"):
 * `plena gates repeat BUILD_DIR` and `plena gates functional BUILD_DIR` as
 * library calls. They reopen a build directory written by `plena replay`,
 * recover the replay's exact options from results.json (checked against its
 * fingerprint), and run the SAME repeat and functional steps the pipeline runs
 * (a replay session, pipeline.c). They never print and never pick exit codes. */
#ifndef PLENA_REPLAY_GATES_H
#define PLENA_REPLAY_GATES_H

#include <jansson.h>

#include <stddef.h>

#include "common/err.h"
#include "gen/build.h"
#include "replay/replay.h"
#include "replay/result.h"

#define PLENA_REPLAY_REPEAT_GATE_FILE     "repeat_gate.json"
#define PLENA_REPLAY_FUNCTIONAL_GATE_FILE "functional_gate.json"

/* ---- replay session: the pipeline's context, reopened on a build dir ---- */
struct plena_replay_session;

/* Regenerates the build of `it` with options `o` in memory (nothing is
 * written), then replaces the staged images with the bytes of the build
 * directory's hbm.bin, fp_sram.bin, int_sram.bin and vram_preload.bin, so the
 * reference is computed from the build inputs themselves. PLENA_E_INPUT when
 * the generator refuses the shape or an input file is missing or has another
 * size. `it` is borrowed and must outlive the session. */
int plena_replay_session_open(const struct plena_replay_item *it, const struct plena_replay_opts *o,
                              const char *build_dir, struct plena_replay_session **out,
                              struct plena_err *err);
void plena_replay_session_free(struct plena_replay_session *s);

/* docs/replay.md "Pipeline" routing integrity + 5.3 comparison against build_dir/vram_dump.bin.
 * *functional: the `functional` object (new reference), or NULL when no comparison
 * was possible (no dump: the gate fails, there is no fallback); *checks the
 * routing_integrity and functional checks as the pipeline records them. */
int plena_replay_session_functional(struct plena_replay_session *s, json_t **functional,
                                    struct plena_replay_checks *checks, struct plena_err *err);
/* docs/replay.md "Gates": `repeats` (>= 2) runs into build_dir/repeat/NN/, the decided object
 * {repeats, passed, series, mismatched} in *repeat (new reference), written
 * to repeat_gate.json after the decision. */
int plena_replay_session_repeat(struct plena_replay_session *s, unsigned repeats, json_t **repeat,
                                struct plena_err *err);

/* Replaces b's staged images with the files of dir (same sizes required). */
int plena_replay_build_load_images(struct plena_moe_build *b, const char *dir,
                                   struct plena_err *err);

/* ---- the two gates ---- */
struct plena_replay_gate_opts {
    const char *build_dir;
    /* NULL: the settings file recorded in run_stats.json (config_path), else
     * the built-in lookup; either way it must reproduce the fingerprint */
    const char *settings_path;
    unsigned repeats; /* repeat gate: >= 2 */
    /* set by a signal handler (may be NULL): the build's regeneration stops
     * at its next poll, the gate's runs as a trap (the repeat series looks
     * after each run), the functional comparison's references before their
     * next expert and the functional gate once more before its decision;
     * then the call returns PLENA_E_INTERRUPTED with no gate file written */
    const volatile sig_atomic_t *stop;
    /* test hook (may be NULL): called once the build is regenerated and its
     * images loaded, before the gate's step */
    void (*after_open)(void *ctx);
    void *hook_ctx;
};

struct plena_replay_gate_report {
    int passed;
    char failed[512]; /* comma-separated failed checks / mismatched metrics */
    char values[512]; /* "key=value ..." for the PASS/FAIL line */
    char result_path[4200];
};

/* Decided result: returns 0 with r->passed set and the gate file written.
 * Non-zero: not evaluated (PLENA_E_INPUT for a missing or inconsistent build
 * directory, PLENA_E_OUTPUT, PLENA_E_NOMEM); no gate file exists then. */
int plena_replay_gate_repeat(const struct plena_replay_gate_opts *o,
                             struct plena_replay_gate_report *r, struct plena_err *err);
int plena_replay_gate_functional(const struct plena_replay_gate_opts *o,
                                 struct plena_replay_gate_report *r, struct plena_err *err);

/* Pure decision of docs/replay.md "Gates" over a series object {metric: [values]}: the list
 * of metrics whose series is empty, holds a null (a run did not produce
 * it) or more than one distinct value. `expected` names every metric that
 * must be present; a missing one is mismatched too. */
json_t *plena_replay_repeat_mismatched(const json_t *series, const char *const *expected,
                                       size_t n_expected);

/* "PASS <gate> k=v ..." / "FAIL <gate> <failed> k=v ..." + LF into buf. */
void plena_replay_gate_format_line(const char *gate, const struct plena_replay_gate_report *r,
                                   char *buf, size_t n);

#endif
