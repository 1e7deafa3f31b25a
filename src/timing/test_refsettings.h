/* Test data shared by test_timing.c and test_hbm.c: the reference settings of
 * docs/timing.md (latency table of "Per-instruction costs", HBM defaults of
 * "HBM model", gate CONFIG of "Timing gates"), typed in by hand so the timing
 * tests do not depend on the settings loader. */
#ifndef PLENA_TIMING_TEST_REFSETTINGS_H
#define PLENA_TIMING_TEST_REFSETTINGS_H

#include <string.h>

#include "timing/timing.h"

/* latency table, in costs.def order: {dc_lib_en, dc_lib_dis} */
static const uint32_t ref_latency[PLENA_LAT_COUNT][2] = {
    {0, 0},  /* SYSTOLIC_PROCESSING_OVERHEAD */
    {1, 2},  /* VECTOR_ADD_CYCLES */
    {1, 5},  /* VECTOR_MUL_CYCLES */
    {1, 6},  /* VECTOR_EXP_CYCLES */
    {2, 7},  /* VECTOR_RECI_CYCLES */
    {4, 4},  /* VECTOR_MAX_CYCLES */
    {8, 20}, /* VECTOR_SUM_CYCLES */
    {9, 9},  /* VECTOR_PREFIX_SCAN_CYCLES */
    {1, 1},  /* VECTOR_SHIFT_CYCLES */
    {4, 4},  /* SCALAR_FP_LONGEST_OPERATE_CYCLES */
    {1, 1},  /* SCALAR_FP_BASIC_CYCLES */
    {1, 2},  /* SCALAR_FP_EXP_CYCLES */
    {1, 2},  /* SCALAR_FP_SQRT_CYCLES */
    {1, 2},  /* SCALAR_FP_RECI_CYCLES */
    {1, 1},  /* SCALAR_INT_BASIC_CYCLES */
};

static inline void ref_hbm_params(struct plena_hbm_params *h)
{
    memset(h, 0, sizeof *h);
    h->model = PLENA_HBM_MODEL_HBM2;
    h->tck_ps = 1000;
    h->channels = 8;
    h->pseudo_channels = 2;
    h->bank_groups = 4;
    h->banks_per_group = 4;
    h->row_bytes = 1024;
    h->address_hash_bit = 16;
    h->row_idle_close = 64;
    h->nBL = 4;
    h->nCL = 7;
    h->nCWL = 2;
    h->nRCD = 7;
    h->nRP = 7;
    h->nRAS = 17;
    h->nRC = 19;
    h->nRTP = 2;
    h->nWR = 8;
    h->nWTR = 4;
    h->nRRDS = 2;
    h->nRRDL = 3;
    h->nFAW = 15;
    h->nREFI = 3900;
    h->nRFC = 350;
}

static inline void ref_settings(struct plena_settings *s, int dc_en)
{
    memset(s, 0, sizeof *s);
    s->dc_en = dc_en;
    s->max_loop_instructions = 100000;
    s->blen = 4;
    s->hlen = 16;
    s->mlen = 64;
    s->vlen = 64;
    s->broadcast_amount = 4;
    s->hbm_size = 1048576;
    s->matrix_sram_size = 4096;
    s->vector_sram_size = 8192;
    s->hbm_m_prefetch_amount = 64;
    s->hbm_v_prefetch_amount = 4;
    s->hbm_v_writeback_amount = 4;
    s->clock_period_ps = 1000;
    for (int k = 0; k < PLENA_LAT_COUNT; k++) {
        s->latency_en[k] = ref_latency[k][0];
        s->latency_dis[k] = ref_latency[k][1];
        s->latency[k] = dc_en ? ref_latency[k][0] : ref_latency[k][1];
    }
    ref_hbm_params(&s->hbm);
}

#endif
