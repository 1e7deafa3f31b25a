/* Shared helpers of the emulator tests: a small hand-filled machine
 * (MLEN = VLEN = 64, BLEN 4, HLEN 16, BA 4, 256 VRAM rows, 4 MRAM tiles),
 * a program builder over plena_isa_encode, and a temp directory. Expected
 * values in the tests come from the documented semantics or hand
 * computation, never from running the emulator. */
#ifndef PLENA_EMU_TEST_UTIL_H
#define PLENA_EMU_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/test_support.h"
#include "emu/emu.h"
#include "num/num.h"

static inline void tu_settings(struct plena_settings *s)
{
    memset(s, 0, sizeof *s);
    s->dc_en = 1;
    s->max_loop_instructions = 100000;
    s->mlen = s->vlen = 64;
    s->blen = 4;
    s->hlen = 16;
    s->broadcast_amount = 4;
    s->hbm_size = 1u << 20;
    s->matrix_sram_size = 4 * 64;
    s->vector_sram_size = 256;
    s->hbm_m_prefetch_amount = 64;
    s->hbm_v_prefetch_amount = 4;
    s->hbm_v_writeback_amount = 4;
    s->fp_sram_depth = 1024;
    s->int_sram_depth = 1024;
    s->mx_mode = PLENA_MX_PLENA;
    struct plena_hbm_type mx = {PLENA_HBM_MX, 8};
    s->hbm_m_weight_type = s->hbm_m_kv_type = s->hbm_v_act_type = s->hbm_v_kv_type = mx;
}

struct tu_prog {
    uint32_t w[4096];
    size_t n;
};

static inline void tu_emit(struct tu_prog *p, enum plena_op op, unsigned rd, unsigned rs1,
                           unsigned rs2, unsigned rs3, unsigned funct1, uint32_t imm)
{
    struct plena_insn in = {(uint8_t)op,  (uint8_t)rd,     (uint8_t)rs1, (uint8_t)rs2,
                            (uint8_t)rs3, (uint8_t)funct1, imm};
    p->w[p->n++] = plena_isa_encode(&in);
}
#define R(p, op, rd, rs1, rs2)         tu_emit(p, PLENA_OP_##op, rd, rs1, rs2, 0, 0, 0)
#define RM(p, op, rd, rs1, rs2, m)     tu_emit(p, PLENA_OP_##op, rd, rs1, rs2, m, 0, 0)
#define RMF(p, op, rd, rs1, rs2, m, f) tu_emit(p, PLENA_OP_##op, rd, rs1, rs2, m, f, 0)
#define I(p, op, rd, rs1, imm)         tu_emit(p, PLENA_OP_##op, rd, rs1, 0, 0, 0, imm)
#define LI(p, rd, v)                   tu_emit(p, PLENA_OP_S_ADDI_INT, rd, 0, 0, 0, 0, v) /* v < 2^18 */

static inline struct plena_emu *tu_new(const struct plena_settings *s)
{
    struct plena_emu *e = NULL;
    struct plena_err err = {0};
    assert_int_equal(plena_emu_new(s, 0, &e, &err), 0);
    return e;
}

/* A machine with the tu_settings machine, unchanged. */
static inline struct plena_emu *tu_default(void)
{
    struct plena_settings s;
    tu_settings(&s);
    return tu_new(&s);
}

/* Runs p; returns the result (asserts the run itself happened). */
static inline struct plena_emu_result tu_run_obs(struct plena_emu *e, const struct tu_prog *p,
                                                 plena_emu_observer obs, void *ctx)
{
    struct plena_program prog;
    memset(&prog, 0, sizeof prog);
    prog.words = (uint32_t *)p->w;
    prog.n = p->n;
    struct plena_emu_result res;
    struct plena_err err = {0};
    assert_int_equal(plena_emu_run(e, &prog, obs, ctx, &res, &err), 0);
    return res;
}
static inline struct plena_emu_result tu_run(struct plena_emu *e, const struct tu_prog *p)
{
    return tu_run_obs(e, p, NULL, NULL);
}
static inline void tu_ok(struct plena_emu *e, const struct tu_prog *p)
{
    struct plena_emu_result r = tu_run(e, p);
    if (r.status != PLENA_RUN_COMPLETED) fprintf(stderr, "unexpected trap: %s\n", r.trap.detail);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
}
static inline void tu_trap(struct plena_emu *e, const struct tu_prog *p, enum plena_trap_kind k,
                           uint32_t pc)
{
    struct plena_emu_result r = tu_run(e, p);
    assert_int_equal(r.status, PLENA_RUN_TRAPPED);
    if (r.trap.kind != k)
        fprintf(stderr, "trap %s: %s\n", plena_trap_kind_name(r.trap.kind), r.trap.detail);
    assert_int_equal(r.trap.kind, k);
    assert_int_equal(r.trap.pc, pc);
}

static inline uint16_t B(float x)
{
    return plena_num_bf16_from_f32(x);
}
static inline float F(uint16_t h)
{
    return plena_num_bf16_to_f32(h);
}
static inline void tu_vset(struct plena_emu *e, uint64_t a, float x)
{
    plena_emu_vram_set(e, a, B(x));
}

/* Temp-directory helpers: thin names over common/test_support.h. */
static inline char *tu_tmpdir(void)
{
    char *d = malloc(64);
    assert_int_equal(plena_test_mkdtemp(d, 64, "emu_test"), 0);
    return d;
}
static inline void tu_write(const char *dir, const char *name, const void *data, size_t n,
                            char *path_out)
{
    plena_test_write_file(dir, name, data, n);
    plena_test_path(path_out, 512, dir, name);
}
/* Whole file dir/name (free with free(): plena_free is free). */
static inline uint8_t *tu_read(const char *dir, const char *name, size_t *n)
{
    uint8_t *buf = (uint8_t *)plena_test_read_file(dir, name, n);
    assert_non_null(buf);
    return buf;
}
static inline void tu_rmrf(const char *dir)
{
    assert_int_equal(plena_test_rmtree(dir), 0);
}

#endif
