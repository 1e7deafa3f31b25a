/* Label pass conformance (docs/profile.md "Stage attribution"): markers
 * vs legacy mode, each of the 13 legacy rules, pair-id extraction, pair
 * tokens, unresolved markers, the lowering marker and
 * routed_moe_markers_present. Expected labels are worked out by hand from the
 * rules, not from labels.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#include "isa/program.h"
#include "isa/stages.h"
#include "common/test_support.h"

/* "No pair" in expectations: outside the u32 range of pair ids. */
#define NONE      (UINT64_C(1) << 32)
#define PAIR(lab) ((lab).has_pair ? (uint64_t)(lab).pair : NONE)
#define S(x)      PLENA_STAGE_##x

static void labels(const char *text, struct plena_labels *l)
{
    struct plena_err err = {0};
    assert_int_equal(plena_labels_from_asm(text, strlen(text), "l.asm", l, &err), 0);
}

/* Stage of the last label of `text`. */
static int last_stage(const char *text)
{
    struct plena_labels l;
    labels(text, &l);
    assert_true(l.n > 0);
    int s = l.v[l.n - 1].stage;
    assert_int_equal(l.mode, PLENA_ATTR_LEGACY);
    plena_labels_free(&l);
    return s;
}

static void test_markers_mode_ignores_comments(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("C_BREAK\n; @stage=expert_activation\n; sub projection\nC_BREAK\n"
           "; Gather pair 3 router token\nC_BREAK\n// @stage=gather\nC_BREAK\n",
           &l);
    assert_int_equal(l.mode, PLENA_ATTR_MARKERS);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.stage_marker_count, 1);
    assert_int_equal(l.v[0].stage, S(OTHER)); /* before the first marker */
    assert_int_equal(l.v[1].stage, S(EXPERT_ACTIVATION));
    assert_int_equal(l.v[2].stage, S(EXPERT_ACTIVATION));
    assert_int_equal(l.v[3].stage, S(EXPERT_ACTIVATION)); /* '//' lines are not markers */
    assert_int_equal(PAIR(l.v[3]), NONE);
    assert_int_equal(l.n_unresolved, 0);
    plena_labels_free(&l);
    /* The same comments without a marker: legacy rule 12 fires. */
    assert_int_equal(last_stage("; sub projection\nC_BREAK\n// @stage=gather\n"),
                     S(EXPERT_PROJECTION));
}

static void test_marker_syntax_and_pairs(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("  ;;  @stage=gather @pair=12 free text\nC_BREAK\n"
           "; @stage=expert_projection\nC_BREAK\n" /* sticky stage: pair kept */
           "; @stage=router_topk\nC_BREAK\n"       /* non-sticky: pair none */
           "; @stage=scatter_combine @pair=7\r\nC_BREAK\n"
           "; @stage=scatter_combine @pair=none\nC_BREAK\n"
           "; @stage=gather @pair=x1\nC_BREAK\n" /* bad token: recorded, ignored */
           ";@stage=other\nC_BREAK\n",
           &l);
    assert_int_equal(l.mode, PLENA_ATTR_MARKERS);
    assert_int_equal(l.stage_marker_count, 7);
    static const struct {
        int stage;
        uint64_t pair;
    } want[] = {{S(GATHER), 12},         {S(EXPERT_PROJECTION), 12}, {S(ROUTER_TOPK), NONE},
                {S(SCATTER_COMBINE), 7}, {S(SCATTER_COMBINE), NONE}, {S(GATHER), NONE},
                {S(OTHER), NONE}};
    assert_int_equal(l.n, 7);
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(l.v[i].stage, want[i].stage);
        assert_int_equal(PAIR(l.v[i]), want[i].pair);
    }
    assert_int_equal(l.n_unresolved, 1);
    assert_string_equal(l.unresolved[0].name, "pair=x1");
    assert_int_equal(l.unresolved[0].first_line, 11);
    plena_labels_free(&l);
}

/* An unresolved marker: listed with line and count, the region keeps the
 * previous stage. */
static void test_unresolved_marker(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("; @stage=expert_activation @pair=2\nC_BREAK\n; @stage=expert_bais\nC_BREAK\n"
           "; @stage=\nC_BREAK\n; @stage=expert_bais @pair=5\nC_BREAK\n; @stage=expert_bias\n"
           "C_BREAK\n",
           &l);
    assert_int_equal(l.mode, PLENA_ATTR_MARKERS);
    assert_int_equal(l.stage_marker_count, 5);
    assert_int_equal(l.n, 5);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(l.v[i].stage, S(EXPERT_ACTIVATION));
        assert_int_equal(PAIR(l.v[i]), 2);
    }
    assert_int_equal(l.v[4].stage, S(EXPERT_BIAS));
    assert_int_equal(PAIR(l.v[4]), 2);
    assert_int_equal(l.n_unresolved, 2);
    assert_string_equal(l.unresolved[0].name, "expert_bais");
    assert_int_equal(l.unresolved[0].first_line, 3);
    assert_int_equal(l.unresolved[0].occurrences, 2);
    assert_string_equal(l.unresolved[1].name, "");
    assert_int_equal(l.unresolved[1].first_line, 5);
    assert_int_equal(l.unresolved[1].occurrences, 1);
    plena_labels_free(&l);
}

/* Many distinct unresolved markers (the index grows several times), each
 * given twice: every one listed once, in order of first appearance, with its
 * first line and count 2 (the 40,000-marker case of issue 16 took 8.5 s with
 * the linear search; its speed is not timed here). */
static void test_many_unresolved_markers(void **state)
{
    (void)state;
    enum { N = 3000 };
    char *text = plena_malloc((size_t)N * 2 * 32 + 1);
    assert_non_null(text);
    size_t at = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++)
            at += (size_t)sprintf(text + at, "; @stage=bogus_%d\n", i);
    struct plena_labels l;
    labels(text, &l);
    assert_int_equal(l.n_unresolved, N);
    for (int i = 0; i < N; i++) {
        char want[32];
        snprintf(want, sizeof want, "bogus_%d", i);
        assert_string_equal(l.unresolved[i].name, want);
        assert_int_equal(l.unresolved[i].first_line, i + 1);
        assert_int_equal(l.unresolved[i].occurrences, 2);
    }
    plena_labels_free(&l);
    plena_free(text);
}

/* One fixture per legacy rule. */
static void test_legacy_rules(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int stage;
    } cases[] = {
        /* 1 */ {"; GPT-OSS Router logits\nC_BREAK\n", S(ROUTER_TOPK)},
        /* 1 */ {"; router dot token 3\nC_BREAK\n", S(ROUTER_TOPK)},
        /* 2 */ {"; x_scatter rows\nC_BREAK\n", S(SCATTER_COMBINE)},
        /* 3 */ {"; Allocate VRAM Matrix step6_pair3_route\nC_BREAK\n", S(EXPERT_ROUTE_WEIGHT)},
        /* 4 */ {"; materialize route weight\nC_BREAK\n", S(EXPERT_ROUTE_WEIGHT)},
        /* 4 (cur) */
        {"; materialize route weight\n; true-zero VRAM rows\nC_BREAK\n", S(EXPERT_ROUTE_WEIGHT)},
        /* 5 */ {"; true-zero VRAM rows\nC_BREAK\n", S(ACCUMULATOR_INIT)},
        /* 5 */ {"; step6_device_routing_acc\nC_BREAK\n", S(ACCUMULATOR_INIT)},
        /* 6 */ {"; clear gather padding\nC_BREAK\n", S(GATHER)},
        /* 6 */ {"; allocate vram matrix step6_pair1_gather\nC_BREAK\n", S(GATHER)},
        /* 7 */ {"; Dynamic expert bias add\nC_BREAK\n", S(EXPERT_BIAS)},
        /* 8 */ {"; allocate vram matrix step6_pair1_sigmoid\nC_BREAK\n", S(EXPERT_ACTIVATION)},
        /* 9 */ {"; tile row max fp\nC_BREAK\n", S(EXPERT_ACTIVATION)},
        /* 9 (cur) */ {"; tile row min fp\n; vram fill zero\nC_BREAK\n", S(EXPERT_ACTIVATION)},
        /* 10 */ {"; expert_id_to_weight_base\nC_BREAK\n", S(EXPERT_WEIGHT_ADDRESS)},
        /* 11 */ {"; subblock [0, 1]\nC_BREAK\n", S(EXPERT_WEIGHT_PREFETCH)},
        /* 12 */ {"; vram block add\nC_BREAK\n", S(EXPERT_PROJECTION)},
        /* 12 */ {"; allocate vram matrix step6_pair1_up\nC_BREAK\n", S(EXPERT_PROJECTION)},
        /* 13 */ {"; subblock [\n; nothing to see\nC_BREAK\n", S(EXPERT_WEIGHT_PREFETCH)},
        /* 13 from the start */ {"; hello\nC_BREAK\n", S(OTHER)},
        /* rule order: 4 before 9 ('vram matrix mul' never reaches rule 9) */
        {"; tile row min fp\n; vram matrix mul\nC_BREAK\n", S(EXPERT_ROUTE_WEIGHT)},
        /* without cur = expert_activation, 'vram fill zero' keeps cur */
        {"; vram fill zero\nC_BREAK\n", S(OTHER)},
        /* rule 2 precedes rule 6 */
        {"; gather pair _scatter\nC_BREAK\n", S(SCATTER_COMBINE)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = last_stage(cases[i].text);
        if (got != cases[i].stage)
            print_error("case %zu '%s': got %s\n", i, cases[i].text, plena_stage_name(got));
        assert_int_equal(got, cases[i].stage);
    }
}

/* 4294967295 is an ordinary pair id in both modes (it once doubled as the
 * "no pair" sentinel and was lost); 4294967296 does not fit and is not one. */
static void test_pair_id_u32_max(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("; gather pair step6_pair4294967295\nC_BREAK\n"
           "; router token\nC_BREAK\n"
           "; vram block pair=4294967296 step6_pair4294967294\nC_BREAK\n",
           &l);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.v[0].has_pair, 1);
    assert_int_equal(PAIR(l.v[0]), 4294967295u);
    assert_int_equal(PAIR(l.v[1]), NONE);
    assert_int_equal(PAIR(l.v[2]), 4294967294u);
    plena_labels_free(&l);
    labels("; @stage=gather @pair=4294967295\nC_BREAK\n; @stage=gather @pair=none\nC_BREAK\n"
           "; @stage=gather @pair=4294967296\nC_BREAK\n",
           &l);
    assert_int_equal(l.n, 3);
    assert_int_equal(PAIR(l.v[0]), 4294967295u);
    assert_int_equal(PAIR(l.v[1]), NONE);
    assert_int_equal(PAIR(l.v[2]), NONE); /* not an id: recorded, the gather keeps no pair */
    assert_int_equal(l.n_unresolved, 1);
    assert_string_equal(l.unresolved[0].name, "pair=4294967296");
    plena_labels_free(&l);
}

static void test_legacy_pairs(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("; gather pair step6_pair12_x\nC_BREAK\n"      /* 12 */
           "; vram block pair=7\nC_BREAK\n"               /* 7 */
           "; vram block step6_pair_x pair=3\nC_BREAK\n"  /* 3 */
           "; vram block step6_pair_x\nC_BREAK\n"         /* no digits: unchanged 3 */
           "; router token\nC_BREAK\n"                    /* router_topk: none */
           "; vram block STEP6_PAIR9\nC_BREAK\n"          /* case-preserved: no id, unchanged */
           "; true-zero vram rows step6_pair5\nC_BREAK\n" /* id wins over the reset */
           "; step6_pair99999999999 pair=4\nC_BREAK\n",   /* > u32: continue, then pair= */
           &l);
    static const uint64_t want[] = {12, 7, 3, 3, NONE, NONE, 5, 4};
    assert_int_equal(l.n, 8);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(PAIR(l.v[i]), want[i]);
    assert_int_equal(l.v[0].stage, S(GATHER));
    assert_int_equal(l.v[6].stage, S(ACCUMULATOR_INIT));
    assert_true(l.routed_moe_markers_present);
    plena_labels_free(&l);
}

static void test_lowering_and_presence(void **state)
{
    (void)state;
    struct plena_labels l;
    labels("; @routed_lowering=expert_major\n; @routed_lowering=pair_major\n"
           "; @routed_lowering=sideways\n; @routed_lowering=expert_major\nC_BREAK\n",
           &l);
    assert_int_equal(l.mode, PLENA_ATTR_LEGACY); /* a lowering marker is not a stage marker */
    assert_int_equal(l.lowering, PLENA_LOWERING_EXPERT_MAJOR);
    assert_int_equal(l.n_unresolved, 2);
    assert_string_equal(l.unresolved[0].name, "routed_lowering=pair_major");
    assert_int_equal(l.unresolved[0].first_line, 2);
    assert_string_equal(l.unresolved[1].name, "routed_lowering=sideways");
    assert_true(l.routed_moe_markers_present); /* "expert_major" contains "expert_" */
    plena_labels_free(&l);
    labels("; plain program\nC_BREAK\n", &l);
    assert_false(l.routed_moe_markers_present);
    assert_int_equal(l.lowering, PLENA_LOWERING_UNSET);
    plena_labels_free(&l);
    labels("S_ADDI_INT gp1, gp0, 5 ; GPT-OSS\n", &l);
    assert_true(l.routed_moe_markers_present);
    assert_int_equal(l.v[0].stage, S(OTHER)); /* trailing comments are not comment lines */
    plena_labels_free(&l);
    labels("; Sub Projection\n", &l);
    assert_true(l.routed_moe_markers_present);
    assert_int_equal(l.n, 0);
    plena_labels_free(&l);
}

/* The lowering spellings come from one table: markers and options round-trip,
 * the option list is the routed rows, and the commands' default option names
 * the default lowering. */
static void test_lowering_spellings(void **state)
{
    (void)state;
    static const struct {
        enum plena_lowering l;
        const char *marker, *option;
    } want[] = {{PLENA_LOWERING_UNSET, "none", "none"},
                {PLENA_LOWERING_PAIR_MAJOR, "pair_major", "pair-major"},
                {PLENA_LOWERING_EXPERT_MAJOR, "expert_major", "expert-major"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        enum plena_lowering l;
        assert_string_equal(plena_lowering_marker(want[i].l), want[i].marker);
        assert_string_equal(plena_lowering_option(want[i].l), want[i].option);
        assert_int_equal(plena_lowering_parse_marker(want[i].marker, &l), 0);
        assert_int_equal(l, want[i].l);
        if (want[i].l == PLENA_LOWERING_UNSET) {
            assert_int_equal(plena_lowering_parse_option("none", &l), -1); /* not a choice */
        } else {
            assert_int_equal(plena_lowering_parse_option(want[i].option, &l), 0);
            assert_int_equal(l, want[i].l);
        }
    }
    assert_string_equal(plena_lowering_options[0], "pair-major");
    assert_string_equal(plena_lowering_options[1], "expert-major");
    assert_null(plena_lowering_options[2]);
    enum plena_lowering d;
    assert_int_equal(plena_lowering_parse_option(PLENA_LOWERING_DEFAULT_OPTION, &d), 0);
    assert_int_equal(d, PLENA_LOWERING_DEFAULT);
    assert_int_equal(plena_lowering_parse_option("expert_major", &d), -1);
    assert_string_equal(plena_lowering_marker((enum plena_lowering)7), "none");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_lowering_spellings),
    cmocka_unit_test(test_markers_mode_ignores_comments),
    cmocka_unit_test(test_marker_syntax_and_pairs),
    cmocka_unit_test(test_unresolved_marker),
    cmocka_unit_test(test_many_unresolved_markers),
    cmocka_unit_test(test_legacy_rules),
    cmocka_unit_test(test_legacy_pairs),
    cmocka_unit_test(test_pair_id_u32_max),
    cmocka_unit_test(test_lowering_and_presence),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
