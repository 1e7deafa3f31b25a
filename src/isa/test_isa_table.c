/* The opcode table treated as data (STYLE: Spike's overlap test): codes are
 * unique and in order, every class places its fields without overlap, and
 * encode/decode round-trip every row with extreme field values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "isa/isa.h"
#include "isa/stages.h"
#include "common/test_support.h"

static void test_codes_unique_and_named(void **state)
{
    (void)state;
    int seen[64] = {0};
    for (unsigned op = 0; op < PLENA_OP_COUNT; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        assert_int_equal(r->code, op);
        assert_non_null(r->name);
        seen[op]++;
        if (r->valid) assert_int_equal(plena_isa_lookup(r->name, (unsigned)strlen(r->name)), op);
    }
    for (unsigned op = 0; op < PLENA_OP_COUNT; op++)
        assert_int_equal(seen[op], 1);
    assert_int_equal(PLENA_OP_COUNT, 0x3A);
    for (unsigned op = 0x3A; op < 64; op++)
        assert_false(plena_isa_info(op)->valid);
    assert_false(plena_isa_info(0x00)->valid);
    assert_false(plena_isa_info(0x31)->valid);
    assert_false(plena_isa_info(0x33)->valid);
    assert_int_equal(plena_isa_lookup("V_PS_V", 6), -1);
}

static void test_roundtrip_extreme_fields(void **state)
{
    (void)state;
    for (unsigned op = 0; op < PLENA_OP_COUNT; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        if (!r->valid) continue;
        for (int v = 0; v < 2; v++) {
            struct plena_insn in = {0};
            in.op = (uint8_t)op;
            uint8_t f = v ? 15 : 0;
            switch (r->cls) {
            case PLENA_CLASS_R: in.rd = in.rs1 = in.rs2 = in.rs3 = in.funct1 = f; break;
            case PLENA_CLASS_I18:
                in.rd = in.rs1 = f;
                in.imm = v ? PLENA_IMM18_MAX : 0;
                break;
            case PLENA_CLASS_I22:
                in.rd = f;
                in.imm = v ? PLENA_IMM22_MAX : 0;
                break;
            case PLENA_CLASS_D: in.rd = f; break;
            default: break;
            }
            uint32_t w = plena_isa_encode(&in);
            struct plena_insn out;
            plena_isa_decode(w, &out);
            assert_int_equal(out.op, in.op);
            assert_int_equal(plena_isa_encode(&out), w);
            if (r->cls != PLENA_CLASS_N) assert_int_equal(out.rd, in.rd);
            if (r->cls == PLENA_CLASS_I18 || r->cls == PLENA_CLASS_I22)
                assert_int_equal(out.imm, in.imm);
        }
    }
}

static void test_spec_worked_encodings(void **state)
{
    (void)state;
    /* Worked encodings (docs/machine.md "Instruction word"), built from fields
     * (the assembler test checks the text). */
    struct plena_insn in = {.op = PLENA_OP_S_ADDI_INT, .rd = 1, .rs1 = 0, .imm = 5};
    assert_int_equal(plena_isa_encode(&in), 0x00014062);
    struct plena_insn lui = {.op = PLENA_OP_S_LUI_INT, .rd = 2, .imm = 8};
    assert_int_equal(plena_isa_encode(&lui), 0x000020A5);
    struct plena_insn h = {.op = PLENA_OP_H_PREFETCH_M, .rd = 8, .rs1 = 6, .rs2 = 0, .rs3 = 1};
    assert_int_equal(plena_isa_encode(&h), 0x00041A28);
    struct plena_insn t = {.op = PLENA_OP_C_SET_TOPK_REG, .rd = 4};
    assert_int_equal(plena_isa_encode(&t), 0x00000138);
    struct plena_insn d;
    plena_isa_decode(0x00041A28, &d);
    assert_int_equal(d.op, PLENA_OP_H_PREFETCH_M);
    assert_int_equal(d.rd, 8);
    assert_int_equal(d.rs1, 6);
    assert_int_equal(d.rs2, 0);
    assert_int_equal(d.rs3, 1);
    assert_int_equal(d.funct1, 0);
}

/* The vocabulary in stages.def order, read from stages.def itself (its one
 * source); the count and the ends are typed in here from docs/profile.md, and
 * test_stage_columns checks every name against that document's lists. */
static const char *const stage_names[] = {
#define PLENA_STAGE(id, name, branch, tax, scope, meaning) name,
#include "isa/stages.def"
#undef PLENA_STAGE
};

static void test_stage_table(void **state)
{
    (void)state;
    assert_int_equal(PLENA_STAGE_COUNT, 15);
    assert_int_equal(PLENA_TEST_COUNT(stage_names), PLENA_STAGE_COUNT);
    assert_string_equal(stage_names[0], "router_topk");
    assert_string_equal(stage_names[PLENA_STAGE_COUNT - 1], "other");
    for (int i = 0; i < PLENA_STAGE_COUNT; i++) {
        assert_string_equal(plena_stage_name((enum plena_stage)i), stage_names[i]);
        assert_int_equal(plena_stage_lookup(stage_names[i], (unsigned)strlen(stage_names[i])), i);
        for (int j = 0; j < i; j++)
            assert_true(strcmp(plena_stage_name((enum plena_stage)i),
                               plena_stage_name((enum plena_stage)j)) != 0);
    }
    assert_int_equal(plena_stage_lookup("expert_bais", 11), -1);
}

/* Class and unit vocabularies (columns.def) as data: the names, the fields
 * each class places (checked by encoding one field at a time) and the
 * resource class each unit bills to (docs/profile.md "Accumulator"). */
static void test_class_and_unit_tables(void **state)
{
    (void)state;
    static const char *const classes[] = {"R", "I18", "I22", "D", "N", "INV"};
    assert_int_equal(PLENA_CLASS_COUNT, 6);
    static const struct {
        const char *name;
        unsigned pos;
    } fields[] = {{"rd", PLENA_POS_RD},         {"rs1", PLENA_POS_RS1},
                  {"rs2", PLENA_POS_RS2},       {"rs3", PLENA_POS_RS3},
                  {"funct1", PLENA_POS_FUNCT1}, {"imm18", PLENA_POS_IMM18},
                  {"imm22", PLENA_POS_IMM22}};
    for (int c = 0; c < PLENA_CLASS_COUNT; c++) {
        assert_string_equal(plena_class_name((enum plena_class)c), classes[c]);
        if (c == PLENA_CLASS_INV) continue;
        unsigned op = 0;
        while (op < PLENA_OP_COUNT &&
               (!plena_isa_info(op)->valid || (int)plena_isa_info(op)->cls != c))
            op++;
        assert_true(op < PLENA_OP_COUNT); /* every class has an opcode */
        char placed[64] = "";
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            struct plena_insn in = {.op = (uint8_t)op};
            switch (f) {
            case 0: in.rd = 1; break;
            case 1: in.rs1 = 1; break;
            case 2: in.rs2 = 1; break;
            case 3: in.rs3 = 1; break;
            case 4: in.funct1 = 1; break;
            default: in.imm = 1; break;
            }
            if ((plena_isa_encode(&in) >> PLENA_SIZE_OPCODE) ==
                1u << (fields[f].pos - PLENA_SIZE_OPCODE)) {
                if (placed[0]) strcat(placed, " ");
                strcat(placed, fields[f].name);
            }
        }
        assert_string_equal(placed[0] ? placed : "none", plena_class_fields((enum plena_class)c));
    }
    static const char *const units[] = {"matrix", "vector", "scalar", "dma", "control", "none"};
    static const enum plena_resource bills[] = {PLENA_RESOURCE_MATRIX, PLENA_RESOURCE_VECTOR,
                                                PLENA_RESOURCE_SCALAR, PLENA_RESOURCE_DMA,
                                                PLENA_RESOURCE_SCALAR, PLENA_RESOURCE_OTHER};
    assert_int_equal(PLENA_UNIT_COUNT, 6);
    for (int u = 0; u < PLENA_UNIT_COUNT; u++) {
        assert_string_equal(plena_unit_name((enum plena_unit)u), units[u]);
        assert_int_equal(plena_unit_resource((enum plena_unit)u), bills[u]);
    }
    static const char *const res[] = {"matrix", "vector", "scalar", "dma", "other"};
    assert_int_equal(PLENA_RESOURCE_COUNT, 5);
    for (int r = 0; r < PLENA_RESOURCE_COUNT; r++)
        assert_string_equal(plena_resource_name((enum plena_resource)r), res[r]);
    assert_int_equal(plena_resource_of(PLENA_OP_C_LOOP_END), PLENA_RESOURCE_SCALAR);
    assert_int_equal(plena_resource_of(0x3F), PLENA_RESOURCE_OTHER);
}

/* The READS/WRITES/FLOW columns as data: facts of docs/machine.md that any
 * correct row set satisfies, so a wrongly marked opcode fails here. */
static int popcount(unsigned x)
{
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
}

static void test_state_columns(void **state)
{
    (void)state;
    const unsigned ACC = PLENA_MASK_ACCUMULATORS;
    const unsigned REGS =
        PLENA_MASK_AREG | PLENA_MASK_SCALE | PLENA_MASK_STRIDE | PLENA_MASK_VMASK | PLENA_MASK_TOPK;
    assert_int_equal(PLENA_STATE_SET(), 0);
    assert_int_equal(PLENA_STATE_SET(GP, LOOP), PLENA_MASK_GP | PLENA_MASK_LOOP);
    for (unsigned op = 0; op < 64; op++) {
        const struct plena_op_info *r = plena_isa_info(op);
        unsigned touch = r->reads | r->writes;
        assert_true(touch < (1u << PLENA_STATE_COUNT));
        if (!r->valid) { /* invalid rows trap before touching anything */
            assert_int_equal(touch, 0);
            assert_int_equal(r->flow, PLENA_FLOW_TRAP);
            continue;
        }
        assert_int_not_equal(r->flow, PLENA_FLOW_TRAP);
        assert_int_not_equal(r->writes, 0); /* every instruction has an effect */
        const char *n = r->name;
        int is_m = n[0] == 'M', is_v = n[0] == 'V', is_h = n[0] == 'H', is_c = n[0] == 'C';
        /* M_*: exactly one accumulator, read and written (+= or write-out
         * and clear); nothing else has one. */
        assert_int_equal(is_m, (touch & ACC) != 0);
        if (is_m) {
            assert_int_equal(popcount(touch & ACC), 1);
            assert_int_equal(r->reads & ACC, r->writes & ACC);
            /* compute ops read both SRAMs; write-outs write VRAM instead */
            int wo = strstr(n, "_WO") != NULL;
            assert_int_equal(r->reads & (PLENA_MASK_MRAM | PLENA_MASK_VRAM),
                             wo ? 0 : PLENA_MASK_MRAM | PLENA_MASK_VRAM);
            assert_int_equal((r->writes & PLENA_MASK_VRAM) != 0, wo);
        }
        /* H_*: HBM (read by prefetches, written by the store), unit DMA;
         * nothing else touches HBM. */
        assert_int_equal(is_h, (touch & PLENA_MASK_HBM) != 0);
        assert_int_equal(is_h, r->unit == PLENA_UNIT_DMA);
        if (is_h) assert_int_equal((r->writes & PLENA_MASK_HBM) != 0, !strcmp(n, "H_STORE_V"));
        /* V_*: every vector op reads VRAM */
        if (is_v) assert_true(r->reads & PLENA_MASK_VRAM);
        /* MRAM: written only by H_PREFETCH_M, read only by M_* */
        assert_int_equal((r->writes & PLENA_MASK_MRAM) != 0, !strcmp(n, "H_PREFETCH_M"));
        if (r->reads & PLENA_MASK_MRAM) assert_true(is_m);
        /* C_SET_*_REG writes exactly its register from gp; the loop stack is C_* only */
        if (!strncmp(n, "C_SET_", 6)) {
            assert_int_equal(r->reads, PLENA_MASK_GP);
            assert_int_equal(popcount(r->writes), 1);
            assert_true(r->writes & REGS);
        } else {
            assert_int_equal(r->writes & REGS, 0);
        }
        if (touch & PLENA_MASK_LOOP) assert_true(is_c);
        /* the assembler's gp0 warning (a synopsis assigning G[rd]) implies a gp write */
        if (!strncmp(r->synopsis, "G[rd] =", 7) || !strncmp(r->synopsis, "decrement G[rd]", 15))
            assert_true(r->writes & PLENA_MASK_GP);
        /* floating-point scalar ops touch only fp registers and FP SRAM */
        if (!strncmp(n, "S_", 2) && strstr(n, "_FP") && strcmp(n, "S_MAP_V_FP"))
            assert_int_equal(touch & ~(PLENA_MASK_FP | PLENA_MASK_FPSRAM | PLENA_MASK_GP), 0);
        /* control flow: only the loop end and the break leave pc + 1 */
        enum plena_flow want = !strcmp(n, "C_LOOP_END") ? PLENA_FLOW_BACK
                               : !strcmp(n, "C_BREAK")  ? PLENA_FLOW_EXIT
                                                        : PLENA_FLOW_SEQ;
        assert_int_equal(r->flow, want);
    }
    assert_string_equal(plena_state_name(PLENA_STATE_MACC), "m_acc");
    assert_string_equal(plena_flow_name(PLENA_FLOW_EXIT), "exit");
}

/* The stage columns against lists typed in here from docs/profile.md, as
 * data: the branches of "Shared-vs-routed split", the routing tax of "Routing
 * tax", the pair-sticky stages and the two stages that end a pair in legacy
 * mode ("Stage attribution") and the expert_* stages of "Routed lowering". */
static int in_list(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(name, *list)) return 1;
    return 0;
}

static void test_stage_columns(void **state)
{
    (void)state;
    static const char *const routed[] = {
        "router_topk",       "expert_weight_address", "expert_weight_prefetch", "expert_projection",
        "expert_activation", "expert_bias",           "expert_route_weight",    NULL};
    static const char *const shared[] = {"shared_expert_projection", "shared_expert_activation",
                                         "shared_expert_gate", NULL};
    static const char *const combine[] = {"accumulator_init", "gather", "scatter_combine", NULL};
    static const char *const residual[] = {"residual_setup", NULL};
    static const char *const tax[] = {"accumulator_init",      "gather",
                                      "expert_weight_address", "expert_route_weight",
                                      "scatter_combine",       NULL};
    static const char *const sticky[] = {"gather",
                                         "expert_weight_address",
                                         "expert_weight_prefetch",
                                         "expert_projection",
                                         "expert_activation",
                                         "expert_bias",
                                         "expert_route_weight",
                                         "scatter_combine",
                                         NULL};
    static const char *const legacy_reset[] = {"router_topk", "accumulator_init", NULL};
    for (int i = 0; i < PLENA_STAGE_COUNT; i++) {
        enum plena_stage s = (enum plena_stage)i;
        const char *n = plena_stage_name(s);
        enum plena_stage_branch want = in_list(n, routed)     ? PLENA_BRANCH_ROUTED
                                       : in_list(n, shared)   ? PLENA_BRANCH_SHARED
                                       : in_list(n, combine)  ? PLENA_BRANCH_COMBINE
                                       : in_list(n, residual) ? PLENA_BRANCH_RESIDUAL
                                                              : PLENA_BRANCH_OTHER;
        assert_int_equal(plena_stage_branch(s), want);
        assert_int_equal(plena_stage_is_routing_tax(s), in_list(n, tax));
        assert_int_equal(plena_stage_scope(s) == PLENA_SCOPE_PAIR, in_list(n, sticky));
        assert_int_equal(plena_stage_scope(s) == PLENA_SCOPE_SETUP, in_list(n, legacy_reset));
        assert_int_equal(plena_stage_is_routed_expert(s), !strncmp(n, "expert_", 7));
    }
    assert_int_equal(plena_stage_branch(PLENA_STAGE_OTHER), PLENA_BRANCH_OTHER);
    assert_int_equal(plena_stage_branch(PLENA_STAGE_COUNT), PLENA_BRANCH_OTHER);
    assert_false(plena_stage_is_routing_tax(PLENA_STAGE_COUNT));
    assert_int_equal(plena_stage_scope(PLENA_STAGE_COUNT), PLENA_SCOPE_NONE);
    static const char *const branch_names[] = {"routed", "shared", "combine", "residual", "other"};
    assert_int_equal(PLENA_BRANCH_COUNT, 5);
    for (int b = 0; b < PLENA_BRANCH_COUNT; b++)
        assert_string_equal(plena_stage_branch_name((enum plena_stage_branch)b), branch_names[b]);
}

static void test_latency_keys(void **state)
{
    (void)state;
    assert_int_equal(PLENA_LAT_COUNT, 15);
    assert_string_equal(plena_latency_name(PLENA_LAT_VECTOR_SUM_CYCLES), "VECTOR_SUM_CYCLES");
    assert_int_equal(plena_latency_reference(PLENA_LAT_VECTOR_SUM_CYCLES, 0), 20);
    assert_int_equal(plena_cost_latency(plena_isa_info(PLENA_OP_V_ADD_VV)->cost),
                     PLENA_LAT_VECTOR_ADD_CYCLES);
    assert_int_equal(plena_cost_latency(PLENA_COST_FIXED1), -1);
}

static const struct CMUnitTest tests[] = {
    /* isa.def: codes and encodings */
    cmocka_unit_test(test_codes_unique_and_named),
    cmocka_unit_test(test_roundtrip_extreme_fields),
    cmocka_unit_test(test_spec_worked_encodings),
    /* columns.def, stages.def and the latency keys */
    cmocka_unit_test(test_class_and_unit_tables),
    cmocka_unit_test(test_state_columns),
    cmocka_unit_test(test_stage_table),
    cmocka_unit_test(test_stage_columns),
    cmocka_unit_test(test_latency_keys),
};

int main(void)
{
    return plena_test_main(tests, PLENA_TEST_COUNT(tests), NULL, NULL);
}
