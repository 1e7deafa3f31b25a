/* bench/moe_costs: the cost tables of docs/lowering.md "Cost accounting" (test C1),
 * counted from emulator runs of generated programs: M_MM billed to
 * expert_projection / shared_expert_projection and H_PREFETCH_M billed to
 * expert_weight_prefetch / shared_expert_projection, for H = I = I_s = 64,
 * k = 2, at BLEN 64 and BLEN 4. Prints a table; not a test (test_gen_e2e
 * asserts the same numbers). */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "verify/verify.h"

static int row(const struct plena_settings *s, const char *preset, uint32_t T, int routed)
{
    struct plena_verify_cost_row r;
    struct plena_err err;
    plena_err_clear(&err);
    if (plena_verify_cost_row_measure(s, preset, T, routed, &r, &err)) {
        fprintf(stderr, "moe_costs: %s\n", err.msg);
        return 1;
    }
    printf("%-20s %4u %6u %8llu %12llu %6u / %-3u %8.2f%%  %s\n",
           routed ? "routed (pair-major)" : "shared (batched)", s->blen, T,
           (unsigned long long)r.m_mm, (unsigned long long)r.h_prefetch_m, r.useful_rows,
           r.tile_rows, 100.0 * r.useful_rows / r.tile_rows,
           r.predicted_equals_executed ? "predicted == executed" : "PREDICTION MISMATCH");
    return r.predicted_equals_executed ? 0 : 1;
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
