/* libFuzzer target: random machine code on the emulator with small
 * memories (MLEN = VLEN = 16, 256 VRAM rows, 1 MiB HBM), run twice: on the
 * host's fast kernels with the timing model observing, and on the scalar
 * reference code paths (ref_paths); the two machines must agree bit for bit
 * (result, trap, registers, accumulator, VRAM, FP and INT SRAM). Hardware
 * loop counts are cut to 1..2 so that a random program stays short. */
#include <math.h>

#include "fuzz_util.h"

#include "emu/emu.h"
#include "emu/emu_internal.h"
#include "settings/settings.h"
#include "timing/timing.h"

static void machine(struct plena_settings *s)
{
    plena_settings_reference(s);
    s->mlen = s->vlen = 16;
    s->blen = 4;
    s->hlen = 4;
    s->broadcast_amount = 4;
    s->hbm_size = 1u << 20;
    s->matrix_sram_size = 4 * 16;
    s->vector_sram_size = 256;
    s->hbm_m_prefetch_amount = 16;
    s->fp_sram_depth = 256;
    s->int_sram_depth = 256;
}

static void observe(void *ctx, const struct plena_emu_event *ev)
{
    plena_timing_account(ctx, ev);
}

static int same_f32(float a, float b)
{
    return !memcmp(&a, &b, sizeof a) || (isnan(a) && isnan(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size / 4;
    if (n == 0 || n > 512) return 0;
    uint32_t *w = malloc(n * sizeof *w);
    if (!w) abort();
    for (size_t i = 0; i < n; i++) {
        memcpy(&w[i], data + 4 * i, 4);
        if ((w[i] & 63) == PLENA_OP_C_LOOP_START) /* imm22 [31:10] := 1 or 2 */
            w[i] = (w[i] & 0x3FFu) | ((((w[i] >> 10) & 1u) + 1u) << 10);
    }
    struct plena_settings s;
    machine(&s);
    struct plena_emu *fast = NULL, *ref = NULL;
    struct plena_timing *t = NULL;
    struct plena_err err = {0};
    if (plena_emu_new(&s, 0, &fast, &err) || plena_emu_new(&s, 0, &ref, &err) ||
        plena_timing_new(&s, &t, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    ref->ref_paths = 1;
    struct plena_program p;
    memset(&p, 0, sizeof p);
    p.words = w;
    p.n = n;
    struct plena_emu_result ra, rb;
    int ca = plena_emu_run(fast, &p, observe, t, &ra, &err);
    plena_err_clear(&err);
    int cb = plena_emu_run(ref, &p, NULL, NULL, &rb, &err);
    plena_timing_status(t, &err);
    if (ca != cb) abort();
    if (!ca) {
        if (ra.status != rb.status || ra.instructions_executed != rb.instructions_executed ||
            ra.trap.kind != rb.trap.kind || ra.trap.pc != rb.trap.pc)
            abort();
        if (memcmp(fast->g, ref->g, sizeof fast->g) || memcmp(fast->f, ref->f, 8 * 2) ||
            memcmp(fast->a, ref->a, sizeof fast->a))
            abort();
        for (uint32_t i = 0; i < s.blen * s.blen; i++)
            if (!same_f32(fast->m_acc[i], ref->m_acc[i])) abort();
        for (uint64_t i = 0; i < s.vector_sram_size * s.vlen; i++)
            if (plena_emu_vram_get(fast, i) != plena_emu_vram_get(ref, i)) abort();
        if (memcmp(fast->fpsram, ref->fpsram, s.fp_sram_depth * 2) ||
            memcmp(fast->intsram, ref->intsram, s.int_sram_depth * 4))
            abort();
    }
    plena_timing_free(t);
    plena_emu_free(fast);
    plena_emu_free(ref);
    free(w);
    return 0;
}
