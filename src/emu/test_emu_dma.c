/* HBM DMA and its transaction order (docs/machine.md "HBM DMA"), preload
 * loaders and dumps (docs/formats.md "HBM image",
 * "SRAM and VRAM preload images" and "Dumps"), loops
 * (docs/machine.md "Hardware loops"), the remaining trap kinds and the trap
 * line (docs/machine.md "Traps" and "After a trap"), events and determinism.
 * Expected bytes are worked examples computed by hand, not by the code. */
#include "emu/test_util.h"
#include "common/alloc.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

struct txn_log {
    struct plena_hbm_txn t[4096];
    size_t n;
    size_t events;
    struct plena_emu_event last;
};

static void log_obs(void *ctx, const struct plena_emu_event *ev)
{
    struct txn_log *l = ctx;
    l->events++;
    l->last = *ev;
    for (size_t i = 0; i < ev->n_txn && l->n < 4096; i++)
        l->t[l->n++] = ev->txn[i];
}

/* Sets A[areg] = addr (< 2^18), SCALE, STRIDE. */
static void dma_regs(struct tu_prog *p, unsigned areg, uint32_t addr, uint32_t scale,
                     uint32_t stride)
{
    LI(p, 10, addr);
    R(p, C_SET_ADDR_REG, areg, 0, 10);
    LI(p, 10, scale & 0x3FFFF);
    if (scale >= (1u << 18)) {
        I(p, S_LUI_INT, 10, 0, scale >> 12);
        I(p, S_ADDI_INT, 10, 10, scale & 0xFFF);
    }
    R(p, C_SET_SCALE_REG, 10, 0, 0);
    LI(p, 10, stride);
    R(p, C_SET_STRIDE_REG, 10, 0, 0);
}

static void test_g2_prefetch_list(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 0, 0, 65536, 64);
    LI(&p, 1, 0);
    LI(&p, 2, 0);
    RM(&p, H_PREFETCH_V, 1, 2, 0, 1);
    struct txn_log *log = calloc(1, sizeof *log);
    struct plena_emu_result r = tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    const uint64_t want[] = {0, 65536, 64, 65536, 128, 65536, 192, 65536};
    assert_int_equal(log->n, 8);
    for (unsigned i = 0; i < 8; i++) {
        assert_int_equal(log->t[i].addr, want[i]);
        assert_int_equal(log->t[i].is_write, 0);
    }
    assert_int_equal(log->events, p.n);
    assert_int_equal(r.instructions_executed, p.n);
    free(log);
    plena_emu_free(e);
}

/* H_STORE_V of rows 0..3 (row 0 starts with row A) gives a 320-byte
 * hbm_dump.bin (docs/formats.md "Dumps"); events carry read/write pairs per
 * block. */
static void test_store_dump_320(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    const float rowA[8] = {1, 2, 3, 4, 0.5f, -1, 0, 6};
    for (unsigned i = 0; i < 8; i++)
        tu_vset(e, i, rowA[i]);
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 0, 0, 256, 1);
    LI(&p, 1, 0);
    LI(&p, 2, 0);
    RM(&p, H_STORE_V, 1, 2, 0, 0);
    struct txn_log *log = calloc(1, sizeof *log);
    struct plena_emu_result r = tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    const uint64_t blocks[] = {0, 256, 64, 256, 128, 256, 192, 256};
    assert_int_equal(log->n, 16);
    for (unsigned i = 0; i < 16; i++) {
        assert_int_equal(log->t[i].addr, blocks[i / 2]);
        assert_int_equal(log->t[i].is_write, i % 2);
    }
    char *dir = tu_tmpdir();
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_HBM, NULL), 0);
    size_t n;
    uint8_t *h = tu_read(dir, "hbm_dump.bin", &n);
    assert_int_equal(n, 320);
    uint8_t want[320] = {0x28, 0x30, 0x34, 0x38, 0x20, 0xA8, 0x00, 0x3C};
    want[256] = 0x81;
    assert_memory_equal(h, want, 320);
    free(h);
    tu_rmrf(dir);
    free(dir);
    free(log);
    plena_emu_free(e);
}

/* Address formation (docs/machine.md "HBM DMA"), worked example: W[128][128]
 * at 65536, SCALE 16384, STRIDE 128, off 8256: row 1 elements at
 * 73920..73983, scales at 82968..82975. */
static void test_address_formation(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    uint8_t ones[64], sc[8];
    memset(ones, 0x38, 64); /* e4m3 1.0 */
    memset(sc, 0x80, 8);    /* scale 2.0 */
    assert_int_equal(plena_emu_hbm_write(e, 73920, ones, 64, NULL), 0);
    assert_int_equal(plena_emu_hbm_write(e, 82968, sc, 8, NULL), 0);
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 3, 65536, 16384, 128);
    LI(&p, 1, 4096); /* tile 1 */
    LI(&p, 2, 8256);
    RMF(&p, H_PREFETCH_M, 1, 2, 3, 1, 0);
    struct txn_log *log = calloc(1, sizeof *log);
    struct plena_emu_result r = tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    assert_int_equal(log->n, 128);
    assert_int_equal(log->t[0].addr, 73792);
    assert_int_equal(log->t[1].addr, 82944); /* S0 = 82952 */
    assert_int_equal(log->t[2].addr, 73920);
    assert_int_equal(log->t[3].addr, 82944); /* 82968 */
    for (unsigned c = 0; c < 64; c++) {
        assert_true(plena_emu_mram_get(e, 4096 + 64 + c) == 2.0f);
        assert_true(plena_emu_mram_get(e, 4096 + c) == 0.0f);
        assert_true(plena_emu_mram_get(e, 4096 + 128 + c) == 0.0f);
    }
    free(log);
    plena_emu_free(e);
}

/* H_PREFETCH_M decodes with the settings' MX mode (docs/numerics.md
 * "MX decode" and "OCP mode"): the same bytes in PLENA and OCP mode. Row 0:
 * block 0 = {0x38, 0x78, 0x01, 0xB8} under scale byte 127 (2^0 in both),
 * block 1 = {0x38} under scale byte 0.
 * PLENA: 1, inf (e=15 m=0), 2^-10 (m/8 * 2^-7), -1; scale 0 -> 0.
 * OCP e4m3fn/e8m0: 1, 256, 2^-9, -1; scale 0 -> 2^-127. */
static void test_prefetch_mx_modes(void **state)
{
    (void)state;
    static const float want[2][5] = {{1.0f, INFINITY, 0x1p-10f, -1.0f, 0.0f},
                                     {1.0f, 256.0f, 0x1p-9f, -1.0f, 0x1p-127f}};
    for (int ocp = 0; ocp < 2; ocp++) {
        struct plena_settings s;
        tu_settings(&s);
        s.mx_mode = ocp ? PLENA_MX_OCP : PLENA_MX_PLENA;
        struct plena_emu *e = tu_new(&s);
        const uint8_t codes[9] = {0x38, 0x78, 0x01, 0xB8, 0, 0, 0, 0, 0x38};
        const uint8_t scales[2] = {127, 0};
        assert_int_equal(plena_emu_hbm_write(e, 0, codes, 9, NULL), 0);
        assert_int_equal(plena_emu_hbm_write(e, 65536, scales, 2, NULL), 0);
        struct tu_prog p = {.n = 0};
        dma_regs(&p, 0, 0, 65536, 64);
        LI(&p, 1, 0);
        LI(&p, 2, 0);
        R(&p, H_PREFETCH_M, 1, 2, 0);
        tu_ok(e, &p);
        const unsigned at[5] = {0, 1, 2, 3, 8};
        for (int k = 0; k < 5; k++) {
            float got = plena_emu_mram_get(e, at[k]);
            if (got != want[ocp][k]) fprintf(stderr, "mode %d element %u: %g\n", ocp, at[k], got);
            assert_true(got == want[ocp][k]);
        }
        plena_emu_free(e);
    }
}

/* An MX type whose block does not divide MLEN is refused when the machine is
 * made (a settings file cannot say so, a struct built in code can). */
/* Out of memory for VRAM (its page table, the first of the machine's
 * arrays) names the setting that sizes it. */
static void test_vram_nomem_names_key(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    struct plena_emu *e = NULL;
    struct plena_err err = {0};
    plena_alloc_fail_after(1); /* the machine struct, then nothing */
    int rc = plena_emu_new(&s, 0, &e, &err);
    plena_alloc_fail_reset();
    assert_int_equal(rc, PLENA_E_NOMEM);
    assert_null(e);
    assert_string_equal(err.where, "VECTOR_SRAM_SIZE");
}

static void test_mx_block_checked(void **state)
{
    (void)state;
    const uint32_t bad[2] = {0, 48};
    for (int i = 0; i < 2; i++) {
        struct plena_settings s;
        tu_settings(&s);
        s.hbm_v_act_type.block = bad[i];
        struct plena_emu *e = NULL;
        struct plena_err err = {0};
        assert_int_equal(plena_emu_new(&s, 0, &e, &err), PLENA_E_INPUT);
        assert_null(e);
        char want[64];
        snprintf(want, sizeof want, "MX block size %u does not divide MLEN 64", bad[i]);
        assert_non_null(strstr(err.msg, want));
    }
    struct plena_settings s;
    tu_settings(&s);
    s.hbm_v_act_type.block = 32;
    plena_emu_free(tu_new(&s));
}

static const uint8_t image18[18] = {0x28, 0x30, 0x34, 0x38, 0x20, 0xA8, 0x00, 0x3C, 0x3A,
                                    0x3F, 0xBF, 0x07, 0x01, 0x00, 0x3C, 0x38, 0x81, 0x7F};

/* A worked HBM image (docs/formats.md "HBM image") through a mapped image
 * file, plus an MRAM dump example (docs/formats.md "Dumps": tile 0 row 1
 * column 3 = E0 3B at bytes 134..135). */
static void test_image_prefetch(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    char *dir = tu_tmpdir(), path[512];
    tu_write(dir, "hbm.bin", image18, 18, path);
    assert_int_equal(plena_emu_load_hbm_file(e, path, NULL), 0);
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 0, 0, 16, 8);
    LI(&p, 1, 64 * 8);
    LI(&p, 2, 8);
    RM(&p, H_PREFETCH_V, 1, 2, 0, 1); /* E0 = 8, S0 = 17 */
    LI(&p, 1, 0);
    LI(&p, 2, 0);
    RM(&p, H_PREFETCH_M, 1, 2, 0, 1);
    tu_ok(e, &p);
    const uint16_t rowB[8] = {0x3FA0, 0x3FF0, 0xBFF0, 0x3BE0, 0x3A80, 0x0000, 0x3FC0, 0x3F80};
    /* lanes 8, 9 read the image's scale bytes 0x81 0x7F as codes with scale
     * byte 0: -2^-10 * 0 = -0.0 (sign kept) and NaN * 0 = NaN (docs/numerics.md "MX decode") */
    for (unsigned i = 0; i < 64; i++) {
        uint16_t w = i < 8 ? rowB[i] : (i == 8 ? 0x8000 : (i == 9 ? 0x7FC0 : 0));
        assert_int_equal(plena_emu_vram_get(e, 64 * 8 + i), w);
    }
    const float rowA[8] = {1, 2, 3, 4, 0.5f, -1, 0, 6};
    for (unsigned i = 0; i < 8; i++)
        assert_true(plena_emu_mram_get(e, i) == rowA[i]);
    assert_true(plena_emu_mram_get(e, 64 + 3) == 0.0068359375f);
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_DEFAULT | PLENA_DUMP_HBM, NULL), 0);
    size_t n;
    uint8_t *m = tu_read(dir, "mram_dump.bin", &n);
    assert_int_equal(n, 4 * 4096 * 2);
    assert_int_equal(m[134], 0xE0);
    assert_int_equal(m[135], 0x3B);
    free(m);
    uint8_t *h = tu_read(dir, "hbm_dump.bin", &n);
    assert_int_equal(n, 64); /* preloaded 18 bytes: one block */
    assert_memory_equal(h, image18, 18);
    free(h);
    uint8_t *v = tu_read(dir, "vram_dump.bin", &n);
    assert_int_equal(n, 256 * 64 * 2);
    assert_int_equal(v[2 * (64 * 8 + 3)], 0xE0);
    free(v);
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

/* Preloads and dumps meet a FIFO: each preload is refused at once (a
 * blocking open waited for a writer forever) and a dump onto a FIFO is
 * refused without replacing it. */
static void test_fifo_images_and_dumps(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    char *dir = tu_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    struct plena_err err = {0};
    assert_int_equal(plena_emu_load_hbm_file(e, path, &err), PLENA_E_INPUT);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_int_equal(plena_emu_load_fpsram_file(e, path, NULL), PLENA_E_INPUT);
    assert_int_equal(plena_emu_load_intsram_file(e, path, NULL), PLENA_E_INPUT);
    assert_int_equal(plena_emu_load_vram_file(e, path, NULL), PLENA_E_INPUT);
    char dump[600];
    snprintf(dump, sizeof dump, "%s/vram_dump.bin", dir);
    assert_int_equal(mkfifo(dump, 0600), 0);
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_VRAM, NULL), PLENA_E_OUTPUT);
    struct stat st;
    assert_int_equal(stat(dump, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

/* A store into a mapped image copies the page: the file is not modified,
 * and the image bytes around the store survive. */
static void test_image_copy_on_write(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    char *dir = tu_tmpdir(), path[512];
    tu_write(dir, "hbm.bin", image18, 18, path);
    assert_int_equal(plena_emu_load_hbm_file(e, path, NULL), 0);
    uint8_t x = 0xAA, b[18];
    assert_int_equal(plena_emu_hbm_write(e, 2, &x, 1, NULL), 0);
    plena_emu_hbm_read(e, 0, b, 18);
    assert_int_equal(b[2], 0xAA);
    assert_int_equal(b[3], 0x38);
    assert_int_equal(b[17], 0x7F);
    size_t n;
    uint8_t *f = tu_read(dir, "hbm.bin", &n);
    assert_memory_equal(f, image18, 18);
    free(f);
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

/* Runs the image-drop program on a fresh machine over the image at path with
 * drop interval `every` (0: never; UINT64_MAX: the default policy); returns
 * the machine. */
static struct plena_emu *run_image_drop(const char *path, uint64_t every)
{
    struct plena_emu *e = tu_default();
    if (every != UINT64_MAX) plena_emu_set_image_drop(e, every);
    assert_int_equal(plena_emu_load_hbm_file(e, path, NULL), 0);
    /* a store into the image: its page is a copy the drops must not lose */
    uint8_t x = 0x5A;
    assert_int_equal(plena_emu_hbm_write(e, 4096 + 3, &x, 1, NULL), 0);
    struct tu_prog p = {.n = 0};
    for (unsigned rep = 0; rep < 4; rep++) {
        dma_regs(&p, 0, 4096 * (rep % 2), 64, 64);
        LI(&p, 1, 64 * 8 * rep);
        LI(&p, 2, 0);
        RM(&p, H_PREFETCH_V, 1, 2, 0, 1);
        LI(&p, 1, 0);
        RM(&p, H_PREFETCH_M, 1, 2, 0, 1);
    }
    tu_ok(e, &p);
    return e;
}

/* A large mapped image's pages are released during the run (here after every
 * DMA read): the machine's state is the same as without releases, and the
 * image reads back as the file and the store. */
static void test_image_drop(void **state)
{
    (void)state;
    char *dir = tu_tmpdir(), path[512];
    static uint8_t img[16384];
    for (size_t i = 0; i < sizeof img; i++)
        img[i] = (uint8_t)(i * 37 + (i >> 8));
    tu_write(dir, "hbm.bin", img, sizeof img, path);
    struct plena_emu *a = run_image_drop(path, 1), *b = run_image_drop(path, 0);
    assert_true(plena_emu_image_drops(a) >= 8);
    assert_int_equal(plena_emu_image_drops(b), 0);
    for (uint64_t i = 0; i < 4 * 64 * 8; i++)
        assert_int_equal(plena_emu_vram_get(a, i), plena_emu_vram_get(b, i));
    for (uint64_t i = 0; i < 4096; i++) { /* bits: the image decodes to NaNs too */
        float fa = plena_emu_mram_get(a, i), fb = plena_emu_mram_get(b, i);
        assert_memory_equal(&fa, &fb, sizeof fa);
    }
    uint8_t r[sizeof img];
    plena_emu_hbm_read(a, 0, r, sizeof r);
    img[4096 + 3] = 0x5A;
    assert_memory_equal(r, img, sizeof img);
    /* the default: an image under PLENA_EMU_IMAGE_DROP_MIN is never released */
    struct plena_emu *c = run_image_drop(path, UINT64_MAX);
    assert_int_equal(plena_emu_image_drops(c), 0);
    plena_emu_free(c);
    plena_emu_free(a);
    plena_emu_free(b);
    tu_rmrf(dir);
    free(dir);
}

static void test_store_types(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    struct plena_hbm_type bf = {PLENA_HBM_BF16, 0}, fp16 = {PLENA_HBM_FP16, 0};
    s.hbm_v_act_type = bf;
    s.hbm_v_kv_type = fp16;
    struct plena_emu *e = tu_new(&s);
    tu_vset(e, 0, 1.0f);
    tu_vset(e, 1, -2.0f);
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 0, 0, 0, 0);
    LI(&p, 1, 0);
    LI(&p, 2, 0);
    RMF(&p, H_STORE_V, 1, 2, 0, 0, 0); /* BF16: rows of 128 bytes */
    LI(&p, 2, 1024);
    RMF(&p, H_STORE_V, 1, 2, 0, 0, 1); /* FP16 (precision 1) */
    LI(&p, 2, 2048);
    LI(&p, 1, 64 * 10);
    RMF(&p, H_PREFETCH_V, 1, 0, 0, 0, 0); /* BF16 back from address 0 */
    tu_ok(e, &p);
    uint8_t b[4];
    plena_emu_hbm_read(e, 0, b, 4);
    assert_int_equal(b[0], 0x80);
    assert_int_equal(b[1], 0x3F);
    assert_int_equal(b[2], 0x00);
    assert_int_equal(b[3], 0xC0);
    plena_emu_hbm_read(e, 1024, b, 4);
    assert_int_equal(b[0], 0x00);
    assert_int_equal(b[1], 0x3C);
    assert_int_equal(b[2], 0x00);
    assert_int_equal(b[3], 0xC0);
    assert_int_equal(plena_emu_vram_get(e, 64 * 10 + 1), 0xC000);
    plena_emu_free(e);
}

static void test_hbm_limits(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    for (unsigned i = 0; i < 64; i++)
        tu_vset(e, i, 1.0f);
    struct tu_prog p = {.n = 0};
    /* A = HBM_SIZE - 64: the store's rows run past the end */
    LI(&p, 10, 15);
    I(&p, S_LUI_INT, 11, 0, 0xFF);    /* 0xFF000 */
    I(&p, S_ADDI_INT, 11, 11, 0xFC0); /* 0xFFFC0 = 2^20 - 64 */
    R(&p, C_SET_ADDR_REG, 0, 0, 11);
    LI(&p, 1, 0);
    LI(&p, 2, 0);
    R(&p, H_STORE_V, 1, 2, 0);
    tu_trap(e, &p, PLENA_TRAP_HBM_OUT_OF_RANGE, 6);
    uint8_t b[64];
    plena_emu_hbm_read(e, (1u << 20) - 64, b, 64);
    for (unsigned i = 0; i < 64; i++)
        assert_int_equal(b[i], 0);
    /* reads at or beyond HBM_SIZE are zeros */
    p.n = 0;
    I(&p, S_LUI_INT, 11, 0, 0x100); /* 2^20 */
    R(&p, C_SET_ADDR_REG, 0, 0, 11);
    LI(&p, 1, 0);
    R(&p, H_PREFETCH_V, 1, 0, 0);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_vram_get(e, 0), 0);
    /* high word of the address register: far beyond HBM, reads zeros */
    p.n = 0;
    for (unsigned i = 0; i < 64; i++)
        tu_vset(e, i, 1.0f);
    LI(&p, 12, 1);
    R(&p, C_SET_ADDR_REG, 0, 12, 0);
    LI(&p, 1, 0);
    R(&p, H_PREFETCH_V, 1, 0, 0);
    R(&p, H_STORE_V, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_HBM_OUT_OF_RANGE, 4);
    assert_int_equal(plena_emu_vram_get(e, 0), 0);
    /* destination checks */
    p.n = 0;
    LI(&p, 1, 254 * 64); /* rows 254..257 */
    R(&p, H_PREFETCH_V, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_VRAM_OUT_OF_RANGE, 1);
    p.n = 0;
    LI(&p, 1, 64);
    R(&p, H_PREFETCH_M, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_MRAM_MISALIGNED, 1);
    p.n = 0;
    I(&p, S_LUI_INT, 1, 0, 4); /* 16384 = tile 4 */
    R(&p, H_PREFETCH_M, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_MRAM_OUT_OF_RANGE, 1);
    plena_emu_free(e);
}

/* ---------------------------------------------------------------- loaders */

static void expect_input_error(int rc, const struct plena_err *err, const char *path,
                               const char *bytes)
{
    assert_int_equal(rc, PLENA_E_INPUT);
    assert_int_equal(err->code, PLENA_E_INPUT);
    assert_non_null(strstr(err->where, path));
    if (!strstr(err->msg, bytes)) fprintf(stderr, "msg: %s\n", err->msg);
    assert_non_null(strstr(err->msg, bytes));
}

static void test_loaders(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    char *dir = tu_tmpdir(), path[512];
    const uint8_t fp[] = {0x00, 0x00, 0x00, 0x3C, 0x00, 0xC0, 0x53, 0xFB, 0x0C, 0x3C};
    const uint8_t in[] = {0x05, 0, 0, 0, 0x0C, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF};
    const uint8_t vr[] = {0x80, 0x3F, 0x00, 0xC0, 0x49, 0x40};
    plena_emu_fpsram_set(e, 7, 0x4000);
    tu_write(dir, "fp_sram.bin", fp, sizeof fp, path);
    assert_int_equal(plena_emu_load_fpsram_file(e, path, NULL), 0);
    const uint16_t wfp[] = {0x0000, 0x3F80, 0xC000, 0xC76A, 0x3F82};
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(plena_emu_fpsram_get(e, i), wfp[i]);
    assert_int_equal(plena_emu_fpsram_get(e, 7), 0); /* the rest is +0.0 */
    tu_write(dir, "int_sram.bin", in, sizeof in, path);
    assert_int_equal(plena_emu_load_intsram_file(e, path, NULL), 0);
    assert_int_equal(plena_emu_intsram_get(e, 0), 5);
    assert_int_equal(plena_emu_intsram_get(e, 1), 12);
    assert_int_equal(plena_emu_intsram_get(e, 2), 4294967295u);
    tu_vset(e, 64 * 200, 5.0f);
    tu_write(dir, "vram_preload.bin", vr, sizeof vr, path);
    assert_int_equal(plena_emu_load_vram_file(e, path, NULL), 0);
    assert_int_equal(plena_emu_vram_get(e, 0), 0x3F80);
    assert_int_equal(plena_emu_vram_get(e, 1), 0xC000);
    assert_int_equal(plena_emu_vram_get(e, 2), 0x4049);
    assert_int_equal(plena_emu_vram_get(e, 3), 0);
    assert_int_equal(plena_emu_vram_get(e, 64 * 200), 0); /* the rest of VRAM is 0 */

    /* invalid sizes (whole messages for one file of each kind) */
    static uint8_t big[4100];
    struct plena_err err;
    memset(&err, 0, sizeof err);
    tu_write(dir, "fp3.bin", big, 3, path);
    expect_input_error(plena_emu_load_fpsram_file(e, path, &err), &err, "fp3.bin",
                       "FP SRAM preload is 3 bytes: expected an even size of at most 2048 bytes "
                       "(FP_SRAM_DEPTH 1024 x 2)");
    memset(&err, 0, sizeof err);
    tu_write(dir, "fp2050.bin", big, 2050, path);
    expect_input_error(plena_emu_load_fpsram_file(e, path, &err), &err, "fp2050.bin", "2050 bytes");
    memset(&err, 0, sizeof err);
    tu_write(dir, "int6.bin", big, 6, path);
    expect_input_error(plena_emu_load_intsram_file(e, path, &err), &err, "int6.bin",
                       "INT SRAM preload is 6 bytes: expected a multiple of 4 of at most 4096 "
                       "bytes (INT_SRAM_DEPTH 1024 x 4)");
    memset(&err, 0, sizeof err);
    tu_write(dir, "int4100.bin", big, 4100, path);
    expect_input_error(plena_emu_load_intsram_file(e, path, &err), &err, "int4100.bin",
                       "4100 bytes");
    memset(&err, 0, sizeof err);
    tu_write(dir, "v5.bin", big, 5, path);
    expect_input_error(plena_emu_load_vram_file(e, path, &err), &err, "v5.bin",
                       "VRAM preload is 5 bytes: expected an even size of at most 32768 bytes "
                       "(VECTOR_SRAM_SIZE 256 x VLEN 64 x 2)");
    /* oversized VRAM preload and HBM image: sparse files */
    snprintf(path, sizeof path, "%s/vbig.bin", dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 256 * 64 * 2 + 2), 0);
    close(fd);
    memset(&err, 0, sizeof err);
    expect_input_error(plena_emu_load_vram_file(e, path, &err), &err, "vbig.bin", "32770 bytes");
    snprintf(path, sizeof path, "%s/hbig.bin", dir);
    fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_int_equal(ftruncate(fd, (1 << 20) + 1), 0);
    close(fd);
    memset(&err, 0, sizeof err);
    expect_input_error(plena_emu_load_hbm_file(e, path, &err), &err, "hbig.bin", "1048577 bytes");
    /* exactly HBM_SIZE is valid; a sparse image costs nothing until read */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(ftruncate(fd, 1 << 20), 0);
    assert_int_equal(pwrite(fd, "\x7F", 1, (1 << 20) - 1), 1);
    close(fd);
    assert_int_equal(plena_emu_load_hbm_file(e, path, NULL), 0);
    uint8_t b = 0;
    plena_emu_hbm_read(e, (1 << 20) - 1, &b, 1);
    assert_int_equal(b, 0x7F);
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

/* H_PREFETCH_S (docs/machine.md "H_PREFETCH_S"): the 64 bytes at A + G[rs1]
 * into INT SRAM as 16 little-endian words, or into FP SRAM as 32 fp16 halves
 * stored as BF16 (1.0 -> 0x3F80, -2.0 -> 0xC000, an fp16 NaN -> 0x7FC0,
 * 65504 -> 0x4780 as RNE of 65504); an unaligned block is two transactions;
 * bytes past HBM_SIZE read 0; the SRAM range is checked. */
static void test_prefetch_sram(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    uint8_t words[64], halves[64] = {0};
    for (int i = 0; i < 16; i++) {
        uint32_t w = 0x01020300u + (uint32_t)i;
        words[4 * i] = (uint8_t)w;
        words[4 * i + 1] = (uint8_t)(w >> 8);
        words[4 * i + 2] = (uint8_t)(w >> 16);
        words[4 * i + 3] = (uint8_t)(w >> 24);
    }
    const uint16_t h[4] = {0x3C00, 0xC000, 0x7E00, 0x7BFF};
    for (int i = 0; i < 4; i++) {
        halves[2 * i] = (uint8_t)h[i];
        halves[2 * i + 1] = (uint8_t)(h[i] >> 8);
    }
    assert_int_equal(plena_emu_hbm_write(e, 1000, words, 64, NULL), 0);
    assert_int_equal(plena_emu_hbm_write(e, 4096, halves, 64, NULL), 0);
    struct tu_prog p = {.n = 0};
    LI(&p, 5, 960);
    R(&p, C_SET_ADDR_REG, 1, 0, 5);
    LI(&p, 2, 40);  /* 960 + 40 = 1000: not 64-aligned */
    LI(&p, 3, 100); /* INT SRAM 100..115 */
    RMF(&p, H_PREFETCH_S, 3, 2, 1, 0, 0);
    LI(&p, 2, 3136); /* 960 + 3136 = 4096 */
    LI(&p, 3, 200);  /* FP SRAM 200..231 */
    RMF(&p, H_PREFETCH_S, 3, 2, 1, 0, 1);
    struct txn_log *log = calloc(1, sizeof *log);
    struct plena_emu_result r = tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    for (uint32_t i = 0; i < 16; i++)
        assert_int_equal(plena_emu_intsram_get(e, 100 + i), 0x01020300u + i);
    assert_int_equal(plena_emu_intsram_get(e, 116), 0);
    assert_int_equal(plena_emu_fpsram_get(e, 200), 0x3F80);
    assert_int_equal(plena_emu_fpsram_get(e, 201), 0xC000);
    assert_int_equal(plena_emu_fpsram_get(e, 202), 0x7FC0);
    assert_int_equal(plena_emu_fpsram_get(e, 203), 0x4780);
    assert_int_equal(plena_emu_fpsram_get(e, 231), 0);
    assert_int_equal(log->n, 3); /* blocks 960 and 1024, then 4096 */
    assert_int_equal(log->t[0].addr, 960);
    assert_int_equal(log->t[1].addr, 1024);
    assert_int_equal(log->t[2].addr, 4096);
    assert_int_equal(log->t[2].is_write, 0);
    free(log);
    /* past HBM_SIZE (1 MiB): the upper 32 bytes read 0 */
    uint8_t tail[32];
    memset(tail, 0xAB, sizeof tail);
    assert_int_equal(plena_emu_hbm_write(e, (1u << 20) - 32, tail, 32, NULL), 0);
    struct tu_prog q = {.n = 0};
    I(&q, S_LUI_INT, 5, 0, 255); /* 255 << 12 = 1044480 = 2^20 - 4096 */
    I(&q, S_ADDI_INT, 5, 5, 4064);
    R(&q, C_SET_ADDR_REG, 1, 0, 5);
    LI(&q, 3, 0);
    RMF(&q, H_PREFETCH_S, 3, 0, 1, 0, 0);
    r = tu_run(e, &q);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    assert_int_equal(plena_emu_intsram_get(e, 7), 0xABABABABu);
    assert_int_equal(plena_emu_intsram_get(e, 8), 0);
    /* INT SRAM 1010 + 16 > 1024: trap naming the range */
    struct tu_prog t = {.n = 0};
    LI(&t, 3, 1010);
    RMF(&t, H_PREFETCH_S, 3, 0, 1, 0, 0);
    r = tu_run(e, &t);
    assert_int_equal(r.trap.kind, PLENA_TRAP_SRAM_OUT_OF_RANGE);
    assert_non_null(strstr(r.trap.detail, "INT SRAM index 1025 >= depth 1024"));
    plena_emu_free(e);
}

/* The live trip counter (docs/machine.md "Hardware loops"): a loop started
 * with count 1 whose first body instruction adds n - 1 to its counter runs
 * n times; the generator's run-time trip counts rely on exactly this. */
static void test_live_loop_count(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    LI(&p, 6, 4); /* n - 1 for n = 5 */
    I(&p, C_LOOP_START, 1, 0, 1);
    R(&p, S_ADD_INT, 1, 1, 6);
    R(&p, S_ADD_INT, 6, 0, 0);
    I(&p, S_ADDI_INT, 3, 3, 1);
    R(&p, C_LOOP_END, 1, 0, 0);
    struct plena_emu_result r = tu_run(e, &p);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    assert_int_equal(plena_emu_gp_get(e, 3), 5);
    assert_int_equal(r.instructions_executed, 2 + 5 * 4);
    plena_emu_free(e);
}

/* ------------------------------------------------------------------ loops */

static void test_loops_nested(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    I(&p, C_LOOP_START, 1, 0, 3);
    I(&p, C_LOOP_START, 2, 0, 4);
    I(&p, S_ADDI_INT, 3, 3, 1);
    R(&p, C_LOOP_END, 2, 0, 0);
    I(&p, S_ADDI_INT, 4, 4, 1);
    R(&p, C_LOOP_END, 1, 0, 0);
    struct plena_emu_result r = tu_run(e, &p);
    assert_int_equal(r.status, PLENA_RUN_COMPLETED);
    assert_int_equal(plena_emu_gp_get(e, 3), 12);
    assert_int_equal(plena_emu_gp_get(e, 4), 3);
    assert_int_equal(plena_emu_gp_get(e, 1), 0);
    assert_int_equal(plena_emu_gp_get(e, 2), 0);
    /* 1 + 3 * (1 + 4*2 + 2) */
    assert_int_equal(r.instructions_executed, 34);
    plena_emu_free(e);
}

static void test_loop_budget(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    s.max_loop_instructions = 10;
    struct plena_emu *e = tu_new(&s);
    /* body of 9 + C_LOOP_END = 10 per iteration: exactly at the limit */
    struct tu_prog p = {.n = 0};
    I(&p, C_LOOP_START, 1, 0, 5);
    for (int i = 0; i < 9; i++)
        I(&p, S_ADDI_INT, 3, 3, 1);
    R(&p, C_LOOP_END, 1, 0, 0);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_gp_get(e, 3), 45);
    /* one more: the 11th instruction (the C_LOOP_END at pc 11) traps */
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 5);
    for (int i = 0; i < 10; i++)
        I(&p, S_ADDI_INT, 3, 3, 1);
    R(&p, C_LOOP_END, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_LOOP_BUDGET, 11);
    /* the outer loop counts the inner iterations */
    s.max_loop_instructions = 20;
    plena_emu_free(e);
    e = tu_new(&s);
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 2);
    I(&p, C_LOOP_START, 2, 0, 10);
    I(&p, S_ADDI_INT, 3, 3, 1);
    R(&p, C_LOOP_END, 2, 0, 0);
    R(&p, C_LOOP_END, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_LOOP_BUDGET, 3);
    assert_int_equal(plena_emu_gp_get(e, 3), 10);
    assert_int_equal(plena_emu_gp_get(e, 2), 1);
    plena_emu_free(e);
}

/* C_BREAK out of a paired loop (docs/machine.md "Hardware loops"); the word
 * after C_BREAK is an invalid opcode that must never execute. */
static void test_break(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    I(&p, C_LOOP_START, 4, 0, 16);
    I(&p, S_ADDI_INT, 6, 6, 1);
    I(&p, C_LOOP_START, 5, 0, 2);
    I(&p, S_ADDI_INT, 7, 7, 1);
    tu_emit(&p, PLENA_OP_C_BREAK, 0, 0, 0, 0, 0, 0);
    p.w[p.n++] = 0x00000000;
    R(&p, C_LOOP_END, 5, 0, 0);
    R(&p, C_LOOP_END, 4, 0, 0);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_gp_get(e, 6), 16);
    assert_int_equal(plena_emu_gp_get(e, 7), 16);
    assert_int_equal(plena_emu_gp_get(e, 5), 0);
    assert_int_equal(plena_emu_gp_get(e, 4), 0);
    plena_emu_free(e);
}

static void test_loop_traps(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    tu_emit(&p, PLENA_OP_C_BREAK, 0, 0, 0, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_BREAK_NO_LOOP, 0);
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 2);
    tu_emit(&p, PLENA_OP_C_BREAK, 0, 0, 0, 0, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_BREAK_NO_END, 1);
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 2);
    R(&p, C_LOOP_END, 3, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_LOOP_END_UNMATCHED, 1);
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 0);
    tu_trap(e, &p, PLENA_TRAP_LOOP_ZERO_COUNT, 0);
    p.n = 0;
    for (int i = 0; i < 1025; i++)
        I(&p, C_LOOP_START, 1, 0, 1);
    tu_trap(e, &p, PLENA_TRAP_LOOP_STACK_OVERFLOW, 1024);
    /* C_LOOP_END removes the matching entry even when it is not innermost */
    p.n = 0;
    I(&p, C_LOOP_START, 1, 0, 1);
    I(&p, C_LOOP_START, 2, 0, 1);
    R(&p, C_LOOP_END, 1, 0, 0); /* removes gp1's entry */
    R(&p, C_LOOP_END, 2, 0, 0);
    R(&p, C_LOOP_END, 1, 0, 0); /* nothing left for gp1 */
    tu_trap(e, &p, PLENA_TRAP_LOOP_END_UNMATCHED, 4);
    plena_emu_free(e);
}

static void test_invalid_and_sram_traps(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    const uint32_t bad[] = {0x00000000, 0x00000031, 0x00000033, 0x0000003A, 0xFFFFFFFF};
    for (unsigned i = 0; i < 5; i++) {
        struct tu_prog p = {.n = 0};
        LI(&p, 1, 1);
        p.w[p.n++] = bad[i];
        struct plena_emu_result r = tu_run(e, &p);
        assert_int_equal(r.trap.kind, PLENA_TRAP_INVALID_OPCODE);
        assert_int_equal(r.trap.pc, 1);
        assert_int_equal(r.trap.word, bad[i]);
        assert_int_equal(r.instructions_executed, 1);
    }
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 1000);
    I(&p, S_ST_INT, 1, 1, 24); /* 1024 */
    tu_trap(e, &p, PLENA_TRAP_SRAM_OUT_OF_RANGE, 1);
    p.n = 0;
    LI(&p, 1, 1000);
    I(&p, S_LD_FP, 1, 1, 24);
    tu_trap(e, &p, PLENA_TRAP_SRAM_OUT_OF_RANGE, 1);
    p.n = 0;
    LI(&p, 1, 3);
    R(&p, V_ADD_VV, 0, 1, 0);
    tu_trap(e, &p, PLENA_TRAP_VRAM_MISALIGNED, 1);
    /* sum wraps mod 2^32: G = 2^32 - 1, imm 1 -> index 0 is valid */
    p.n = 0;
    I(&p, S_LUI_INT, 1, 0, 0xFFFFF);
    I(&p, S_ADDI_INT, 1, 1, 0xFFF);
    LI(&p, 2, 9);
    I(&p, S_ST_INT, 2, 1, 1);
    tu_ok(e, &p);
    assert_int_equal(plena_emu_intsram_get(e, 0), 9);
    plena_emu_free(e);
}

static void test_format_trap(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    I(&p, S_LUI_INT, 1, 0, 4); /* 16384 = row 256 */
    p.w[p.n++] = 0x00004801;   /* M_MM 0, gp2, gp1 */
    struct plena_emu_result r = tu_run(e, &p);
    assert_int_equal(r.status, PLENA_RUN_TRAPPED);
    struct plena_program prog;
    memset(&prog, 0, sizeof prog);
    uint32_t lines[2] = {41, 42};
    prog.words = p.w;
    prog.n = 2;
    char buf[512];
    plena_emu_format_trap(&r.trap, &prog, buf, sizeof buf);
    assert_string_equal(buf, "trap at pc 1 (M_MM): vram_out_of_range: VRAM row 256 >= depth 256 "
                             "(word 0x00004801)");
    prog.src_line = lines;
    prog.source_path = "moe.asm";
    plena_emu_format_trap(&r.trap, &prog, buf, sizeof buf);
    assert_string_equal(buf, "trap at pc 1 (M_MM, moe.asm:42): vram_out_of_range: VRAM row 256 "
                             ">= depth 256 (word 0x00004801)");
    plena_emu_free(e);
}

static void test_event_fields(void **state)
{
    (void)state;
    struct plena_emu *e = tu_default();
    struct tu_prog p = {.n = 0};
    LI(&p, 1, 3);
    LI(&p, 2, 7);
    I(&p, S_ADDI_INT, 1, 2, 5); /* event: g_rd 3, g_rs1 7 (before) */
    struct txn_log *log = calloc(1, sizeof *log);
    tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(log->last.pc, 2);
    assert_int_equal(log->last.op, PLENA_OP_S_ADDI_INT);
    assert_int_equal(log->last.word, p.w[2]);
    assert_int_equal(log->last.g_rd, 3);
    assert_int_equal(log->last.g_rs1, 7);
    assert_int_equal(plena_emu_gp_get(e, 1), 12);
    p.n = 0;
    R(&p, S_ADD_FP, 0, 1, 2);
    log->events = 0;
    tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(log->last.f0_skip, 1);
    p.n = 0;
    RM(&p, V_TOPK, 0, 0, 0, 1);
    tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(log->last.topk_experts, 128);
    assert_int_equal(log->last.f0_skip, 0);
    /* no event for the trapping instruction */
    p.n = 0;
    LI(&p, 1, 1);
    p.w[p.n++] = 0;
    log->events = 0;
    tu_run_obs(e, &p, log_obs, log);
    assert_int_equal(log->events, 1);
    free(log);
    plena_emu_free(e);
}

/* Dumps are written sparse (docs/formats.md "Dumps"): VRAM pages never
 * written, zero 64 KiB blocks and HBM pages neither preloaded nor written
 * are holes, but every byte and the size are those of the full dump. A
 * 4 MiB VRAM with values in pages 0 and 5 only, a written page of zeros in
 * between and untouched pages at the end (the size must still be full), and
 * an HBM dump whose two written blocks are 1 MiB apart. */
static void test_sparse_dumps(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    s.vector_sram_size = 32768; /* 2 M elements, 64 pages of 64 KiB */
    s.hbm_size = 4u << 20;
    struct plena_emu *e = tu_new(&s);
    const uint64_t page = 32768; /* elements per 64 KiB page */
    plena_emu_vram_set(e, 3, 0x3F80);
    plena_emu_vram_set(e, 5 * page + 17, 0xC000);
    plena_emu_vram_set(e, 5 * page + page - 1, 0x0001);
    plena_emu_vram_set(e, 2 * page + 9, 0); /* allocated, all zero */
    const uint8_t blk[4] = {1, 2, 3, 4};
    assert_int_equal(plena_emu_hbm_write(e, 64, blk, 4, NULL), 0);
    assert_int_equal(plena_emu_hbm_write(e, (1u << 20) + 128, blk, 4, NULL), 0);
    char *dir = tu_tmpdir();
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_VRAM | PLENA_DUMP_HBM, NULL), 0);
    size_t n;
    uint8_t *v = tu_read(dir, "vram_dump.bin", &n);
    assert_int_equal(n, 32768u * 64 * 2);
    for (size_t i = 0; i < n; i++) {
        uint8_t want = 0;
        if (i == 2 * 3 + 1) want = 0x3F;
        if (i == 2 * 3) want = 0x80;
        if (i == 2 * (5 * page + 17) + 1) want = 0xC0;
        if (i == 2 * (5 * page + page - 1)) want = 0x01;
        if (v[i] != want) fail_msg("vram_dump.bin byte %zu: expected %u, found %u", i, want, v[i]);
    }
    free(v);
    uint8_t *h = tu_read(dir, "hbm_dump.bin", &n);
    assert_int_equal(n, (1u << 20) + 192); /* up to the end of the highest written block */
    for (size_t i = 0; i < n; i++) {
        uint8_t want = 0;
        if (i >= 64 && i < 68) want = blk[i - 64];
        if (i >= (1u << 20) + 128 && i < (1u << 20) + 132) want = blk[i - (1u << 20) - 128];
        if (h[i] != want) fail_msg("hbm_dump.bin byte %zu: expected %u, found %u", i, want, h[i]);
    }
    free(h);
    tu_rmrf(dir);
    free(dir);
    plena_emu_free(e);
}

/* Same inputs -> byte-identical dumps; dumps after a trap hold the state
 * after the last completed instruction. */
static void run_for_dumps(const char *dir)
{
    struct plena_emu *e = tu_default();
    for (unsigned i = 0; i < 64 * 8; i++)
        tu_vset(e, i, (float)((i * 13) % 17) - 8.0f);
    struct tu_prog p = {.n = 0};
    dma_regs(&p, 0, 0, 4096, 64);
    LI(&p, 1, 0);
    R(&p, H_STORE_V, 1, 0, 0);
    RM(&p, H_PREFETCH_M, 1, 0, 0, 1);
    LI(&p, 2, 0);
    R(&p, M_MM, 0, 1, 2);
    LI(&p, 3, 64 * 20);
    I(&p, M_MM_WO, 3, 0, 0);
    RM(&p, V_TOPK, 0, 0, 0, 0);
    p.w[p.n++] = 0x3F; /* trap */
    struct plena_emu_result r = tu_run(e, &p);
    assert_int_equal(r.status, PLENA_RUN_TRAPPED);
    assert_int_equal(plena_emu_write_dumps(e, dir, PLENA_DUMP_DEFAULT | PLENA_DUMP_HBM, NULL), 0);
    plena_emu_free(e);
}

static void test_determinism(void **state)
{
    (void)state;
    char *d1 = tu_tmpdir(), *d2 = tu_tmpdir();
    run_for_dumps(d1);
    run_for_dumps(d2);
    const char *names[] = {"vram_dump.bin", "mram_dump.bin", "fpsram_dump.bin", "intsram_dump.bin",
                           "hbm_dump.bin"};
    for (unsigned i = 0; i < 5; i++) {
        size_t n1, n2;
        uint8_t *a = tu_read(d1, names[i], &n1), *b = tu_read(d2, names[i], &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(a, b, n1);
        free(a);
        free(b);
    }
    size_t n;
    uint8_t *v = tu_read(d1, "vram_dump.bin", &n);
    int nonzero = 0;
    for (size_t i = 2 * 64 * 20; i < 2 * 64 * 24; i++)
        nonzero |= v[i];
    assert_true(nonzero); /* the M_MM_WO before the trap is in the dump */
    free(v);
    tu_rmrf(d1);
    tu_rmrf(d2);
    free(d1);
    free(d2);
}

/* A default-size VRAM (4194304 rows) costs nothing until touched. */
static void test_big_sparse_vram(void **state)
{
    (void)state;
    struct plena_settings s;
    tu_settings(&s);
    s.vector_sram_size = 4194304;
    s.hbm_size = 17179869184ull;
    struct plena_emu *e = tu_new(&s);
    struct tu_prog p = {.n = 0};
    I(&p, S_LUI_INT, 1, 0, 65535); /* 268431360 = row 4194240 */
    LI(&p, 2, 1);
    R(&p, V_ADD_VV, 1, 1, 1);
    I(&p, S_LUI_INT, 1, 0, 65536); /* row 4194304: out of range */
    R(&p, V_ADD_VV, 1, 1, 1);
    tu_trap(e, &p, PLENA_TRAP_VRAM_OUT_OF_RANGE, 4);
    plena_emu_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_g2_prefetch_list),
        cmocka_unit_test(test_store_dump_320),
        cmocka_unit_test(test_sparse_dumps),
        cmocka_unit_test(test_address_formation),
        cmocka_unit_test(test_prefetch_mx_modes),
        cmocka_unit_test(test_mx_block_checked),
        cmocka_unit_test(test_vram_nomem_names_key),
        cmocka_unit_test(test_image_prefetch),
        cmocka_unit_test(test_fifo_images_and_dumps),
        cmocka_unit_test(test_image_copy_on_write),
        cmocka_unit_test(test_image_drop),
        cmocka_unit_test(test_store_types),
        cmocka_unit_test(test_hbm_limits),
        cmocka_unit_test(test_loaders),
        cmocka_unit_test(test_loops_nested),
        cmocka_unit_test(test_loop_budget),
        cmocka_unit_test(test_break),
        cmocka_unit_test(test_loop_traps),
        cmocka_unit_test(test_invalid_and_sram_traps),
        cmocka_unit_test(test_prefetch_sram),
        cmocka_unit_test(test_live_loop_count),
        cmocka_unit_test(test_format_trap),
        cmocka_unit_test(test_event_fields),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_big_sparse_vram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
