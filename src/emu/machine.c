/* Machine state of the functional emulator: allocation from the settings,
 * sparse VRAM and HBM (docs/machine.md "Machine state"), preload files
 * (docs/formats.md "HBM image" and "SRAM and VRAM preload images"), dumps
 * (docs/formats.md "Dumps") and the trap line
 * (docs/machine.md "After a trap"). Instruction semantics live in exec.c
 * only. VRAM and HBM pages materialise on first write; the HBM image is
 * mapped read-only and written pages are copied into an overlay. */
#include "emu/emu_internal.h"

#include "common/alloc.h"
#include "common/fileio.h"
#include "num/num.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const trap_names[PLENA_TRAP_COUNT] = {
    [PLENA_TRAP_NONE] = "none",
#define PLENA_TRAP(id, name) [PLENA_TRAP_##id] = name,
#include "emu/traps.def"
#undef PLENA_TRAP
};

const char *plena_trap_kind_name(enum plena_trap_kind k)
{
    if ((unsigned)k >= PLENA_TRAP_COUNT) return "unknown";
    return trap_names[k];
}

static int log2_exact(uint64_t v)
{
    if (v == 0 || (v & (v - 1))) return -1;
    int s = 0;
    while ((1ull << s) != v)
        s++;
    return s;
}

/* ---------------------------------------------------------------- VRAM */

uint16_t *emu_vram_page_alloc(struct plena_emu *e, uint64_t page)
{
    if (!e->vpages[page]) e->vpages[page] = plena_calloc(e->page_elems, sizeof(uint16_t));
    return e->vpages[page];
}

/* ----------------------------------------------------------------- HBM */

static uint8_t *hbm_page(const struct plena_emu *e, uint64_t page)
{
    uint64_t l1 = page >> HBM_L2_BITS;
    if (l1 >= e->n_hbm_l1 || !e->hbm_l1[l1]) return NULL;
    return e->hbm_l1[l1][page & ((1u << HBM_L2_BITS) - 1)];
}

/* Bytes at or beyond HBM_SIZE read as 0 (docs/machine.md "Machine state"). */
void emu_hbm_read(const struct plena_emu *e, uint64_t addr, uint8_t *dst, size_t n)
{
    while (n > 0) {
        uint64_t off = addr & (EMU_PAGE_BYTES - 1);
        size_t chunk = EMU_PAGE_BYTES - off;
        if (chunk > n) chunk = n;
        if (addr >= e->hbm_size) {
            memset(dst, 0, n);
            return;
        }
        if (chunk > e->hbm_size - addr) chunk = (size_t)(e->hbm_size - addr);
        const uint8_t *pg = hbm_page(e, addr >> HBM_PAGE_SHIFT);
        if (pg) {
            memcpy(dst, pg + off, chunk);
        } else if (addr < e->image_len) {
            size_t from_img = chunk;
            if (from_img > e->image_len - addr) from_img = (size_t)(e->image_len - addr);
            memcpy(dst, e->image + addr, from_img);
            memset(dst + from_img, 0, chunk - from_img);
        } else {
            memset(dst, 0, chunk);
        }
        dst += chunk;
        addr += chunk;
        n -= chunk;
    }
}

void emu_hbm_prefetch(const struct plena_emu *e, uint64_t addr, size_t n)
{
    if (addr >= e->hbm_size || n == 0) return;
    const uint8_t *pg = hbm_page(e, addr >> HBM_PAGE_SHIFT);
    const uint8_t *p;
    uint64_t left; /* bytes of the object p points into */
    if (pg) {
        p = pg + (addr & (EMU_PAGE_BYTES - 1));
        left = EMU_PAGE_BYTES - (addr & (EMU_PAGE_BYTES - 1));
    } else if (addr < e->image_len) {
        p = e->image + addr;
        left = e->image_len - addr;
    } else {
        return; /* zeros: nothing to fetch */
    }
    if (n > left) n = (size_t)left;
    /* a hint only: never faults, changes no result */
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch(p + k);
}

void emu_hbm_image_tick(struct plena_emu *e, uint64_t n)
{
    if (!e->image_drop_every || !e->image_len) return;
    e->image_read += n;
    if (e->image_read < e->image_drop_every) return;
    e->image_read = 0;
    /* a hint: on failure the pages simply stay; no result depends on it */
    if (madvise((void *)e->image, (size_t)e->image_len, MADV_DONTNEED) == 0) e->image_drops++;
}

void plena_emu_set_image_drop(struct plena_emu *e, uint64_t every_bytes)
{
    e->image_drop_set = 1;
    e->image_drop_every = every_bytes;
    e->image_read = 0;
}

uint64_t plena_emu_image_drops(const struct plena_emu *e)
{
    return e->image_drops;
}

static uint8_t *hbm_page_rw(struct plena_emu *e, uint64_t page)
{
    uint64_t l1 = page >> HBM_L2_BITS;
    if (!e->hbm_l1[l1]) {
        e->hbm_l1[l1] = plena_calloc((size_t)1 << HBM_L2_BITS, sizeof(uint8_t *));
        if (!e->hbm_l1[l1]) return NULL;
    }
    uint8_t **slot = &e->hbm_l1[l1][page & ((1u << HBM_L2_BITS) - 1)];
    if (!*slot) {
        uint8_t *pg = plena_calloc(EMU_PAGE_BYTES, 1);
        if (!pg) return NULL;
        uint64_t start = page << HBM_PAGE_SHIFT;
        if (start < e->image_len) { /* copy-on-write from the mapped image */
            uint64_t n = e->image_len - start;
            if (n > EMU_PAGE_BYTES) n = EMU_PAGE_BYTES;
            memcpy(pg, e->image + start, (size_t)n);
        }
        *slot = pg;
    }
    return *slot;
}

/* Caller has checked addr + n <= hbm_size. */
int emu_hbm_write(struct plena_emu *e, uint64_t addr, const uint8_t *src, size_t n)
{
    uint64_t end = addr + n;
    while (n > 0) {
        uint64_t off = addr & (EMU_PAGE_BYTES - 1);
        size_t chunk = EMU_PAGE_BYTES - off;
        if (chunk > n) chunk = n;
        uint8_t *pg = hbm_page_rw(e, addr >> HBM_PAGE_SHIFT);
        if (!pg) return -1;
        memcpy(pg + off, src, chunk);
        src += chunk;
        addr += chunk;
        n -= chunk;
    }
    uint64_t hi = (end + 63) & ~(uint64_t)63;
    if (hi > e->hbm_hi) e->hbm_hi = hi;
    return 0;
}

static void hbm_drop_overlay(struct plena_emu *e)
{
    for (uint64_t i = 0; i < e->n_hbm_l1; i++) {
        if (!e->hbm_l1[i]) continue;
        for (size_t j = 0; j < ((size_t)1 << HBM_L2_BITS); j++)
            plena_free(e->hbm_l1[i][j]);
        plena_free(e->hbm_l1[i]);
        e->hbm_l1[i] = NULL;
    }
}

static void hbm_unmap(struct plena_emu *e)
{
    if (e->image && e->image_len) munmap((void *)e->image, (size_t)e->image_len);
    e->image = NULL;
    e->image_len = 0;
}

/* ------------------------------------------------------------ lifecycle */

int plena_emu_new(const struct plena_settings *s, uint64_t hbm_size, struct plena_emu **out,
                  struct plena_err *err)
{
    *out = NULL;
    if (s->mlen == 0 || s->vlen != s->mlen || s->blen == 0 || s->mlen % s->blen || s->hlen == 0 ||
        s->vlen % s->hlen || s->broadcast_amount == 0 || s->vector_sram_size == 0 ||
        s->matrix_sram_size < s->mlen || s->matrix_sram_size % s->mlen || s->fp_sram_depth == 0 ||
        s->int_sram_depth == 0 || s->hbm_m_prefetch_amount == 0 ||
        s->hbm_m_prefetch_amount % s->mlen || s->hbm_v_prefetch_amount == 0 ||
        s->hbm_v_writeback_amount == 0 || s->max_loop_instructions == 0)
        return PLENA_FAIL(err, PLENA_E_INPUT, "settings",
                          "inconsistent machine geometry (MLEN %u VLEN %u BLEN %u HLEN %u)",
                          s->mlen, s->vlen, s->blen, s->hlen);
    /* the DMA decodes whole MX blocks of a row (and the settings file only
     * allows blocks of 8 or 32): a block that does not divide MLEN is refused
     * here rather than met mid-run */
    const struct plena_hbm_type *ht[4] = {&s->hbm_m_weight_type, &s->hbm_m_kv_type,
                                          &s->hbm_v_act_type, &s->hbm_v_kv_type};
    for (int i = 0; i < 4; i++)
        if (ht[i]->kind == PLENA_HBM_MX && (ht[i]->block == 0 || s->mlen % ht[i]->block))
            return PLENA_FAIL(err, PLENA_E_INPUT, "settings",
                              "MX block size %u does not divide MLEN %u", ht[i]->block, s->mlen);
    if (hbm_size == 0) hbm_size = s->hbm_size;
    if (hbm_size == 0 || hbm_size > (1ull << 48))
        return PLENA_FAIL(err, PLENA_E_INPUT, "settings", "HBM_SIZE %llu out of range",
                          (unsigned long long)hbm_size);

    struct plena_emu *e = plena_calloc(1, sizeof *e);
    if (!e) return PLENA_FAIL(err, PLENA_E_NOMEM, "emulator", "out of memory");
    e->s = *s;
    e->s.hbm_size = hbm_size;
    e->mlen = s->mlen;
    e->vlen = s->vlen;
    e->blen = s->blen;
    e->hlen = s->hlen;
    e->ba = s->broadcast_amount;
    e->mlen2 = (uint64_t)s->mlen * s->mlen;
    e->vram_rows = s->vector_sram_size;
    e->tiles = s->matrix_sram_size / s->mlen;
    e->fp_depth = s->fp_sram_depth;
    e->int_depth = s->int_sram_depth;
    e->vlen_shift = log2_exact(e->vlen);
    e->mlen2_shift = log2_exact(e->mlen2);
    e->mlen_shift = log2_exact(e->mlen);
    e->blen_shift = log2_exact(e->blen);
    e->kernel_isa = emu_host_isa();
    e->stride = 1;
    e->hbm_size = hbm_size;
    e->budget_limit = e->loop_limit = e->insn_limit = e->check_at = UINT64_MAX;

    e->page_rows = EMU_PAGE_BYTES / 2 / e->vlen;
    if (e->page_rows == 0) e->page_rows = 1;
    e->page_elems = e->page_rows * e->vlen;
    e->page_rows_shift = log2_exact(e->page_rows);
    e->n_vpages = (e->vram_rows + e->page_rows - 1) / e->page_rows;
    e->n_hbm_l1 = ((hbm_size + EMU_PAGE_BYTES - 1) >> HBM_PAGE_SHIFT) + ((1u << HBM_L2_BITS) - 1);
    e->n_hbm_l1 >>= HBM_L2_BITS;

    size_t zero_elems = e->page_elems > EMU_PAGE_BYTES / 2 ? e->page_elems : EMU_PAGE_BYTES / 2;
    size_t wide = e->mlen > e->blen ? e->mlen : e->blen;
    /* Per-row DMA bytes: a plain 16-bit row is the largest stream of one row. */
    uint32_t max_rows = s->hbm_m_prefetch_amount;
    if (s->hbm_v_prefetch_amount > max_rows) max_rows = s->hbm_v_prefetch_amount;
    if (s->hbm_v_writeback_amount > max_rows) max_rows = s->hbm_v_writeback_amount;
    /* Per row: element run of <= 2*dim bytes touches <= 2*dim/64 + 2 blocks,
     * scale run of <= dim bytes touches <= dim/64 + 2; stores double the list. */
    e->txn_cap = (size_t)max_rows * 2 * ((3 * (size_t)e->mlen) / 64 + 4);

    e->vpages = plena_calloc(e->n_vpages, sizeof(uint16_t *));
    e->hbm_l1 = plena_calloc(e->n_hbm_l1, sizeof(uint8_t **));
    e->zero_page = plena_calloc(zero_elems, sizeof(uint16_t));
    e->mram = plena_calloc((size_t)e->tiles * e->mlen2, sizeof(float));
    e->fpsram = plena_calloc(e->fp_depth, sizeof(uint16_t));
    e->intsram = plena_calloc(e->int_depth, sizeof(uint32_t));
    e->m_acc = plena_calloc((size_t)e->blen * e->blen, sizeof(float));
    e->v_acc = plena_calloc(e->blen, sizeof(float));
    e->row_a = plena_calloc(e->vlen, sizeof(float));
    e->row_b = plena_calloc(e->vlen, sizeof(float));
    e->row_c = plena_calloc(e->vlen, sizeof(float));
    e->xbuf = plena_calloc(wide * e->mlen, sizeof(float));
    e->tbuf = plena_calloc(wide * e->mlen, sizeof(float));
    e->obuf = plena_calloc(wide * e->mlen, sizeof(float));
    e->dma_bytes = plena_calloc(2 * (size_t)e->mlen + 64, 1);
    e->txn = plena_calloc(e->txn_cap, sizeof(struct plena_hbm_txn));
    e->topk_keys = plena_calloc(PLENA_TOPK_MAX_EXPERTS, sizeof(uint64_t));
    plena_num_mx_lut_init(&e->mx_lut, s->mx_mode);
    e->xq_mem = plena_malloc((size_t)EMU_XQ_ENTRIES * e->mlen * 4 * sizeof(float) + 64);
    if (e->xq_mem) {
        uintptr_t a = ((uintptr_t)e->xq_mem + 63) & ~(uintptr_t)63;
        for (unsigned i = 0; i < EMU_XQ_ENTRIES; i++)
            e->xq[i].q = (float *)a + (size_t)i * e->mlen * 4;
    }
    int ok = e->vpages && e->hbm_l1 && e->zero_page && e->mram && e->fpsram && e->intsram &&
             e->m_acc && e->v_acc && e->row_a && e->row_b && e->row_c && e->xbuf && e->tbuf &&
             e->obuf && e->dma_bytes && e->txn && e->topk_keys && e->xq_mem;
    if (ok && (uint64_t)e->ba * e->hlen == e->mlen) {
        e->hm_acc = plena_calloc((size_t)e->ba * e->mlen2, sizeof(float));
        e->hv_acc = plena_calloc((size_t)e->ba * e->mlen, sizeof(float));
        ok = e->hm_acc && e->hv_acc;
    }
    if (!ok) {
        /* the sizes come from settings: name the key behind a failed memory */
        const char *key = !e->vpages   ? "VECTOR_SRAM_SIZE"
                          : !e->mram   ? "MATRIX_SRAM_SIZE"
                          : !e->hbm_l1 ? "HBM_SIZE"
                                       : NULL;
        plena_emu_free(e);
        if (key)
            return PLENA_FAIL(err, PLENA_E_NOMEM, key,
                              "out of memory allocating the machine's memory this setting sizes");
        return PLENA_FAIL(err, PLENA_E_NOMEM, "emulator", "out of memory allocating the machine");
    }
    *out = e;
    return 0;
}

void plena_emu_free(struct plena_emu *e)
{
    if (!e) return;
    if (e->vpages)
        for (uint64_t i = 0; i < e->n_vpages; i++)
            plena_free(e->vpages[i]);
    plena_free(e->vpages);
    if (e->hbm_l1) hbm_drop_overlay(e);
    plena_free(e->hbm_l1);
    hbm_unmap(e);
    plena_free((void *)e->zero_page);
    plena_free(e->mram);
    plena_free(e->fpsram);
    plena_free(e->intsram);
    plena_free(e->m_acc);
    plena_free(e->v_acc);
    plena_free(e->hm_acc);
    plena_free(e->hv_acc);
    plena_free(e->row_a);
    plena_free(e->row_b);
    plena_free(e->row_c);
    plena_free(e->xbuf);
    plena_free(e->tbuf);
    plena_free(e->obuf);
    plena_free(e->dma_bytes);
    plena_free(e->txn);
    plena_free(e->topk_keys);
    plena_free(e->xq_mem);
    plena_free(e);
}

const struct plena_settings *plena_emu_settings(const struct plena_emu *e)
{
    return &e->s;
}

/* ---------------------------------------------------------- state access */

uint16_t plena_emu_vram_get(const struct plena_emu *e, uint64_t a)
{
    uint64_t row = a / e->vlen;
    if (row >= e->vram_rows) return 0;
    return emu_vram_row_ro(e, row)[a % e->vlen];
}

void plena_emu_vram_set(struct plena_emu *e, uint64_t a, uint16_t v)
{
    uint64_t row = a / e->vlen;
    if (row >= e->vram_rows) return;
    uint16_t *r = emu_vram_row_rw(e, row);
    if (r) r[a % e->vlen] = v;
}

float plena_emu_mram_get(const struct plena_emu *e, uint64_t a)
{
    if (a >= (uint64_t)e->tiles * e->mlen2) return 0.0f;
    return e->mram[a];
}

void plena_emu_mram_set(struct plena_emu *e, uint64_t a, float v)
{
    if (a < (uint64_t)e->tiles * e->mlen2) e->mram[a] = v;
}

uint16_t plena_emu_fpsram_get(const struct plena_emu *e, uint32_t i)
{
    return i < e->fp_depth ? e->fpsram[i] : 0;
}

void plena_emu_fpsram_set(struct plena_emu *e, uint32_t i, uint16_t v)
{
    if (i < e->fp_depth) e->fpsram[i] = v;
}

uint32_t plena_emu_intsram_get(const struct plena_emu *e, uint32_t i)
{
    return i < e->int_depth ? e->intsram[i] : 0;
}

void plena_emu_intsram_set(struct plena_emu *e, uint32_t i, uint32_t v)
{
    if (i < e->int_depth) e->intsram[i] = v;
}

uint32_t plena_emu_gp_get(const struct plena_emu *e, unsigned r)
{
    return e->g[r & 15];
}

uint16_t plena_emu_fp_get(const struct plena_emu *e, unsigned r)
{
    return e->f[r & 7];
}

int plena_emu_hbm_read(const struct plena_emu *e, uint64_t addr, void *dst, size_t n)
{
    emu_hbm_read(e, addr, dst, n);
    return 0;
}

int plena_emu_hbm_write(struct plena_emu *e, uint64_t addr, const void *src, size_t n,
                        struct plena_err *err)
{
    if (addr > e->hbm_size || n > e->hbm_size - addr)
        return PLENA_FAIL(err, PLENA_E_INPUT, "hbm",
                          "write of %zu bytes at %llu exceeds HBM_SIZE %llu", n,
                          (unsigned long long)addr, (unsigned long long)e->hbm_size);
    if (emu_hbm_write(e, addr, src, n))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "hbm", "out of memory");
    return 0;
}

/* -------------------------------------------------------------- loaders */

static int open_sized(const char *path, int *fd, uint64_t *size, struct plena_err *err)
{
    /* non-blocking: opening a FIFO for reading would wait for a writer
     * before fstat could refuse it (no effect on a regular file) */
    *fd = open(path, O_RDONLY | O_NONBLOCK);
    if (*fd < 0) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) || !S_ISREG(st.st_mode)) {
        close(*fd);
        return PLENA_FAIL(err, PLENA_E_INPUT, path,
                          "not a regular file (a device, FIFO or directory cannot be an image)");
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Opens an SRAM preload (docs/formats.md "SRAM and VRAM preload images"): its
 * size must be a multiple of `elem` bytes and at most `max`; `what` names the
 * memory and `limit` how max comes from the settings, for the message. */
static int open_preload(const char *path, unsigned elem, uint64_t max, const char *what,
                        const char *limit, int *fd, uint64_t *size, struct plena_err *err)
{
    int orc = open_sized(path, fd, size, err);
    if (orc) return orc;
    if (*size % elem || *size > max) {
        close(*fd);
        char shape[32];
        if (elem == 2)
            snprintf(shape, sizeof shape, "an even size");
        else
            snprintf(shape, sizeof shape, "a multiple of %u", elem);
        return PLENA_FAIL(err, PLENA_E_INPUT, path,
                          "%s preload is %llu bytes: expected %s of at most %llu bytes (%s)", what,
                          (unsigned long long)*size, shape, (unsigned long long)max, limit);
    }
    return 0;
}

/* open_preload, then the whole file into *buf (plena_free). */
static int read_preload(const char *path, unsigned elem, uint64_t max, const char *what,
                        const char *limit, uint8_t **buf, uint64_t *size, struct plena_err *err)
{
    int fd;
    int orc = open_preload(path, elem, max, what, limit, &fd, size, err);
    if (orc) return orc;
    *buf = plena_malloc(*size ? (size_t)*size : 1);
    if (!*buf) {
        close(fd);
        return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    }
    int rc = read_full(fd, *buf, (size_t)*size);
    close(fd);
    if (rc) {
        plena_free(*buf);
        *buf = NULL;
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "read error");
    }
    return 0;
}

/* Numerics 7: file byte i is HBM byte i; longer than HBM_SIZE is invalid. */
int plena_emu_load_hbm_file(struct plena_emu *e, const char *path, struct plena_err *err)
{
    int fd;
    uint64_t size;
    int orc = open_sized(path, &fd, &size, err);
    if (orc) return orc;
    if (size > e->hbm_size) {
        close(fd);
        return PLENA_FAIL(err, PLENA_E_INPUT, path,
                          "HBM image is %llu bytes, larger than HBM_SIZE %llu bytes",
                          (unsigned long long)size, (unsigned long long)e->hbm_size);
    }
    const uint8_t *map = NULL;
    if (size > 0) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int en = errno;
            close(fd);
            return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot map %llu bytes: %s",
                              (unsigned long long)size, strerror(en));
        }
        map = m;
    }
    close(fd);
    /* Loading is "copy the file to address 0": earlier contents are replaced. */
    hbm_drop_overlay(e);
    hbm_unmap(e);
    e->image = map;
    e->image_len = size;
    /* a large image is not kept resident as a whole (docs/machine.md "HBM") */
    e->image_read = 0;
    if (!e->image_drop_set)
        e->image_drop_every = size >= PLENA_EMU_IMAGE_DROP_MIN ? PLENA_EMU_IMAGE_DROP_EVERY : 0;
    e->hbm_hi = (size + 63) & ~(uint64_t)63;
    return 0;
}

/* An FP or INT SRAM preload
 * (docs/formats.md "SRAM and VRAM preload images"): at most depth elements
 * of elem bytes each, named "<depth_key> <depth> x <elem>" in the size
 * message; the SRAM is cleared and then put() stores element i from its
 * file bytes. */
static int load_sram(struct plena_emu *e, const char *path, unsigned elem, uint32_t depth,
                     const char *what, const char *depth_key, void *sram,
                     void (*put)(struct plena_emu *e, uint64_t i, const uint8_t *b),
                     struct plena_err *err)
{
    char limit[64];
    snprintf(limit, sizeof limit, "%s %u x %u", depth_key, depth, elem);
    uint8_t *buf;
    uint64_t size;
    int rc = read_preload(path, elem, (uint64_t)elem * depth, what, limit, &buf, &size, err);
    if (rc) return rc;
    memset(sram, 0, (size_t)depth * elem);
    for (uint64_t i = 0; i < size / elem; i++)
        put(e, i, buf + elem * i);
    plena_free(buf);
    return 0;
}

/* fp16 in the file, stored as BF16 (RNE of the exact fp16 value). */
static void put_fp(struct plena_emu *e, uint64_t i, const uint8_t *b)
{
    uint16_t h = (uint16_t)(b[0] | (b[1] << 8));
    e->fpsram[i] = plena_num_bf16_from_f32(plena_num_fp16_to_f32(h));
}

static void put_int(struct plena_emu *e, uint64_t i, const uint8_t *b)
{
    e->intsram[i] =
        (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

int plena_emu_load_fpsram_file(struct plena_emu *e, const char *path, struct plena_err *err)
{
    return load_sram(e, path, 2, e->fp_depth, "FP SRAM", "FP_SRAM_DEPTH", e->fpsram, put_fp, err);
}

int plena_emu_load_intsram_file(struct plena_emu *e, const char *path, struct plena_err *err)
{
    return load_sram(e, path, 4, e->int_depth, "INT SRAM", "INT_SRAM_DEPTH", e->intsram, put_int,
                     err);
}

/* Streams the file page by page; all-zero pages stay absent, so a mostly-zero
 * preload keeps VRAM sparse. */
int plena_emu_load_vram_file(struct plena_emu *e, const char *path, struct plena_err *err)
{
    char limit[96];
    snprintf(limit, sizeof limit, "VECTOR_SRAM_SIZE %llu x VLEN %u x 2",
             (unsigned long long)e->vram_rows, e->vlen);
    int fd;
    uint64_t size;
    int orc = open_preload(path, 2, e->vram_rows * e->vlen * 2, "VRAM", limit, &fd, &size, err);
    if (orc) return orc;
    size_t page_bytes = (size_t)e->page_elems * 2;
    uint8_t *buf = plena_malloc(page_bytes);
    if (!buf) {
        close(fd);
        return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    }
    int rc = 0;
    for (uint64_t p = 0; p < e->n_vpages; p++) {
        uint64_t start = p * page_bytes;
        size_t n = 0;
        if (start < size) n = size - start > page_bytes ? page_bytes : (size_t)(size - start);
        if (n && read_full(fd, buf, n)) {
            rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "read error at byte %llu",
                            (unsigned long long)start);
            break;
        }
        int nonzero = 0;
        for (size_t i = 0; i < n && !nonzero; i++)
            nonzero = buf[i] != 0;
        if (!nonzero) {
            plena_free(e->vpages[p]);
            e->vpages[p] = NULL;
            continue;
        }
        if (!e->vpages[p]) e->vpages[p] = plena_malloc(page_bytes);
        if (!e->vpages[p]) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
            break;
        }
        uint16_t *pg = e->vpages[p];
        for (size_t i = 0; i < n / 2; i++)
            pg[i] = (uint16_t)(buf[2 * i] | (buf[2 * i + 1] << 8));
        memset(pg + n / 2, 0, page_bytes - (n / 2) * 2);
    }
    plena_free(buf);
    close(fd);
    return rc;
}

/* ---------------------------------------------------------------- dumps */

/* Streaming counterpart of plena_file_write_atomic (same tmp + fsync + rename
 * protocol), so a 512 MiB VRAM dump never exists in memory at once. Runs of
 * zeros (a VRAM page never written, a buffer of zero bytes) become holes of
 * a sparse file instead of written blocks: the file's bytes and size are
 * the same (docs/formats.md "Dumps"), but a decode whose tensors end at
 * 128 KiB no longer writes and fsyncs 512 MiB. */
struct awriter {
    int fd;
    char path[4096], tmp[4200];
    uint8_t buf[65536];
    size_t n;
    uint64_t off; /* file position: bytes written or skipped so far */
    int failed;
};

static int aw_open(struct awriter *w, const char *dir, const char *name, struct plena_err *err)
{
    static unsigned counter;
    w->n = 0;
    w->off = 0;
    w->failed = 0;
    w->fd = -1;
    if (plena_path_join(w->path, sizeof w->path, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    int rc = plena_file_check_output(w->path, err);
    if (rc) return rc;
    for (int attempt = 0; attempt < 100 && w->fd < 0; attempt++) {
        snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld.%u", w->path, (long)getpid(), counter++);
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (w->fd < 0 && errno != EEXIST) break;
    }
    if (w->fd < 0)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, w->path, "cannot create: %s", strerror(errno));
    return 0;
}

/* Moves the file position n bytes on without writing (a hole, read as zeros). */
static void aw_seek(struct awriter *w, uint64_t n)
{
    if (w->failed || n == 0) return;
    if (n > (uint64_t)INT64_MAX - w->off || lseek(w->fd, (off_t)n, SEEK_CUR) < 0)
        w->failed = errno ? errno : EIO;
    else
        w->off += n;
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        acc |= v;
    }
    for (; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

static void aw_flush(struct awriter *w)
{
    const uint8_t *p = w->buf;
    size_t left = w->n;
    if (left == sizeof w->buf && all_zero(p, left)) {
        w->n = 0;
        aw_seek(w, left);
        return;
    }
    w->off += left; /* on failure the position no longer matters */
    while (left > 0 && !w->failed) {
        ssize_t r = write(w->fd, p, left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            w->failed = errno ? errno : EIO;
            break;
        }
        p += r;
        left -= (size_t)r;
    }
    w->n = 0;
}

static void aw_put(struct awriter *w, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        size_t room = sizeof w->buf - w->n;
        size_t c = n < room ? n : room;
        memcpy(w->buf + w->n, p, c);
        w->n += c;
        p += c;
        n -= c;
        if (w->n == sizeof w->buf) aw_flush(w);
    }
}

static int aw_close(struct awriter *w, struct plena_err *err)
{
    aw_flush(w);
    /* a trailing hole has no byte written after it: set the size */
    if (!w->failed && ftruncate(w->fd, (off_t)w->off)) w->failed = errno;
    if (!w->failed && fsync(w->fd)) w->failed = errno;
    if (close(w->fd) && !w->failed) w->failed = errno;
    if (!w->failed && rename(w->tmp, w->path)) w->failed = errno;
    if (w->failed) {
        unlink(w->tmp);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, w->path, "cannot write: %s", strerror(w->failed));
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", w->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    int dfd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

static void put_le16(struct awriter *w, const uint16_t *v, size_t n)
{
    uint8_t tmp[4096];
    while (n > 0) {
        size_t c = n > sizeof tmp / 2 ? sizeof tmp / 2 : n;
        for (size_t i = 0; i < c; i++) {
            tmp[2 * i] = (uint8_t)v[i];
            tmp[2 * i + 1] = (uint8_t)(v[i] >> 8);
        }
        aw_put(w, tmp, 2 * c);
        v += c;
        n -= c;
    }
}

/* n zero bytes: buffered ones up to the buffer boundary, then a hole. */
static void aw_zeros(struct awriter *w, uint64_t n)
{
    static const uint8_t zero[4096];
    while (n > 0 && w->n > 0) {
        size_t room = sizeof w->buf - w->n;
        size_t c = n < room ? (size_t)n : room;
        if (c > sizeof zero) c = sizeof zero;
        aw_put(w, zero, c);
        n -= c;
    }
    aw_seek(w, n);
}

/* One dump file: `body` streams its contents into w (ctx is its own). */
typedef void dump_body(struct plena_emu *e, struct awriter *w, void *ctx);

static int dump_file(struct plena_emu *e, const char *dir, const char *name, dump_body *body,
                     void *ctx, struct plena_err *err)
{
    struct awriter *w = plena_malloc(sizeof *w);
    if (!w) return PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory");
    int rc = aw_open(w, dir, name, err);
    if (!rc) {
        body(e, w, ctx);
        rc = aw_close(w, err);
    }
    plena_free(w);
    return rc;
}

static void vram_body(struct plena_emu *e, struct awriter *w, void *ctx)
{
    (void)ctx;
    uint64_t left = e->vram_rows * e->vlen;
    for (uint64_t p = 0; p < e->n_vpages && !w->failed; p++) {
        size_t n = left > e->page_elems ? (size_t)e->page_elems : (size_t)left;
        if (e->vpages[p])
            put_le16(w, e->vpages[p], n);
        else
            aw_zeros(w, 2 * (uint64_t)n); /* never written: zeros */
        left -= n;
    }
}

static void mram_body(struct plena_emu *e, struct awriter *w, void *ctx)
{
    (void)ctx;
    uint64_t n = (uint64_t)e->tiles * e->mlen2;
    uint16_t tmp[2048];
    for (uint64_t i = 0; i < n;) {
        size_t c = n - i > 2048 ? 2048 : (size_t)(n - i);
        plena_num_bf16_row_from_f32(e->mram + i, tmp, c);
        put_le16(w, tmp, c);
        i += c;
    }
}

static void fpsram_body(struct plena_emu *e, struct awriter *w, void *ctx)
{
    (void)ctx;
    put_le16(w, e->fpsram, e->fp_depth);
}

static void intsram_body(struct plena_emu *e, struct awriter *w, void *ctx)
{
    (void)ctx;
    for (uint32_t i = 0; i < e->int_depth; i++) {
        uint32_t v = e->intsram[i];
        uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
        aw_put(w, b, 4);
    }
}

/* ctx: a page buffer of EMU_PAGE_BYTES (HBM is read through the overlay). */
static void hbm_body(struct plena_emu *e, struct awriter *w, void *ctx)
{
    uint8_t *pg = ctx;
    for (uint64_t a = 0; a < e->hbm_hi && !w->failed; a += EMU_PAGE_BYTES) {
        size_t n = e->hbm_hi - a > EMU_PAGE_BYTES ? EMU_PAGE_BYTES : (size_t)(e->hbm_hi - a);
        if (a >= e->image_len && !hbm_page(e, a >> HBM_PAGE_SHIFT)) {
            aw_zeros(w, n); /* neither preloaded nor written */
            continue;
        }
        emu_hbm_read(e, a, pg, n);
        aw_put(w, pg, n);
    }
}

static int dump_hbm(struct plena_emu *e, const char *dir, struct plena_err *err)
{
    uint8_t *pg = plena_malloc(EMU_PAGE_BYTES);
    if (!pg) return PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory");
    int rc = dump_file(e, dir, plena_emu_dump_file(PLENA_DUMP_HBM), hbm_body, pg, err);
    plena_free(pg);
    return rc;
}

const char *plena_emu_dump_file(unsigned dump_bit)
{
    switch (dump_bit) {
    case PLENA_DUMP_VRAM: return "vram_dump.bin";
    case PLENA_DUMP_MRAM: return "mram_dump.bin";
    case PLENA_DUMP_FPSRAM: return "fpsram_dump.bin";
    case PLENA_DUMP_INTSRAM: return "intsram_dump.bin";
    case PLENA_DUMP_HBM: return "hbm_dump.bin";
    }
    return NULL;
}

int plena_emu_write_dumps(struct plena_emu *e, const char *dir, unsigned mask,
                          struct plena_err *err)
{
    int rc = plena_mkdir_p(dir, err);
    if (!rc && (mask & PLENA_DUMP_VRAM))
        rc = dump_file(e, dir, plena_emu_dump_file(PLENA_DUMP_VRAM), vram_body, NULL, err);
    if (!rc && (mask & PLENA_DUMP_MRAM))
        rc = dump_file(e, dir, plena_emu_dump_file(PLENA_DUMP_MRAM), mram_body, NULL, err);
    if (!rc && (mask & PLENA_DUMP_FPSRAM))
        rc = dump_file(e, dir, plena_emu_dump_file(PLENA_DUMP_FPSRAM), fpsram_body, NULL, err);
    if (!rc && (mask & PLENA_DUMP_INTSRAM))
        rc = dump_file(e, dir, plena_emu_dump_file(PLENA_DUMP_INTSRAM), intsram_body, NULL, err);
    if (!rc && (mask & PLENA_DUMP_HBM)) rc = dump_hbm(e, dir, err);
    return rc;
}

/* ----------------------------------------------------------- trap report */

void plena_emu_format_trap(const struct plena_trap *t, const struct plena_program *prog, char *buf,
                           size_t n)
{
    const char *mn = plena_isa_info(t->opcode)->name;
    char loc[4200] = "";
    if (prog && prog->src_line && prog->source_path && t->pc < prog->n && prog->src_line[t->pc])
        snprintf(loc, sizeof loc, ", %s:%u", prog->source_path, prog->src_line[t->pc]);
    snprintf(buf, n, "trap at pc %u (%s%s): %s: %s (word 0x%08X)", t->pc, mn, loc,
             plena_trap_kind_name(t->kind), t->detail, t->word);
}
