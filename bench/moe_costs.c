/* bench/moe_costs: the cost tables of spec/moe-lowering.md 8.2 (test C1),
 * counted from emulator runs of generated programs: M_MM billed to
 * expert_projection / shared_expert_projection and H_PREFETCH_M billed to
 * expert_weight_prefetch / shared_expert_projection, for H = I = I_s = 64,
 * k = 2, at BLEN 64 and BLEN 4. Prints a table; not a test (test_gen_e2e
 * asserts the same numbers). */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "gen/check.h"

static int row(const struct plena_settings *s, const char *preset, uint32_t T, int routed)
{
    struct plena_gen_machine m;
    plena_gen_machine_from_settings(s, &m);
    struct plena_moe_build_opts o;
    plena_moe_build_opts_init(&o, plena_gen_preset_find(preset), &m, T);
    o.weights = PLENA_MOE_WEIGHTS_ZERO;
    o.cfg.residual = PLENA_RESIDUAL_NONE;
    uint32_t ids[128];
    float w[128];
    if (routed) {
        plena_moe_routing_balanced(T, o.cfg.E, o.cfg.k, ids, w);
        o.fixed_ids = ids;
        o.fixed_w = w;
    }
    struct plena_moe_build b;
    struct plena_moe_device d;
    struct plena_err err;
    plena_err_clear(&err);
    if (plena_moe_build_run(&o, &b, &err) || plena_moe_emulate(&b, s, NULL, &d, &err)) {
        fprintf(stderr, "moe_costs: %s\n", err.msg);
        plena_moe_build_free(&b);
        return 1;
    }
    static uint64_t c[PLENA_STAGE_COUNT][64];
    plena_moe_count_stage_op(&b, d.pc_count, c);
    uint64_t mm = c[PLENA_STAGE_EXPERT_PROJECTION][PLENA_OP_M_MM] +
                  c[PLENA_STAGE_SHARED_EXPERT_PROJECTION][PLENA_OP_M_MM];
    uint64_t pf = c[PLENA_STAGE_EXPERT_WEIGHT_PREFETCH][PLENA_OP_H_PREFETCH_M] +
                  c[PLENA_STAGE_SHARED_EXPERT_PROJECTION][PLENA_OP_H_PREFETCH_M];
    uint32_t B = s->blen, useful = routed ? 1 : T, tile = B * ((useful + B - 1) / B);
    int same = 1;
    for (int op = 0; op < 64; op++)
        if (d.op_count[op] != b.info.dyn_op[op]) same = 0;
    printf("%-20s %4u %6u %8llu %12llu %6u / %-3u %8.2f%%  %s\n",
           routed ? "routed (pair-major)" : "shared (batched)", B, T, (unsigned long long)mm,
           (unsigned long long)pf, useful, tile, 100.0 * useful / tile,
           same ? "predicted == executed" : "PREDICTION MISMATCH");
    plena_moe_device_free(&d);
    plena_moe_build_free(&b);
    return same ? 0 : 1;
}

int main(void)
{
    static const uint32_t routed_T[] = {1, 4, 16, 64}, shared_T[] = {1, 4, 8, 16, 64};
    static const uint32_t blens[] = {64, 4};
    int rc = 0;
    printf("%-20s %4s %6s %8s %12s %12s %9s\n", "lowering", "BLEN", "tokens", "M_MM",
           "H_PREFETCH_M", "rows/tile", "util");
    for (int bi = 0; bi < 2; bi++) {
        struct plena_settings s;
        plena_settings_reference(&s);
        s.blen = blens[bi];
        s.vector_sram_size = 16384;
        for (int i = 0; i < 4; i++)
            rc |= row(&s, "tiny-fixed", routed_T[i], 1);
        for (int i = 0; i < 5; i++)
            rc |= row(&s, "tiny-ds-shared", shared_T[i], 0);
    }
    return rc;
}
