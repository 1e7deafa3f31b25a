/* Timeline (docs/timeline.md): the trace-event structure (every event has ph,
 * ts, pid, tid; durations non-negative; slices of one track never overlap),
 * the stage slices summing exactly to the profile's per-stage picoseconds,
 * groups summing to the run's serial time, the HBM counter to the run's bytes,
 * the hidden-prefetch track to the overlay's hidden time, and the automatic
 * merging bound. The JSON is read with jansson, never with the writer's code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/test_support.h"
#include "isa/stages.h"
#include "run/run.h"
#include "timeline/timeline.h"

static char tmp[256];
static struct plena_settings g_settings;

static uint64_t ps_of(const json_t *v)
{
    assert_true(json_is_number(v));
    double d = json_number_value(v);
    assert_true(d >= 0);
    return (uint64_t)llround(d * 1e6);
}

static json_int_t geti(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

struct figures {
    uint64_t stage_ps[PLENA_STAGE_COUNT];
    uint64_t busy_ps, hidden_ps, span_end_ps;
    double counter_bytes;
    uint64_t slice_bytes; /* the resource slices' hbm_bytes */
    size_t n_resource_slices;
    size_t n_regions, n_merged_regions;
};

/* The structure checks of the trace-event format, and the sums. */
static void check_structure(const json_t *doc, struct figures *f)
{
    memset(f, 0, sizeof *f);
    assert_string_equal(json_string_value(json_object_get(doc, "displayTimeUnit")), "ns");
    const json_t *ev = json_object_get(doc, "traceEvents");
    assert_true(json_is_array(ev));
    assert_true(json_array_size(ev) > 0);
    uint64_t track_end[64] = {0};
    uint64_t last_counter_ts = 0;
    double last_counter_val = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(ev, i, e)
    {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        assert_non_null(ph);
        assert_true(json_is_number(json_object_get(e, "ts")));
        assert_true(json_is_integer(json_object_get(e, "pid")));
        json_int_t tid = geti(e, "tid");
        assert_true(tid >= 0 && tid < 64);
        assert_non_null(json_string_value(json_object_get(e, "name")));
        uint64_t ts = ps_of(json_object_get(e, "ts"));
        const json_t *args = json_object_get(e, "args");
        if (!strcmp(ph, "X")) {
            uint64_t dur = ps_of(json_object_get(e, "dur"));
            /* slices of one track come in time order and never overlap */
            assert_true(ts >= track_end[tid]);
            track_end[tid] = ts + dur;
            if (ts + dur > f->span_end_ps) f->span_end_ps = ts + dur;
            if (tid == 1) {
                int st = plena_stage_lookup(
                    json_string_value(json_object_get(e, "name")),
                    (unsigned)strlen(json_string_value(json_object_get(e, "name"))));
                assert_true(st >= 0);
                /* the exact integer and the microseconds agree */
                assert_int_equal((uint64_t)geti(args, "dur_ps"), dur);
                assert_int_equal((uint64_t)geti(args, "start_ps"), ts);
                const json_t *sp = json_object_get(args, "stage_ps");
                if (!sp) {
                    f->stage_ps[st] += (uint64_t)geti(args, "dur_ps");
                } else {
                    /* joined regions: every stage's share, summing to the slice */
                    uint64_t in = 0;
                    const char *k;
                    const json_t *v;
                    json_object_foreach((json_t *)sp, k, v)
                    {
                        int s2 = plena_stage_lookup(k, (unsigned)strlen(k));
                        assert_true(s2 >= 0);
                        f->stage_ps[s2] += (uint64_t)json_integer_value(v);
                        in += (uint64_t)json_integer_value(v);
                    }
                    assert_int_equal(in, dur);
                    f->n_merged_regions++;
                }
                f->n_regions++;
            } else {
                /* busy_ps is written where it differs from dur (merged slices) */
                const json_t *bj = json_object_get(args, "busy_ps");
                uint64_t busy = bj ? (uint64_t)geti(args, "busy_ps") : dur;
                assert_true(!bj || (uint64_t)json_integer_value(bj) != dur);
                assert_true(busy <= dur || dur == 0);
                const json_t *hb = json_object_get(args, "hbm_bytes");
                if (hb) f->slice_bytes += (uint64_t)json_integer_value(hb);
                if (!strcmp(json_string_value(json_object_get(e, "name")), "hidden prefetch"))
                    f->hidden_ps += busy;
                else
                    f->busy_ps += busy;
                f->n_resource_slices++;
            }
        } else if (!strcmp(ph, "C")) {
            if (!strcmp(json_string_value(json_object_get(e, "name")), "HBM bytes/us")) {
                /* a counter holds its value until the next sample */
                assert_true(ts >= last_counter_ts);
                f->counter_bytes += last_counter_val * (double)(ts - last_counter_ts) / 1e6;
                last_counter_ts = ts;
                last_counter_val = json_number_value(json_object_get(args, "read")) +
                                   json_number_value(json_object_get(args, "write"));
                assert_true(last_counter_val >= 0);
            }
        } else {
            assert_string_equal(ph, "M");
        }
    }
    assert_true(last_counter_val == 0); /* the counter ends at zero */
}

static json_t *load(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j) fprintf(stderr, "%s:%d: %s\n", p, je.line, je.text);
    assert_non_null(j);
    return j;
}

/* a prefetch (scale, stride and address registers first), matrix work, a
 * vector op in another stage, and a store */
/* the scale, stride and address registers of a prefetch */
#define PREFETCH_SETUP                                                                             \
    "; @stage=expert_weight_prefetch\n"                                                            \
    "S_ADDI_INT gp7, gp0, 65536\n"                                                                 \
    "C_SET_SCALE_REG gp7\n"                                                                        \
    "S_ADDI_INT gp8, gp0, 64\n"                                                                    \
    "C_SET_STRIDE_REG gp8\n"                                                                       \
    "S_ADDI_INT gp9, gp0, 8192\n"                                                                  \
    "S_ADDI_INT gp3, gp0, 0\n"                                                                     \
    "C_SET_ADDR_REG a1, gp0, gp3\n"                                                                \
    "S_ADDI_INT gp2, gp0, 0\n"

static const char *PROG = PREFETCH_SETUP "H_PREFETCH_V gp9, gp2, a1, 1, 0\n"
                                         "; @stage=expert_projection\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "; @stage=scatter_combine\n"
                                         "V_ADD_VV gp0, gp0, gp0\n"
                                         "; @stage=expert_projection\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "H_STORE_V gp9, gp2, a1, 1, 0\n";

static void run_prog(const char *program, const char *timeline, int overlap,
                     enum plena_timeline_detail d, struct plena_run_outcome *out)
{
    char prog[512], hbm[512], fp[512], tl[512], prof[512];
    struct plena_run_opts o;
    memset(&o, 0, sizeof o);
    o.program_path = plena_test_path(prog, sizeof prog, tmp, program);
    o.hbm_path = plena_test_path(hbm, sizeof hbm, tmp, "hbm.bin");
    o.fpsram_path = plena_test_path(fp, sizeof fp, tmp, "fp.bin");
    o.settings = &g_settings;
    o.hbm_model = -1;
    o.threads = 1;
    o.overlap = overlap;
    o.profile_path = plena_test_path(prof, sizeof prof, tmp, "prof.json");
    o.timeline_path = plena_test_path(tl, sizeof tl, tmp, timeline);
    o.timeline_detail = d;
    o.label = "test \"run\"";
    struct plena_err err = {0};
    assert_int_equal(plena_run_execute(&o, out, &err), 0);
    assert_true(out->timeline_written);
}

static void run_one(const char *timeline, int overlap, enum plena_timeline_detail d,
                    struct plena_run_outcome *out)
{
    run_prog("p.asm", timeline, overlap, d, out);
    assert_int_equal(out->status, PLENA_RUN_OUT_COMPLETED);
}

/* A run long enough for the merging, and so the segments of add_segment,
 * to begin (over PLENA_TIMELINE_MAX_SLICES groups), with runs of prefetches
 * between longer runs without: the batches with transactions and those without
 * (which the run's observer hands over without their or) keep every byte
 * in the slices and the counter. */
static void test_run_segments_bytes(void **state)
{
    (void)state;
    plena_test_write_text(tmp, "loop.asm",
                          PREFETCH_SETUP "; @stage=expert_projection\n"
                                         "C_LOOP_START gp10, 3000\n"
                                         "C_LOOP_START gp11, 100\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "S_ADDI_INT gp12, gp12, 1\n"
                                         "C_LOOP_END gp11\n"
                                         "C_LOOP_START gp11, 20\n"
                                         "H_PREFETCH_V gp9, gp2, a1, 1, 0\n"
                                         "M_MV gp0, gp0, gp0\n"
                                         "C_LOOP_END gp11\n"
                                         "C_LOOP_END gp10\n");
    struct plena_run_outcome out;
    run_prog("loop.asm", "loop.json", 0, PLENA_TIMELINE_GROUP, &out);
    assert_int_equal(out.status, PLENA_RUN_OUT_COMPLETED);
    assert_true(out.instructions_executed > 2 * PLENA_TIMELINE_MAX_SLICES);
    json_t *doc = load("loop.json");
    struct figures f;
    check_structure(doc, &f);
    const uint64_t want = out.bytes_read + out.bytes_written;
    assert_true(want >= 3000 * 20 * 64);
    assert_int_equal(f.slice_bytes, want);
    assert_true(fabs(f.counter_bytes - (double)want) <= 1e-9 * (double)want);
    assert_int_equal(f.busy_ps, out.serial_picos);
    json_decref(doc);
}

/* A trapping run (V_ADD_VV reads VRAM far out of range) still writes its
 * timeline: status "trapped", the stage sums those of the instructions that
 * ran (the profile's). */
static void test_trapped_run(void **state)
{
    (void)state;
    plena_test_write_text(tmp, "trap.asm",
                          "; @stage=gather\n"
                          "M_MV gp0, gp0, gp0\n"
                          "S_ADDI_INT gp2, gp0, 9\n"
                          "; @stage=expert_projection\n"
                          "S_LUI_INT gp3, 4000\n"
                          "M_MM gp0, gp0, gp0\n"
                          "V_ADD_VV gp0, gp3, gp3\n"
                          "M_MV gp0, gp0, gp0\n");
    struct plena_run_outcome out;
    run_prog("trap.asm", "trap.json", 0, PLENA_TIMELINE_GROUP, &out);
    assert_int_equal(out.status, PLENA_RUN_OUT_TRAPPED);
    json_t *doc = load("trap.json");
    struct figures f;
    check_structure(doc, &f);
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        assert_int_equal(f.stage_ps[s], out.stage_wall_picos[s]);
    assert_true(out.stage_wall_picos[PLENA_STAGE_GATHER] > 0);
    const json_t *od = json_object_get(doc, "otherData");
    assert_string_equal(json_string_value(json_object_get(od, "status")), "trapped");
    assert_int_equal(geti(od, "instructions_executed"), 4);
    json_decref(doc);
}

static void test_run_timeline_sums(void **state)
{
    (void)state;
    static const enum plena_timeline_detail details[] = {PLENA_TIMELINE_STAGE, PLENA_TIMELINE_GROUP,
                                                         PLENA_TIMELINE_INSTRUCTION};
    for (int overlap = 0; overlap <= 1; overlap++)
        for (size_t k = 0; k < 3; k++) {
            struct plena_run_outcome out;
            run_one("tl.json", overlap, details[k], &out);
            json_t *doc = load("tl.json");
            struct figures f;
            check_structure(doc, &f);
            /* stage slices = the profile's per-stage picoseconds, exactly */
            uint64_t total = 0;
            for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++) {
                assert_int_equal(f.stage_ps[s], out.stage_wall_picos[s]);
                total += f.stage_ps[s];
            }
            assert_int_equal(total, out.serial_picos);
            assert_true(out.stage_wall_picos[PLENA_STAGE_EXPERT_PROJECTION] > 0);
            assert_int_equal(f.span_end_ps, out.serial_picos);
            if (details[k] == PLENA_TIMELINE_STAGE)
                assert_int_equal(f.n_resource_slices, 0);
            else
                assert_int_equal(f.busy_ps, out.serial_picos);
            /* the M_MV group of three is one slice at group detail */
            if (details[k] == PLENA_TIMELINE_GROUP && !overlap)
                /* S C S C (S S) C S | H | (M M M) | V | M | H: 12 groups of 15 */
                assert_int_equal(f.n_resource_slices, 12);
            if (details[k] == PLENA_TIMELINE_INSTRUCTION && !overlap)
                assert_int_equal(f.n_resource_slices, 15);
            double want = (double)(out.bytes_read + out.bytes_written);
            assert_true(want > 0);
            assert_true(fabs(f.counter_bytes - want) <= 1e-9 * want);
            if (overlap && details[k] != PLENA_TIMELINE_STAGE) {
                assert_true(out.overlap.hidden_prefetch_picos > 0);
                assert_int_equal(f.hidden_ps, out.overlap.hidden_prefetch_picos);
            } else {
                assert_int_equal(f.hidden_ps, 0);
            }
            const json_t *od = json_object_get(doc, "otherData");
            assert_int_equal(geti(od, "clock_period_ps"), out.settings.clock_period_ps);
            assert_int_equal(geti(od, "serial_picos"), out.serial_picos);
            assert_string_equal(json_string_value(json_object_get(od, "detail")),
                                plena_timeline_detail_name(details[k]));
            json_decref(doc);
        }
}

/* Synthetic records: far more groups than the bound; the merged timeline keeps
 * the bound, the exact stage sums and the busy total. */
static void test_merging_bound(void **state)
{
    (void)state;
    const size_t n_pc = 40;
    struct plena_label lv[40];
    for (size_t i = 0; i < n_pc; i++) {
        lv[i].stage =
            (uint8_t)(i < 20 ? PLENA_STAGE_EXPERT_PROJECTION : PLENA_STAGE_SCATTER_COMBINE);
        lv[i].has_pair = 0;
        lv[i].pair = 0;
    }
    struct plena_labels labels;
    memset(&labels, 0, sizeof labels);
    labels.n = n_pc;
    labels.v = lv;
    struct plena_timeline_opts to = {PLENA_TIMELINE_GROUP, 64, 0, 1000, NULL, 0};
    struct plena_timeline *tl = NULL;
    assert_int_equal(plena_timeline_new(&to, &labels, n_pc, &tl, NULL), 0);
    uint64_t now = 0, stage_ps[PLENA_STAGE_COUNT] = {0};
    const unsigned ops[] = {PLENA_OP_M_MM, PLENA_OP_V_ADD_VV, PLENA_OP_S_ADDI_INT,
                            PLENA_OP_H_PREFETCH_V};
    for (uint32_t i = 0; i < 20000; i++) {
        struct plena_timing_record r;
        memset(&r, 0, sizeof r);
        r.pc = (i / 7) % 40;
        r.op = (uint8_t)ops[i % 4];
        r.start_ps = now;
        r.dur_ps = 1000 * (1 + i % 5);
        r.bytes_read = r.op == PLENA_OP_H_PREFETCH_V ? 512 : 0;
        now += r.dur_ps;
        stage_ps[lv[r.pc].stage] += r.dur_ps;
        plena_timeline_add(tl, &r);
    }
    struct plena_timeline_stats st;
    plena_timeline_stats(tl, &st);
    assert_true(st.merge_ps > 0);
    struct plena_timeline_run run = {"completed", now, now, 0, 0, 20000};
    struct plena_buf b;
    plena_buf_init(&b);
    assert_int_equal(plena_timeline_render(tl, &run, &b, NULL), 0);
    json_error_t je;
    json_t *doc = json_loadb(b.data, b.len, 0, &je);
    assert_non_null(doc);
    struct figures f;
    check_structure(doc, &f);
    assert_true(f.n_resource_slices <= 64);
    /* 20000 records change stage every 7: the stage track is bounded too */
    assert_true(f.n_regions <= 32);
    assert_true(f.n_merged_regions > 0);
    assert_int_equal(f.busy_ps, now);
    for (unsigned s = 0; s < PLENA_STAGE_COUNT; s++)
        assert_int_equal(f.stage_ps[s], stage_ps[s]);
    json_decref(doc);
    plena_buf_free(&b);
    plena_timeline_free(tl);
}

/* Renders tl (a completed run ending at now ps after n instructions) into b,
 * NUL-terminated for strstr, gives the steps its segments took (seg_steps
 * may be NULL) and frees it. */
static void render_free(struct plena_timeline *tl, uint64_t now, uint64_t n, struct plena_buf *b,
                        uint64_t *seg_steps)
{
    struct plena_timeline_run run = {"completed", now, now, 0, 0, n};
    plena_buf_init(b);
    assert_int_equal(plena_timeline_render(tl, &run, b, NULL), 0);
    assert_int_equal(plena_buf_append(b, "", 1), 0);
    struct plena_timeline_stats stats;
    plena_timeline_stats(tl, &stats);
    if (seg_steps) *seg_steps = stats.n_segment_steps;
    plena_timeline_free(tl);
}

/* Renders a synthetic stream (ops, durations, zero-cost instructions, stage
 * changes, HBM bytes and, with mode bit 0, idle gaps, from a fixed LCG)
 * through a timeline with the given options: as records
 * (plena_timeline_add), or with `steps` as steps handed over in batches of
 * varying size (plena_timeline_add_steps; steps have no gaps). Mode bit 1:
 * every other run of 4000 instructions has one opcode per track (slices
 * that are not "merged" after ones that are, on the same tracks). Mode bit
 * 3: no zero-cost instructions (a run has next to none; each ends a
 * segment of add_segment). `seg_steps` (may be NULL): the steps the
 * segments took. */
static void render_stream(const struct plena_timeline_opts *to, const struct plena_labels *labels,
                          size_t n_pc, uint32_t n, int mode, int steps, struct plena_buf *b,
                          uint64_t *seg_steps)
{
    const int gaps = mode & 1, phases = mode & 2, no_zero = mode & 8;
    struct plena_timeline *tl = NULL;
    assert_int_equal(plena_timeline_new(to, labels, n_pc, &tl, NULL), 0);
    const unsigned ops[] = {PLENA_OP_M_MM,         PLENA_OP_V_ADD_VV,  PLENA_OP_S_ADDI_INT,
                            PLENA_OP_H_PREFETCH_V, PLENA_OP_H_STORE_V, PLENA_OP_V_MUL_VV};
    struct plena_timing_step batch[97];
    size_t n_batch = 0, batch_max = 1;
    uint64_t now = 0, x = 12345;
    for (uint32_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned k = (unsigned)(x >> 33);
        struct plena_timing_record r;
        memset(&r, 0, sizeof r);
        r.pc = (uint32_t)((i / 5 + (k & 1)) % n_pc);
        /* runs of one opcode (groups) and alternation */
        r.op = (uint8_t)ops[(k >> 3) % 8 < 6 ? (k >> 3) % 8 : i % 6];
        if (phases && i / 4000 % 2) r.op = (uint8_t)ops[(k >> 3) % 3]; /* M_MM, V_ADD, S_ADDI */
        r.dur_ps = (k >> 7) % 9 == 0 && !no_zero ? 0 : 1000 * (1 + (k >> 11) % 7);
        if (gaps && (k >> 14) % 97 == 0) now += 500; /* the group cannot extend */
        r.start_ps = now;
        if (r.op == PLENA_OP_H_PREFETCH_V) r.bytes_read = 64 * (1 + (k >> 17) % 4);
        if (r.op == PLENA_OP_H_STORE_V) r.bytes_written = 64;
        now += r.dur_ps;
        if (!steps) {
            plena_timeline_add(tl, &r);
            continue;
        }
        struct plena_timing_step st = {r.dur_ps, r.bytes_read / 64, r.bytes_written / 64, r.pc,
                                       r.op};
        batch[n_batch++] = st;
        if (n_batch == batch_max) {
            plena_timeline_add_steps(tl, batch, n_batch);
            n_batch = 0;
            batch_max = batch_max % 97 + 1 + (k >> 20) % 13;
            if (batch_max > 97) batch_max = 97;
        }
    }
    if (n_batch) plena_timeline_add_steps(tl, batch, n_batch);
    render_free(tl, now, n, b, seg_steps);
}

static void assert_same_buf(const struct plena_buf *a, const struct plena_buf *b)
{
    assert_int_equal(a->len, b->len);
    assert_memory_equal(a->data, b->data, a->len);
}

/* The group detail's direct path (the default) and a run's batched steps
 * write the general path's file byte for byte: without merging, through the
 * automatic merging, and when the merging crosses stage regions. */
static void test_direct_path_identical(void **state)
{
    (void)state;
    const size_t n_pc = 64;
    struct plena_label lv[64];
    struct plena_labels labels;
    memset(&labels, 0, sizeof labels);
    labels.n = n_pc;
    labels.v = lv;
    /* four stages in runs of 8 pcs (about 40 instructions per region: with
     * a bound the merging crosses regions), and one stage (the merging
     * stays within the region, windows end slices) */
    const size_t bounds[] = {0, 64, 1000, 1000};
    const uint32_t counts[] = {3000, 50000, 50000, 50000};
    for (unsigned c = 0; c < 4; c++) {
        for (size_t i = 0; i < n_pc; i++) {
            lv[i].stage = (uint8_t)(c == 3 || i / 8 % 4 == 0 ? PLENA_STAGE_EXPERT_PROJECTION
                                    : i / 8 % 4 == 1         ? PLENA_STAGE_SCATTER_COMBINE
                                    : i / 8 % 4 == 2         ? PLENA_STAGE_ROUTER_TOPK
                                                             : PLENA_STAGE_OTHER);
            lv[i].has_pair = 0;
            lv[i].pair = 0;
        }
        struct plena_timeline_opts direct = {PLENA_TIMELINE_GROUP, bounds[c], 0, 1000, NULL, 0};
        struct plena_timeline_opts general = direct;
        general.general_path = 1;
        for (int mode = 0; mode < 11; mode += mode == 2 ? 6 : 1) { /* 0, 1, 2, 8, 9, 10 */
            struct plena_buf a, g;
            render_stream(&direct, &labels, n_pc, counts[c], mode, 0, &a, NULL);
            render_stream(&general, &labels, n_pc, counts[c], mode, 0, &g, NULL);
            assert_same_buf(&a, &g);
            /* the merging did happen: slices of two vector opcodes joined */
            if (c > 0) assert_non_null(strstr(a.data, "\"name\":\"merged\""));
            if (c == 0) assert_null(strstr(a.data, "\"name\":\"merged\""));
            if (!(mode & 1)) {
                struct plena_buf st, stg;
                uint64_t seg = 0, seg_general = 0;
                render_stream(&direct, &labels, n_pc, counts[c], mode, 1, &st, &seg);
                render_stream(&general, &labels, n_pc, counts[c], mode, 1, &stg, &seg_general);
                assert_same_buf(&st, &g);
                assert_same_buf(&stg, &g);
                /* the segments did take steps once merging began (without
                 * zero-cost ones, most), the general path none */
                assert_int_equal(seg_general, 0);
                if (c > 0) assert_true(seg > (mode & 8 ? counts[c] / 2 : counts[c] / 20));
                plena_buf_free(&st);
                plena_buf_free(&stg);
            }
            plena_buf_free(&a);
            plena_buf_free(&g);
        }
    }
}

/* Renders n steps handed over in batches of 50 (plena_timeline_add_steps,
 * or with `no_txn` plena_timeline_add_steps_no_txn for the batches without
 * transactions); `seg`: the steps the segments took. */
static void render_steps_as(const struct plena_timeline_opts *to, const struct plena_labels *labels,
                            const struct plena_timing_step *s, size_t n, int no_txn,
                            struct plena_buf *b, uint64_t *seg)
{
    struct plena_timeline *tl = NULL;
    assert_int_equal(plena_timeline_new(to, labels, labels->n, &tl, NULL), 0);
    for (size_t i = 0; i < n; i += 50) {
        const size_t m = n - i < 50 ? n - i : 50;
        int moved = 0;
        for (size_t j = i; j < i + m; j++)
            moved |= s[j].rd_txn != 0 || s[j].wr_txn != 0;
        if (no_txn && !moved)
            plena_timeline_add_steps_no_txn(tl, s + i, m);
        else
            plena_timeline_add_steps(tl, s + i, m);
    }
    render_free(tl, 0, n, b, seg);
}

static void render_steps(const struct plena_timeline_opts *to, const struct plena_labels *labels,
                         const struct plena_timing_step *s, size_t n, struct plena_buf *b,
                         uint64_t *seg)
{
    render_steps_as(to, labels, s, n, 0, b, seg);
}

/* The limits of the segments (add_segment) against the exact path, step by
 * step: a duration that would overflow the clock (2^64 - 11 ps, at a clock
 * of microseconds), a clock past 2^63 with merge windows (and so the
 * segments' stop) beyond it, where a duration below 2^63 overflows it,
 * opcode bytes above 63 in slices of one opcode (the exact path marks them
 * "merged"), transaction counts whose sum wraps to 0, steps of 2^40 - 1
 * and 2^40 ps behind counter buckets wider than a segment's span (the
 * packed per-track word), and pcs of one stage in two runs (the pc-run
 * test). Each stream has its case after some thousand small steps of two
 * opcodes on two tracks, so the merging, and with it the segments, have
 * begun; each also goes through plena_timeline_add_steps_no_txn for its
 * batches without transactions. */
static void test_segment_limits(void **state)
{
    (void)state;
    struct plena_label lv[8];
    memset(lv, 0, sizeof lv);
    for (unsigned i = 0; i < 8; i++)
        lv[i].stage = PLENA_STAGE_EXPERT_PROJECTION;
    struct plena_labels labels;
    memset(&labels, 0, sizeof labels);
    labels.n = 8;
    labels.v = lv;
    /* pc 4 of another stage, never executed in kind 5: pcs 0-3 and 5-7 are
     * two runs of one stage */
    struct plena_label lv2[8];
    memcpy(lv2, lv, sizeof lv2);
    lv2[4].stage = PLENA_STAGE_ROUTER_TOPK;
    struct plena_labels labels2 = labels;
    labels2.v = lv2;
    struct plena_timeline_opts direct = {PLENA_TIMELINE_GROUP, 64, 0, 1000, NULL, 0};
    struct plena_timeline_opts general = direct;
    general.general_path = 1;
    enum { N = 4000 };
    static struct plena_timing_step s[N];
    for (int kind = 0; kind < 6; kind++) {
        for (size_t i = 0; i < N; i++) {
            struct plena_timing_step st = {1000 + 1000 * (i % 3), 0, 0, (uint32_t)(i % 8),
                                           (uint8_t)(i % 2 ? PLENA_OP_M_MM : PLENA_OP_S_ADDI_INT)};
            if (kind == 5) st.pc = (uint32_t)(i % 7 < 4 ? i % 7 : i % 7 + 1);
            s[i] = st;
        }
        /* not at a batch's start, nor at a window's end (where a segment stops anyway) */
        if (kind == 0) s[3017].dur_ps = UINT64_MAX - 10;
        if (kind == 1) {
            s[0].dur_ps = (UINT64_C(1) << 63) + (UINT64_C(1) << 40);
            s[3017].dur_ps = (UINT64_C(1) << 63) - 1;
        }
        if (kind == 2)
            for (size_t i = 1001; i < N; i += 40)
                s[i].op = (uint8_t)(64 + PLENA_OP_M_MM);
        if (kind == 3) { /* read counts of two tracks whose sum wraps to 0 */
            s[3011].rd_txn = 1;
            s[3012].rd_txn = UINT64_MAX;
        }
        if (kind == 4) {
            /* a first step of 2^60 ps makes the counter buckets 2^47 ps wide, so
             * only the segment's own span (2^40 ps) keeps a track's time in a
             * segment below its step count's bits; one step of 2^40 ps (the
             * exact path) and one of 2^40 - 1 (the longest a segment takes) */
            for (size_t i = 0; i < N; i++)
                s[i].dur_ps = (UINT64_C(1) << 39) - i % 2;
            s[0].dur_ps = UINT64_C(1) << 60;
            s[2011].dur_ps = UINT64_C(1) << 40;
            s[2017].dur_ps = (UINT64_C(1) << 40) - 1;
        }
        struct plena_buf a, g;
        uint64_t seg = 0, seg_general = 0;
        const struct plena_labels *lb = kind == 5 ? &labels2 : &labels;
        render_steps(&direct, lb, s, N, &a, &seg);
        render_steps(&general, lb, s, N, &g, &seg_general);
        assert_same_buf(&a, &g);
        /* the batches without transactions through the variant without their or */
        struct plena_buf q;
        uint64_t seg_no_txn = 0;
        render_steps_as(&direct, lb, s, N, 1, &q, &seg_no_txn);
        assert_same_buf(&q, &g);
        assert_int_equal(seg_no_txn, seg);
        plena_buf_free(&q);
        /* past 2^63 the exact path takes every step */
        assert_true(kind == 1 ? seg == 0 : seg > N / 2);
        assert_int_equal(seg_general, 0);
        plena_buf_free(&a);
        plena_buf_free(&g);
    }
}

static void test_detail_names(void **state)
{
    (void)state;
    enum plena_timeline_detail d = PLENA_TIMELINE_STAGE;
    assert_int_equal(plena_timeline_detail_parse("instruction", &d), 0);
    assert_int_equal(d, PLENA_TIMELINE_INSTRUCTION);
    assert_int_equal(plena_timeline_detail_parse("groups", &d), -1);
    assert_string_equal(plena_timeline_detail_name(PLENA_TIMELINE_DETAIL_DEFAULT), "group");
    assert_int_equal(plena_timeline_track_of(PLENA_OP_H_STORE_V), PLENA_TL_TRACK_HBM_WRITE);
    assert_int_equal(plena_timeline_track_of(PLENA_OP_H_PREFETCH_M), PLENA_TL_TRACK_HBM_READ);
    assert_int_equal(plena_timeline_track_of(PLENA_OP_M_MM), PLENA_TL_TRACK_MATRIX);
}

/* The scratch directory and the inputs of the runs (zeros), made once. */
static int make_inputs(void)
{
    if (plena_test_mkdtemp(tmp, sizeof tmp, "test_timeline")) return -1;
    plena_settings_reference(&g_settings);
    const char *ov[] = {"CONFIG.VECTOR_SRAM_SIZE=8192", "CONFIG.HBM_SIZE=1048576"};
    if (plena_settings_override_many(&g_settings, ov, 2, NULL)) return -1;
    char *z = calloc(1, 1048576);
    plena_test_write_file(tmp, "hbm.bin", z, 1048576);
    plena_test_write_file(tmp, "fp.bin", z, 2048);
    free(z);
    plena_test_write_text(tmp, "p.asm", PROG);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detail_names),      cmocka_unit_test(test_run_timeline_sums),
        cmocka_unit_test(test_merging_bound),     cmocka_unit_test(test_direct_path_identical),
        cmocka_unit_test(test_segment_limits),    cmocka_unit_test(test_trapped_run),
        cmocka_unit_test(test_run_segments_bytes)};
    if (make_inputs()) return 1;
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    plena_test_rmtree(tmp);
    return failed;
}
