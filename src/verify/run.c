/* A build directory as a run session (plena_verify_run_opts) and the
 * `plena moe` job (plena_verify_moe): the timed run, the stage rows read back
 * from its profile, then the check. No printing: the CLI prints the report. */
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "verify/verify.h"

static int path(const char *dir, enum plena_build_file f, char *buf, struct plena_err *err)
{
    if (plena_build_file_path(dir, f, buf, 4096, NULL))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    return 0;
}

int plena_verify_run_opts(const char *dir, enum plena_verify_program form, int optional_preloads,
                          const struct plena_moe_build *b, const struct plena_settings *s,
                          struct plena_verify_paths *p, struct plena_run_opts *ro,
                          struct plena_err *err)
{
    memset(ro, 0, sizeof *ro);
    int rc = 0;
    if (form == PLENA_VERIFY_PROGRAM_MEM) {
        rc = path(dir, PLENA_BUILD_FILE_PROGRAM_MEM, p->program, err);
        if (!rc) rc = path(dir, PLENA_BUILD_FILE_PROGRAM_ASM, p->asm_path, err);
        ro->asm_path = p->asm_path;
    } else {
        rc = path(dir, PLENA_BUILD_FILE_PROGRAM_ASM, p->program, err);
    }
    if (!rc) rc = path(dir, PLENA_BUILD_FILE_HBM, p->hbm, err);
    if (!rc) rc = path(dir, PLENA_BUILD_FILE_FP_SRAM, p->fpsram, err);
    if (!rc) rc = path(dir, PLENA_BUILD_FILE_INT_SRAM, p->intsram, err);
    if (!rc) rc = path(dir, PLENA_BUILD_FILE_VRAM_PRELOAD, p->vram, err);
    if (rc) return rc;
    ro->program_path = p->program;
    ro->hbm_path = p->hbm;
    ro->fpsram_path = p->fpsram;
    ro->intsram_path = optional_preloads && access(p->intsram, F_OK) ? NULL : p->intsram;
    ro->vram_path = optional_preloads && access(p->vram, F_OK) ? NULL : p->vram;
    /* a build larger than HBM_SIZE runs on an HBM of its own size, rounded
     * to pages (reads past the configured capacity would return zeros) */
    ro->hbm_size = b && s && b->hbm_size > s->hbm_size ? (b->hbm_size + 4095) / 4096 * 4096 : 0;
    ro->hbm_model = -1;
    ro->threads = 1;
    return 0;
}

/* Per-stage figures from the profile JSON the run session wrote. */
static int read_profile(const char *file, struct plena_verify_moe_report *r)
{
    json_error_t je;
    json_t *root = json_load_file(file, 0, &je);
    if (!root) return -1;
    json_t *st = json_object_get(root, "stages");
    r->clock_ps = (uint64_t)json_integer_value(json_object_get(root, "clock_period_ps"));
    for (int s = 0; s < PLENA_STAGE_COUNT; s++) {
        json_t *e = json_object_get(st, plena_stage_name((enum plena_stage)s));
        struct plena_verify_stage_row *row = &r->stages[s];
        row->picos = (uint64_t)json_integer_value(json_object_get(e, "wall_picos"));
        row->cycles = (uint64_t)json_integer_value(json_object_get(e, "wall_cycles"));
        row->share = json_number_value(json_object_get(e, "time_fraction"));
        row->bytes = (uint64_t)json_integer_value(json_object_get(e, "hbm_bytes_read")) +
                     (uint64_t)json_integer_value(json_object_get(e, "hbm_bytes_written"));
    }
    json_decref(root);
    return 0;
}

/* The timed run's final machine state, read back for the check, so that a
 * `moe --check` runs the program once (the functional state does not depend
 * on the timing model). */
struct readback {
    const struct plena_moe_build *b;
    struct plena_verify_device d;
    int done, rc;
    struct plena_err err;
};

static void read_back(void *ctx, const struct plena_emu *emu, const struct plena_emu_result *res,
                      const struct plena_program *prog)
{
    struct readback *rb = ctx;
    plena_err_clear(&rb->err);
    rb->rc = plena_verify_device_read(rb->b, emu, res, prog, &rb->d, &rb->err);
    rb->done = 1;
}

/* The timed run: profile into dir (kept, or a hidden temporary removed after
 * its rows are read); rb (may be NULL) receives the final state. */
static int timed_run(const struct plena_moe_build *b, const struct plena_verify_moe_opts *o,
                     struct plena_verify_moe_report *r, struct readback *rb, struct plena_err *err)
{
    struct plena_verify_paths paths;
    struct plena_run_opts ro;
    int rc = plena_verify_run_opts(o->dir, PLENA_VERIFY_PROGRAM_MEM, 0, b, o->settings, &paths, &ro,
                                   err);
    if (rc) return rc;
    char prof[4096];
    if (o->profile
            ? plena_build_file_path(o->dir, PLENA_BUILD_FILE_STAGE_PROFILE, prof, sizeof prof, err)
            : plena_path_join(prof, sizeof prof, o->dir, ".stage_profile.tmp.json"))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, o->dir, "path too long");
    ro.settings = o->settings;
    ro.profile_path = prof;
    ro.routing = &r->routing;
    ro.label = "moe";
    ro.timeline_path = o->timeline_path;
    ro.timeline_detail = o->timeline_detail;
    ro.on_progress = o->on_progress;
    ro.on_progress_ctx = o->on_progress_ctx;
    ro.stop = o->stop;
    ro.argc = o->argc;
    ro.argv = o->argv;
    ro.threads = o->threads ? o->threads : 1;
    if (rb) {
        ro.on_finish = read_back;
        ro.on_finish_ctx = rb;
    }
    if ((rc = plena_run_execute(&ro, &r->run, err))) return rc;
    r->ran = 1;
    r->have_stages = read_profile(prof, r) == 0;
    if (!o->profile) unlink(prof);
    return 0;
}

/* The check on the timed run's read-back (rb done), else on a run of its own. */
static int functional_check(const struct plena_moe_build *b, const struct plena_verify_moe_opts *o,
                            struct plena_verify_moe_report *r, struct readback *rb,
                            struct plena_err *err)
{
    struct plena_verify_device d;
    int rc;
    if (rb && rb->done) {
        d = rb->d;
        memset(&rb->d, 0, sizeof rb->d);
        r->check_reused_run = 1;
        if ((rc = rb->rc) && err) *err = rb->err;
    } else {
        rc = plena_verify_emulate_stop(b, o->settings, o->dir, o->stop, &d, err);
    }
    if (!rc && d.interrupted) {
        r->status = PLENA_E_INTERRUPTED; /* no verdict: nothing compared */
    } else if (!rc && d.trapped) {
        r->checked = 1;
        r->check_trapped = 1;
        snprintf(r->check_trap, sizeof r->check_trap, "%s", d.trap);
    } else if (!rc) {
        rc = plena_verify_check_stop(b, &d, o->threads, o->stop, &r->check, err);
        r->checked = rc == 0;
    }
    plena_verify_device_free(&d);
    return rc;
}

int plena_verify_moe(const struct plena_moe_build *b, const struct plena_verify_moe_opts *o,
                     struct plena_verify_moe_report *r, struct plena_err *err)
{
    memset(r, 0, sizeof *r);
    r->status = PLENA_OK;
    /* the routing statistics go into the profile and the report */
    int rc = plena_verify_routing_stats(b, &r->routing, err);
    if (rc) return rc;
    struct readback rb = {.b = b};
    if (o->run) {
        rc = timed_run(b, o, r, o->check ? &rb : NULL, err);
        if (!rc && r->run.status != PLENA_RUN_OUT_COMPLETED) {
            /* a stopped run is interrupted (exit 5), any other trap a failure */
            r->status = r->run.code == PLENA_E_INTERRUPTED ? PLENA_E_INTERRUPTED : PLENA_E_FAILED;
        }
        if (rc || r->run.status != PLENA_RUN_OUT_COMPLETED) {
            plena_verify_device_free(&rb.d);
            return rc;
        }
    }
    if (o->check) {
        if ((rc = functional_check(b, o, r, &rb, err))) return rc;
        if (r->status == PLENA_E_INTERRUPTED) return 0;
        if (r->check_trapped || !r->check.passed) r->status = PLENA_E_FAILED;
    }
    return 0;
}
