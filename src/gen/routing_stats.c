/* Routing statistics of one layer call (moe.h plena_moe_routing_stats;
 * docs/profile.md "routing_stats"): the expert counts come from the ids, the
 * lowering figures from the lowering's own rules, so the profile, replay
 * results and `plena moe` report what the generated program issues. Tests
 * check the figures against the machine's counters (test_expert_major.c). */
#include <string.h>

#include "common/alloc.h"
#include "gen/emit.h"
#include "gen/moe.h"
#include "gen/route_plan.h"

/* 64-byte HBM blocks a run of n bytes from addr touches (docs/timing.md
 * "HBM": every prefetch row issues its element run, then its scale run, one
 * transaction per touched block). */
static uint64_t blocks(uint64_t addr, uint64_t n)
{
    return n ? (addr + n + 63) / 64 - addr / 64 : 0;
}

uint64_t plena_moe_prefetch_bytes(uint64_t base, uint32_t K_p, uint32_t N_p, uint32_t mlen,
                                  uint32_t mx_block)
{
    const uint64_t scale = base + (uint64_t)K_p * N_p; /* SCALE = K_p x N_p */
    uint64_t n = 0;
    for (uint64_t r = 0; r < K_p; r++)                /* every row of every K tile */
        for (uint64_t c0 = 0; c0 < N_p; c0 += mlen) { /* of every column block */
            const uint64_t off = r * N_p + c0;
            n += blocks(base + off, mlen) + blocks(scale + off / mx_block, mlen / mx_block);
        }
    return 64 * n;
}

/* Expert-major: per token block, each expert's pairs in BLEN-row tiles and
 * its weights once per segment (segments split after max_tiles tiles, the
 * rule of the host plan and of the device count table). */
static int expert_major_figures(const struct plena_moe_cfg *cfg, uint32_t T,
                                const struct plena_moe_map *mp, const uint32_t *ids,
                                struct plena_routing_stats *st, struct plena_err *err)
{
    const uint32_t E = cfg->E, k = cfg->k, B = cfg->m.blen;
    const uint32_t MT = mp->em_max_tiles ? mp->em_max_tiles : 1;
    uint32_t *n = plena_calloc(E, sizeof *n);
    if (!n) return PLENA_FAIL(err, PLENA_E_NOMEM, "routing stats", "out of memory");
    for (uint32_t r0 = 0; r0 < T; r0 += mp->t_blk) {
        const uint32_t r1 = T - r0 < mp->t_blk ? T : r0 + mp->t_blk;
        memset(n, 0, E * sizeof *n);
        for (size_t p = (size_t)r0 * k; p < (size_t)r1 * k; p++)
            n[ids[p]]++;
        for (uint32_t e = 0; e < E; e++) {
            if (!n[e]) continue;
            const uint32_t tiles = gen_cdiv(n[e], B);
            st->routed_rows_issued += (uint64_t)tiles * B;
            st->weight_bytes_fetched += (uint64_t)gen_cdiv(tiles, MT) * mp->expert_weight_bytes;
        }
    }
    plena_free(n);
    return 0;
}

int plena_moe_routing_stats(const struct plena_moe_cfg *cfg, uint32_t T,
                            const struct plena_moe_emit_info *info, const uint32_t *ids,
                            struct plena_routing_stats *st, struct plena_err *err)
{
    memset(st, 0, sizeof *st);
    st->shared_row_utilisation = -1.0;
    if (cfg->routing == PLENA_ROUTING_NONE || !ids || T == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, "routing stats",
                          "needs a routed layer, its ids and T > 0");
    const struct plena_moe_map *mp = &info->map;
    const uint64_t P = (uint64_t)T * cfg->k;
    const uint32_t B = cfg->m.blen;
    int rc = plena_routing_counts(ids, (size_t)P, cfg->E, st, err);
    if (rc) return rc;
    st->lowering = (int)info->routed_lowering;
    st->routed_rows_useful = P;
    if (info->routed_lowering == PLENA_LOWERING_EXPERT_MAJOR) {
        if ((rc = expert_major_figures(cfg, T, mp, ids, st, err))) return rc;
    } else { /* pair-major: one BLEN-row tile and one weight fetch per pair */
        st->routed_rows_issued = P * B;
        st->weight_bytes_fetched = P * mp->expert_weight_bytes;
    }
    st->padding_rows = st->routed_rows_issued - st->routed_rows_useful;
    st->row_utilisation = st->routed_rows_issued
                              ? (double)st->routed_rows_useful / (double)st->routed_rows_issued
                              : 0.0;
    st->weight_bytes_ideal = (uint64_t)st->active_experts * mp->expert_weight_bytes;
    if (cfg->Is) { /* the shared branch runs each block's rows in BLEN-row tiles */
        uint64_t issued = 0;
        for (uint32_t r0 = 0; r0 < T; r0 += mp->t_blk)
            issued += gen_rup(T - r0 < mp->t_blk ? T - r0 : mp->t_blk, B);
        st->shared_row_utilisation = (double)T / (double)issued;
    }
    st->valid = 1;
    return 0;
}
