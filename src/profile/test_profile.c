/* Profile accumulator and JSON v4 writer on synthetic events
 * (docs/profile.md "Profile JSON"): key order, exact picosecond sums rounded
 * once (I2), the identities of docs/profile.md "Profile JSON", stage names == stages.def both ways
 * (T8), constants byte-equal to the spec text, pairs, classification, traps and the
 * shared-vs-routed split. End-to-end runs live in src/run/test_run.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "profile/profile.h"
#include "common/test_support.h"

/* Spec text of docs/profile.md "Constant texts", copied from the spec (not from the library). */
static const char *SPEC_L =
    "logical byte counts are not modelled; every logical_bytes field is null";
static const char *SPEC_P =
    "physical bytes count 64-byte HBM transactions issued by each instruction, "
    "read-modify-write reads included";
static const char *SPEC_R = "resource figures bill each instruction's whole serial duration to its "
                            "opcode class; they are a proxy, not unit occupancy";
static const char *SPEC_C =
    "Stages come from @stage markers, or from legacy comment substrings in unmarked programs; time "
    "and bytes are billed per executed instruction in serial simulated time; pair ids are static "
    "slot numbers from the program text, not expert ids; cycle fields round picoseconds up once "
    "each, so add wall_picos before rounding.";
static const char *SPEC_S =
    "A shared-vs-routed cycle ratio measures this toolchain's routed lowering at least as much as "
    "the MoE architecture: the pair-major routed lowering runs every (token, expert) pair in its "
    "own BLEN-row slot and fetches that expert's weights again for each pair, so routed cycles "
    "grow "
    "with tokens x top_k while the batched shared expert does not; "
    "attribution_notes.routed_lowering "
    "names the lowering behind these figures, and the ratio must not be quoted as an architectural "
    "result.";

static const char *TOP_KEYS[] = {"schema_version",
                                 "run_status",
                                 "trap",
                                 "label_count",
                                 "program_instruction_count",
                                 "total_instructions_executed",
                                 "clock_period_ps",
                                 "total_simulation_picos",
                                 "total_simulation_cycles",
                                 "total_profiled_picos",
                                 "total_profiled_cycles",
                                 "total_unprofiled_cycles",
                                 "cycle_accounting_status",
                                 "total_profiled_seconds",
                                 "total_hbm_bytes_read",
                                 "total_hbm_bytes_written",
                                 "total_resource_proxy_picos",
                                 "total_resource_proxy_cycles",
                                 "logical_byte_status",
                                 "physical_byte_status",
                                 "resource_cycle_status",
                                 "classification",
                                 "overlap",
                                 "stages",
                                 "pairs",
                                 "caveat",
                                 NULL};
/* The keys of the stage entry, the pair entry and the pair's per-stage
 * entry in order, with the "entries" column of the table in docs/profile.md
 * "Profile JSON" (entry() kinds 0, 1 and 2). */
enum { E_STAGE = 1, E_PAIR = 2, E_PAIR_STAGE = 4, E_ALL = 7 };
static const struct {
    const char *key;
    unsigned entries;
} ENTRY_KEYS[] = {
    {"instructions", E_ALL},
    {"wall_picos", E_ALL},
    {"wall_cycles", E_ALL},
    {"seconds", E_ALL},
    {"instruction_fraction", E_STAGE},
    {"time_fraction", E_STAGE},
    {"logical_bytes_read", E_ALL},
    {"logical_bytes_written", E_ALL},
    {"physical_hbm_bytes_read", E_ALL},
    {"physical_hbm_bytes_written", E_ALL},
    {"hbm_bytes_read", E_ALL},
    {"hbm_bytes_written", E_ALL},
    {"resource_proxy_picos", E_ALL},
    {"resource_proxy_cycles", E_ALL},
    {"stages", E_PAIR},
};
static const char *CLASS_KEYS[] = {"stage_attribution",          "stage_marker_count",
                                   "unresolved_stage_markers",   "label_count",
                                   "unclassified_labels",        "unclassified_fraction",
                                   "routed_moe_markers_present", "vocabulary_drift_warning",
                                   "attribution_notes",          NULL};
static const char *RES_KEYS[] = {"matrix", "vector", "scalar", "dma", "other", NULL};
static const char *OVERLAP_KEYS[] = {"enabled",
                                     "serial_picos",
                                     "serial_cycles",
                                     "adjusted_picos",
                                     "adjusted_cycles",
                                     "hidden_prefetch_picos",
                                     "hidden_prefetch_cycles",
                                     "pending_prefetch_picos",
                                     "pending_prefetch_cycles",
                                     "prefetch_ops",
                                     "compute_ops",
                                     "barrier_ops",
                                     "dependent_prefetch_stalls",
                                     NULL};

static void assert_keys(json_t *o, const char **keys)
{
    assert_true(json_is_object(o));
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        (void)v;
        assert_non_null(keys[i]);
        assert_string_equal(k, keys[i]);
        i++;
    }
    assert_null(keys[i]);
}

/* o's keys are those of ENTRY_KEYS marked for entry kind `entry`, in order */
static void assert_entry_keys(json_t *o, unsigned entry)
{
    const char *keys[sizeof ENTRY_KEYS / sizeof ENTRY_KEYS[0] + 1];
    size_t n = 0;
    for (size_t i = 0; i < sizeof ENTRY_KEYS / sizeof ENTRY_KEYS[0]; i++)
        if (ENTRY_KEYS[i].entries & entry) keys[n++] = ENTRY_KEYS[i].key;
    keys[n] = NULL;
    assert_keys(o, keys);
}

static json_int_t geti(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

/* Labels: pc0 other, pc1-2 gather pair 10, pc3 expert_projection pair 2,
 * pc4 expert_projection pair 7 (never executed), pc5 shared_expert_gate. */
static struct plena_label LV[6] = {
    {PLENA_STAGE_OTHER, 0, 0},
    {PLENA_STAGE_GATHER, 1, 10},
    {PLENA_STAGE_GATHER, 1, 10},
    {PLENA_STAGE_EXPERT_PROJECTION, 1, 2},
    {PLENA_STAGE_EXPERT_PROJECTION, 1, 7},
    {PLENA_STAGE_SHARED_EXPERT_GATE, 0, 0},
};

static void make_labels(struct plena_labels *l, enum plena_attribution mode)
{
    memset(l, 0, sizeof *l);
    l->n = 6;
    l->v = LV;
    l->mode = mode;
    l->stage_marker_count = mode == PLENA_ATTR_MARKERS ? 5 : 0;
    l->routed_moe_markers_present = 1;
}

static json_t *render(struct plena_profile *p, const struct plena_profile_run *run, char **text_out)
{
    char *text = NULL;
    size_t len = 0;
    plena_profile_flush(p);
    assert_int_equal(plena_profile_render(p, run, &text, &len, NULL), 0);
    assert_true(len > 2);
    assert_int_equal(text[len - 1], '\n');
    assert_int_equal(strlen(text), len);
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    assert_non_null(j);
    if (text_out)
        *text_out = text;
    else
        plena_free(text);
    return j;
}

/* Feeds: pc0 S_ADDI_INT 1000; pc1 H_PREFETCH_V 1500 (8 reads); pc2 V_ADD_VV 1500;
 * pc3 M_MM 64000; pc1 again H_STORE_V 2300 (2 reads 2 writes); pc5 S_ADD_FP 0. */
static void feed(struct plena_profile *p)
{
    plena_profile_add(p, 0, 0x22, 1000, 0, 0);
    plena_profile_add(p, 1, 0x29, 1500, 8, 0);
    plena_profile_add(p, 2, 0x0D, 1500, 0, 0);
    plena_profile_add(p, 3, 0x01, 64000, 0, 0);
    plena_profile_add(p, 1, 0x2A, 2300, 2, 2);
    plena_profile_add(p, 5, 0x17, 0, 0, 0);
}

static void test_keys_order_and_sums(void **state)
{
    (void)state;
    struct plena_labels l;
    make_labels(&l, PLENA_ATTR_MARKERS);
    struct plena_profile p;
    assert_int_equal(plena_profile_init(&p, &l, 6, 1000, NULL), 0);
    feed(&p);
    struct plena_profile_run run = {NULL, 6, 70300, NULL, NULL};
    char *text;
    json_t *j = render(&p, &run, &text);
    assert_keys(j, TOP_KEYS);
    assert_int_equal(geti(j, "schema_version"), 4);
    assert_string_equal(json_string_value(json_object_get(j, "run_status")), "completed");
    assert_true(json_is_null(json_object_get(j, "trap")));
    assert_true(json_is_null(json_object_get(j, "overlap")));
    assert_int_equal(geti(j, "label_count"), 6);
    assert_int_equal(geti(j, "program_instruction_count"), 6);
    assert_int_equal(geti(j, "total_instructions_executed"), 6);
    assert_int_equal(geti(j, "total_simulation_picos"), 70300);
    assert_int_equal(geti(j, "total_simulation_cycles"), 71);
    assert_int_equal(geti(j, "total_profiled_picos"), 70300);
    assert_int_equal(geti(j, "total_profiled_cycles"), 71);
    assert_int_equal(geti(j, "total_unprofiled_cycles"), 0);
    assert_string_equal(json_string_value(json_object_get(j, "cycle_accounting_status")),
                        "profiled_cycles_match_total");
    assert_int_equal(geti(j, "total_hbm_bytes_read"), 640);
    assert_int_equal(geti(j, "total_hbm_bytes_written"), 128);
    assert_keys(json_object_get(j, "total_resource_proxy_picos"), RES_KEYS);
    assert_keys(json_object_get(j, "total_resource_proxy_cycles"), RES_KEYS);
    json_t *trp = json_object_get(j, "total_resource_proxy_picos");
    assert_int_equal(geti(trp, "dma"), 3800);
    assert_int_equal(geti(trp, "matrix"), 64000);
    assert_int_equal(geti(trp, "vector"), 1500);
    assert_int_equal(geti(trp, "scalar"), 1000);
    assert_int_equal(geti(trp, "other"), 0);
    assert_int_equal(geti(json_object_get(j, "total_resource_proxy_cycles"), "dma"), 4);
    /* reals: %.17g, always typed real */
    assert_true(json_is_real(json_object_get(j, "total_profiled_seconds")));
    char want[64];
    snprintf(want, sizeof want, "\"total_profiled_seconds\": %.17g,", 70300 / 1e12);
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "\n  \"schema_version\": 4,\n")); /* 2-space indent */

    /* stages: all 15 in stages.def order, each with the keys of docs/profile.md "Profile JSON" */
    json_t *st = json_object_get(j, "stages");
    assert_int_equal(json_object_size(st), PLENA_STAGE_COUNT);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_int_t sum_ps = 0, sum_n = 0, sum_rd = 0, sum_wr = 0;
    json_object_foreach(st, k, v)
    {
        assert_string_equal(k, plena_stage_name((enum plena_stage)i));
        assert_entry_keys(v, E_STAGE);
        assert_true(json_is_null(json_object_get(v, "logical_bytes_read")));
        assert_int_equal(geti(v, "hbm_bytes_read"), geti(v, "physical_hbm_bytes_read"));
        sum_ps += geti(v, "wall_picos");
        sum_n += geti(v, "instructions");
        sum_rd += geti(v, "physical_hbm_bytes_read");
        sum_wr += geti(v, "physical_hbm_bytes_written");
        i++;
    }
    assert_int_equal(sum_ps, 70300);
    assert_int_equal(sum_n, 6);
    assert_int_equal(sum_rd, 640);
    assert_int_equal(sum_wr, 128);
    /* gather: 1500 + 1500 + 2300 = 5300 ps -> 6 cycles, rounded once
     * (per-instruction rounding would give 2 + 2 + 3 = 7) */
    json_t *g = json_object_get(st, "gather");
    assert_int_equal(geti(g, "instructions"), 3);
    assert_int_equal(geti(g, "wall_picos"), 5300);
    assert_int_equal(geti(g, "wall_cycles"), 6);
    assert_int_equal(geti(json_object_get(g, "resource_proxy_cycles"), "dma"), 4);
    assert_int_equal(geti(json_object_get(g, "resource_proxy_cycles"), "vector"), 2);
    assert_true(json_real_value(json_object_get(g, "instruction_fraction")) == 3.0 / 6.0);
    assert_true(json_real_value(json_object_get(g, "time_fraction")) == 5300.0 / 70300.0);
    json_t *sg = json_object_get(st, "shared_expert_gate");
    assert_int_equal(geti(sg, "instructions"), 1);
    assert_int_equal(geti(sg, "wall_picos"), 0);

    /* pairs: ascending numeric ("2" before "10"), pair 7 never ran: absent */
    json_t *pairs = json_object_get(j, "pairs");
    assert_int_equal(json_object_size(pairs), 2);
    void *it = json_object_iter(pairs);
    assert_string_equal(json_object_iter_key(it), "2");
    it = json_object_iter_next(pairs, it);
    assert_string_equal(json_object_iter_key(it), "10");
    json_t *p10 = json_object_get(pairs, "10");
    assert_entry_keys(p10, E_PAIR);
    assert_int_equal(geti(p10, "wall_picos"), 5300);
    assert_int_equal(geti(p10, "wall_cycles"), 6);
    json_int_t ps_sum = 0, n_sum = 0;
    json_object_foreach(json_object_get(p10, "stages"), k, v)
    {
        assert_entry_keys(v, E_PAIR_STAGE);
        ps_sum += geti(v, "wall_picos");
        n_sum += geti(v, "instructions");
    }
    assert_int_equal(json_object_size(json_object_get(p10, "stages")), PLENA_STAGE_COUNT);
    assert_int_equal(ps_sum, 5300);
    assert_int_equal(n_sum, 3);

    /* classification (markers mode) */
    json_t *c = json_object_get(j, "classification");
    assert_keys(c, CLASS_KEYS);
    assert_string_equal(json_string_value(json_object_get(c, "stage_attribution")), "markers");
    assert_int_equal(geti(c, "stage_marker_count"), 5);
    assert_int_equal(json_array_size(json_object_get(c, "unresolved_stage_markers")), 0);
    assert_int_equal(geti(c, "unclassified_labels"), 1);
    assert_true(json_real_value(json_object_get(c, "unclassified_fraction")) == 1.0 / 6.0);
    assert_true(json_is_true(json_object_get(c, "routed_moe_markers_present")));
    assert_true(json_is_null(json_object_get(c, "vocabulary_drift_warning")));
    json_t *notes = json_object_get(c, "attribution_notes");
    assert_keys(notes, (const char *[]){"shared_vs_routed", "routed_lowering", NULL});
    assert_string_equal(json_string_value(json_object_get(notes, "routed_lowering")), "pair_major");
    json_decref(j);
    plena_free(text);
    plena_profile_free(&p);
}

static void test_constants_byte_equal(void **state)
{
    (void)state;
    assert_string_equal(plena_profile_text_logical, SPEC_L);
    assert_string_equal(plena_profile_text_physical, SPEC_P);
    assert_string_equal(plena_profile_text_resource, SPEC_R);
    assert_string_equal(plena_profile_text_caveat, SPEC_C);
    assert_string_equal(plena_profile_text_shared_vs_routed, SPEC_S);
    /* one caveat per lowering: S for pair-major (and no routed expert), the
     * expert-major text for expert-major, and the two differ */
    assert_ptr_equal(plena_profile_shared_vs_routed_text(PLENA_LOWERING_PAIR_MAJOR),
                     plena_profile_text_shared_vs_routed);
    assert_ptr_equal(plena_profile_shared_vs_routed_text(PLENA_LOWERING_UNSET),
                     plena_profile_text_shared_vs_routed);
    assert_ptr_equal(plena_profile_shared_vs_routed_text(PLENA_LOWERING_EXPERT_MAJOR),
                     plena_profile_text_shared_vs_routed_expert_major);
    assert_string_not_equal(plena_profile_text_shared_vs_routed_expert_major, SPEC_S);
    assert_non_null(strstr(plena_profile_text_shared_vs_routed_expert_major, "expert-major"));
    struct plena_profile p;
    assert_int_equal(plena_profile_init(&p, NULL, 0, 1000, NULL), 0);
    struct plena_profile_run run = {NULL, 0, 0, NULL, NULL};
    json_t *j = render(&p, &run, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "logical_byte_status")), SPEC_L);
    assert_string_equal(json_string_value(json_object_get(j, "physical_byte_status")), SPEC_P);
    assert_string_equal(json_string_value(json_object_get(j, "resource_cycle_status")), SPEC_R);
    assert_string_equal(json_string_value(json_object_get(j, "caveat")), SPEC_C);
    json_t *notes = json_object_get(json_object_get(j, "classification"), "attribution_notes");
    assert_string_equal(json_string_value(json_object_get(notes, "shared_vs_routed")), SPEC_S);
    /* empty run: no routed work -> "none"; fractions 0 */
    assert_string_equal(json_string_value(json_object_get(notes, "routed_lowering")), "none");
    assert_true(json_real_value(json_object_get(json_object_get(j, "classification"),
                                                "unclassified_fraction")) == 0.0);
    json_decref(j);
    plena_profile_free(&p);
}

/* T8: stage names of the JSON equal stages.def rows, both directions, in order. */
static void test_stage_names_equal_stages_def(void **state)
{
    (void)state;
    char path[4096], *text;
    size_t len;
    snprintf(path, sizeof path, "%s/src/isa/stages.def", PLENA_SOURCE_DIR);
    assert_int_equal(plena_file_read_all(path, &text, &len, NULL), 0);
    char names[64][64];
    size_t n = 0;
    for (char *s = text; (s = strstr(s, "\nPLENA_STAGE(")) != NULL; s++) {
        char *q = strchr(s, '"');
        char *e = q ? strchr(q + 1, '"') : NULL;
        assert_non_null(e);
        assert_true(n < 64);
        snprintf(names[n++], 64, "%.*s", (int)(e - q - 1), q + 1);
    }
    plena_free(text);
    assert_int_equal(n, 15);
    struct plena_profile p;
    assert_int_equal(plena_profile_init(&p, NULL, 0, 1000, NULL), 0);
    struct plena_profile_run run = {NULL, 0, 0, NULL, NULL};
    json_t *j = render(&p, &run, NULL);
    json_t *st = json_object_get(j, "stages");
    assert_int_equal(json_object_size(st), n);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(st, k, v)
    {
        (void)v;
        assert_string_equal(k, names[i]); /* JSON -> def, in order */
        i++;
    }
    for (i = 0; i < n; i++)
        assert_non_null(json_object_get(st, names[i])); /* def -> JSON */
    json_decref(j);
    plena_profile_free(&p);
}

static void test_legacy_drift_and_trap(void **state)
{
    (void)state;
    /* legacy: 4 of 6 labels 'other' and routed markers present -> drift warning */
    static struct plena_label lv[6] = {
        {PLENA_STAGE_OTHER, 0, 0}, {PLENA_STAGE_OTHER, 0, 0},       {PLENA_STAGE_OTHER, 0, 0},
        {PLENA_STAGE_OTHER, 0, 0}, {PLENA_STAGE_EXPERT_BIAS, 1, 3}, {PLENA_STAGE_GATHER, 1, 3},
    };
    struct plena_unresolved_marker um[2] = {{"expert_bais", 4, 2}, {"pair=x", 9, 1}};
    struct plena_labels l = {0};
    l.n = 6;
    l.v = lv;
    l.mode = PLENA_ATTR_LEGACY;
    l.routed_moe_markers_present = 1;
    l.lowering = PLENA_LOWERING_EXPERT_MAJOR;
    l.n_unresolved = 2;
    l.unresolved = um;
    struct plena_profile p;
    assert_int_equal(plena_profile_init(&p, &l, 6, 1000, NULL), 0);
    plena_profile_add(&p, 4, 0x0D, 1000, 0, 0);
    struct plena_profile_trap t = {5, 0x01, "M_MM", "x.asm", 12, "trap at pc 5 ..."};
    struct plena_profile_run run = {&t, 1, 1000, NULL, NULL};
    json_t *j = render(&p, &run, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "run_status")), "trapped");
    json_t *tj = json_object_get(j, "trap");
    assert_keys(tj, (const char *[]){"pc", "opcode", "mnemonic", "source_file", "source_line",
                                     "message", NULL});
    assert_int_equal(geti(tj, "pc"), 5);
    assert_string_equal(json_string_value(json_object_get(tj, "source_file")), "x.asm");
    json_t *c = json_object_get(j, "classification");
    assert_string_equal(json_string_value(json_object_get(c, "stage_attribution")), "legacy");
    assert_true(json_is_true(json_object_get(c, "vocabulary_drift_warning")));
    json_t *u = json_object_get(c, "unresolved_stage_markers");
    assert_int_equal(json_array_size(u), 2);
    assert_keys(json_array_get(u, 0), (const char *[]){"name", "first_line", "occurrences", NULL});
    assert_string_equal(json_string_value(json_object_get(json_array_get(u, 0), "name")),
                        "expert_bais");
    assert_int_equal(geti(json_array_get(u, 0), "occurrences"), 2);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c, "attribution_notes"),
                                                          "routed_lowering")),
                        "expert_major");
    json_decref(j);
    plena_profile_free(&p);

    /* exactly 0.5 unclassified is not > 0.5: no warning */
    lv[3].stage = PLENA_STAGE_GATHER;
    assert_int_equal(plena_profile_init(&p, &l, 6, 1000, NULL), 0);
    run.trap = NULL;
    j = render(&p, &run, NULL);
    assert_true(json_is_false(
        json_object_get(json_object_get(j, "classification"), "vocabulary_drift_warning")));
    json_decref(j);
    plena_profile_free(&p);
    lv[3].stage = PLENA_STAGE_OTHER;

    /* label count != instruction count: input error naming both */
    struct plena_err err = {0};
    assert_int_equal(plena_profile_init(&p, &l, 7, 1000, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "6"));
    assert_non_null(strstr(err.msg, "7"));
}

static void test_overlap_object(void **state)
{
    (void)state;
    struct plena_profile p;
    assert_int_equal(plena_profile_init(&p, NULL, 1, 1000, NULL), 0);
    struct plena_overlap_report r = {6440000, 6440, 6408000, 6408, 32000, 32, 0, 0, 1, 100, 0, 0};
    struct plena_profile_run run = {NULL, 1, 6440000, &r, NULL};
    json_t *j = render(&p, &run, NULL);
    json_t *o = json_object_get(j, "overlap");
    assert_keys(o, OVERLAP_KEYS);
    assert_true(json_is_true(json_object_get(o, "enabled")));
    assert_int_equal(geti(o, "adjusted_cycles"), 6408);
    assert_int_equal(geti(o, "hidden_prefetch_cycles"), 32);
    /* the overlay never changes the serial totals */
    assert_int_equal(geti(j, "total_simulation_cycles"), 6440);
    json_decref(j);
    plena_profile_free(&p);
}

static void test_split(void **state)
{
    (void)state;
    uint64_t w[PLENA_STAGE_COUNT] = {0};
    w[PLENA_STAGE_SHARED_EXPERT_PROJECTION] = 1500;
    w[PLENA_STAGE_SHARED_EXPERT_GATE] = 1000;
    w[PLENA_STAGE_ROUTER_TOPK] = 2500;
    w[PLENA_STAGE_EXPERT_PROJECTION] = 5000;
    w[PLENA_STAGE_EXPERT_ROUTE_WEIGHT] = 1;
    w[PLENA_STAGE_GATHER] = 700;
    w[PLENA_STAGE_OTHER] = 300;
    w[PLENA_STAGE_RESIDUAL_SETUP] = 11;
    struct plena_profile_split s;
    plena_profile_split_compute(w, 1000, &s);
    assert_int_equal(s.shared_picos, 2500);
    assert_int_equal(s.routed_picos, 7501);
    assert_int_equal(s.excluded_picos, 1011);
    assert_int_equal(s.branch_picos[PLENA_BRANCH_COMBINE], 700);
    assert_int_equal(s.branch_picos[PLENA_BRANCH_RESIDUAL], 11);
    assert_int_equal(s.branch_picos[PLENA_BRANCH_OTHER], 300);
    assert_int_equal(s.total_picos, 11012);
    assert_int_equal(s.shared_cycles, 3);
    assert_int_equal(s.routed_cycles, 8);
    assert_int_equal(s.routing_tax_picos, 701);
    assert_int_equal(s.routing_tax_cycles, 1);
    assert_true(s.has_shared_fraction && s.shared_fraction == 2500.0 / 10001.0);
    assert_true(s.routed_fraction == 7501.0 / 10001.0);
    assert_true(s.has_ratio && s.shared_to_routed_ratio == 2500.0 / 7501.0);
    memset(w, 0, sizeof w);
    w[PLENA_STAGE_SHARED_EXPERT_ACTIVATION] = 5;
    plena_profile_split_compute(w, 1000, &s);
    assert_true(s.has_shared_fraction && s.shared_fraction == 1.0);
    assert_false(s.has_ratio);
    memset(w, 0, sizeof w);
    plena_profile_split_compute(w, 1000, &s);
    assert_false(s.has_shared_fraction);
    /* a clock period of 0 rounds nothing (replay's rule) */
    w[PLENA_STAGE_EXPERT_BIAS] = 7;
    plena_profile_split_compute(w, 0, &s);
    assert_int_equal(s.routed_cycles, 7);
}

static void test_resource_classes(void **state)
{
    (void)state;
    for (unsigned op = 0; op < 64; op++) {
        enum plena_resource want = PLENA_RESOURCE_OTHER;
        if (op >= 1 && op <= 12)
            want = PLENA_RESOURCE_MATRIX;
        else if ((op >= 13 && op <= 22) || op == 50 || op == 53 || op == 54 || op == 55)
            want = PLENA_RESOURCE_VECTOR;
        else if ((op >= 23 && op <= 39) || (op >= 43 && op <= 48) || op == 52 || op == 56)
            want = PLENA_RESOURCE_SCALAR;
        else if ((op >= 40 && op <= 42) || op == 57)
            want = PLENA_RESOURCE_DMA;
        assert_int_equal(plena_resource_of(op), want);
    }
}

static void test_alloc_failure(void **state)
{
    (void)state;
    struct plena_labels l;
    make_labels(&l, PLENA_ATTR_MARKERS);
    for (long n = 0; n < 4; n++) {
        struct plena_profile p;
        plena_alloc_fail_after(n);
        int rc = plena_profile_init(&p, &l, 6, 1000, NULL);
        plena_alloc_fail_reset();
        if (rc == 0) {
            plena_profile_free(&p);
            break;
        }
        assert_int_equal(rc, PLENA_E_NOMEM);
    }
}

/* The per-pc sums folded by plena_profile_flush give the figures of
 * billing every instruction: 20000 executions on the labels above (pcs 6
 * and 7 out of range: 'other', no pair; pc 1 alternating two opcodes, so
 * one of them takes the per-instruction path) checked against sums kept
 * here per stage and pair id, against a profile flushed after every
 * instruction, and against one fed the same instructions as steps in
 * batches of 1 to 13 (plena_profile_add_steps, the run session's way); an
 * unflushed profile is refused by render. */
static void test_flush_equals_per_instruction(void **state)
{
    (void)state;
    struct plena_labels l;
    make_labels(&l, PLENA_ATTR_MARKERS);
    struct plena_profile a, b, c;
    assert_int_equal(plena_profile_init(&a, &l, 6, 1000, NULL), 0);
    assert_int_equal(plena_profile_init(&b, &l, 6, 1000, NULL), 0);
    assert_int_equal(plena_profile_init(&c, &l, 6, 1000, NULL), 0);
    struct plena_timing_step batch[13];
    size_t n_batch = 0, batch_len = 1;
    static const unsigned ops[8] = {0x22, 0x29, 0x0D, 0x01, 0x17, 0x2A, 0x22, 0x01};
    struct plena_profile_figures st[PLENA_STAGE_COUNT], pair10, total;
    memset(st, 0, sizeof st);
    memset(&pair10, 0, sizeof pair10);
    memset(&total, 0, sizeof total);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const uint32_t pc = (uint32_t)(x % 8);
        const unsigned op = pc == 1 && (x >> 8) % 2 ? 0x01 : ops[pc]; /* M_MM: another resource */
        const uint64_t ps = (x >> 16) % 5000, rd = (x >> 32) % 9, wr = (x >> 40) % 3;
        plena_profile_add(&a, pc, op, ps, rd, wr);
        plena_profile_add(&b, pc, op, ps, rd, wr);
        plena_profile_flush(&b);
        batch[n_batch++] = (struct plena_timing_step){ps, rd, wr, pc, (uint8_t)op};
        if (n_batch == batch_len) {
            plena_profile_add_steps(&c, batch, n_batch);
            n_batch = 0;
            batch_len = 1 + (size_t)(x >> 48) % 13;
        }
        struct plena_profile_figures *f[3] = {&total,
                                              &st[pc < 6 ? LV[pc].stage : PLENA_STAGE_OTHER],
                                              pc == 1 || pc == 2 ? &pair10 : NULL};
        for (int q = 0; q < 3; q++) {
            if (!f[q]) continue;
            f[q]->instructions++;
            f[q]->picos += ps;
            f[q]->bytes_read += 64 * rd;
            f[q]->bytes_written += 64 * wr;
            f[q]->res_picos[plena_resource_of(op)] += ps;
        }
    }
    plena_profile_add_steps(&c, batch, n_batch);
    char *text = NULL;
    size_t len = 0;
    struct plena_profile_run run = {NULL, 20000, 0, NULL, NULL};
    struct plena_err err = {0};
    assert_int_equal(plena_profile_render(&a, &run, &text, &len, &err), PLENA_E_INTERNAL);
    assert_non_null(strstr(err.msg, "plena_profile_flush"));
    plena_profile_flush(&a);
    assert_memory_equal(&a.total, &total, sizeof total);
    assert_memory_equal(a.stage, st, sizeof st);
    assert_int_equal(a.pairs[2].id, 10); /* ids 2, 7, 10 in ascending order */
    assert_memory_equal(&a.pairs[2].total, &pair10, sizeof pair10);
    assert_memory_equal(&a.total, &b.total, sizeof a.total);
    assert_memory_equal(a.stage, b.stage, sizeof a.stage);
    for (size_t i = 0; i < a.n_pairs; i++)
        assert_memory_equal(&a.pairs[i], &b.pairs[i], sizeof a.pairs[i]);
    plena_profile_flush(&c);
    assert_memory_equal(&c.total, &total, sizeof total);
    assert_memory_equal(c.stage, st, sizeof st);
    for (size_t i = 0; i < a.n_pairs; i++)
        assert_memory_equal(&a.pairs[i], &c.pairs[i], sizeof a.pairs[i]);
    plena_profile_free(&a);
    plena_profile_free(&b);
    plena_profile_free(&c);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_flush_equals_per_instruction),
    cmocka_unit_test(test_keys_order_and_sums),
    cmocka_unit_test(test_constants_byte_equal),
    cmocka_unit_test(test_stage_names_equal_stages_def),
    cmocka_unit_test(test_legacy_drift_and_trap),
    cmocka_unit_test(test_overlap_object),
    cmocka_unit_test(test_split),
    cmocka_unit_test(test_resource_classes),
    cmocka_unit_test(test_alloc_failure),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
