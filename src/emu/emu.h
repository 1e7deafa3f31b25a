/* Functional PLENA emulator (docs/machine.md, docs/numerics.md).
 *
 * The emulator computes architectural state only. Timing and profiling
 * observe it through an event record filled per executed instruction
 * (struct plena_emu_event), so functional results never depend on them
 * (Spike's fast_/logged_ split). Traps are results, not errors: the run
 * stops, the trap records pc, opcode, word, source line and detail. */
#ifndef PLENA_EMU_EMU_H
#define PLENA_EMU_EMU_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../isa/isa.h"
#include "../isa/program.h"
#include "../settings/settings.h"

enum plena_trap_kind {
    PLENA_TRAP_NONE = 0,
#define PLENA_TRAP(id, name) PLENA_TRAP_##id,
#include "../emu/traps.def"
#undef PLENA_TRAP
    PLENA_TRAP_COUNT
};
const char *plena_trap_kind_name(enum plena_trap_kind k);

struct plena_trap {
    enum plena_trap_kind kind;
    uint32_t pc;
    uint32_t word;
    uint8_t opcode;
    char detail[256];
};

/* One 64-byte HBM transaction, in the order of docs/machine.md "HBM DMA". */
struct plena_hbm_txn {
    uint64_t addr; /* byte address, multiple of 64 */
    uint8_t is_write;
};

/* Filled for every executed (non-trapping) instruction before the observer
 * is called. Register values are those read BEFORE the instruction executed
 * (what the overlap classifier of docs/timing.md "Overlap overlay" needs). */
struct plena_emu_event {
    uint32_t pc;
    uint32_t word;
    uint8_t op;                  /* enum plena_op */
    uint8_t f0_skip;             /* FP op / reduction with rd = f0: executed as a 0-cost no-op */
    uint32_t topk_experts;       /* V_TOPK: E of the shape used */
    uint32_t g_rd, g_rs1, g_rs2; /* G[rd], G[rs1], G[rs2] before execution */
    size_t n_txn;                /* HBM transactions of an H_* instruction */
    const struct plena_hbm_txn *txn; /* valid during the callback only */
};

typedef void (*plena_emu_observer)(void *ctx, const struct plena_emu_event *ev);

enum plena_run_status { PLENA_RUN_COMPLETED = 0, PLENA_RUN_TRAPPED = 1 };

struct plena_emu_result {
    enum plena_run_status status;
    uint64_t instructions_executed;
    struct plena_trap trap; /* kind NONE when completed */
};

struct plena_emu;

/* Allocates the machine for `s` (the settings are copied). VRAM and HBM are
 * sparse (pages materialise on first write). hbm_size 0 = settings value. */
int plena_emu_new(const struct plena_settings *s, uint64_t hbm_size, struct plena_emu **out,
                  struct plena_err *err);
void plena_emu_free(struct plena_emu *emu);

/* Preloads (docs/formats.md "HBM image" and "SRAM and VRAM preload images"); invalid
 * sizes are PLENA_E_INPUT naming the file and its size. The HBM image is mapped, not
 * copied. */
int plena_emu_load_hbm_file(struct plena_emu *emu, const char *path, struct plena_err *err);
/* A mapped image of at least PLENA_EMU_IMAGE_DROP_MIN bytes is not kept
 * resident as a whole: whenever DMA reads may have touched
 * PLENA_EMU_IMAGE_DROP_EVERY bytes of its pages (a strided 64-byte row
 * counts its whole page) they are released (read again from the page cache when used), so a
 * run's resident memory stays near its working set (docs/machine.md "HBM").
 * No result depends on it. plena_emu_set_image_drop overrides the interval
 * (0: never; tests); plena_emu_image_drops counts the releases. */
#define PLENA_EMU_IMAGE_DROP_MIN   ((uint64_t)2 << 30)
#define PLENA_EMU_IMAGE_DROP_EVERY ((uint64_t)1 << 30)
void plena_emu_set_image_drop(struct plena_emu *emu, uint64_t every_bytes);
uint64_t plena_emu_image_drops(const struct plena_emu *emu);
int plena_emu_load_fpsram_file(struct plena_emu *emu, const char *path, struct plena_err *err);
int plena_emu_load_intsram_file(struct plena_emu *emu, const char *path, struct plena_err *err);
int plena_emu_load_vram_file(struct plena_emu *emu, const char *path, struct plena_err *err);

/* Runs `prog` from pc 0 to the end or a trap. `obs` may be NULL
 * (functional-only). Returns 0 when the run happened (completed or trapped:
 * see res->status), non-zero on an error that prevented running. */
/* Bounds of the next runs: at most max_instructions executed (0 = none),
 * at most max_seconds of wall time (0 = none), and `stop` (may be NULL; a
 * signal handler sets it) looked at every 2^16 instructions. Each ends the
 * run as a trap (instruction_limit, time_limit, interrupted) at the next
 * instruction, so dumps and a partial profile can still be written. */
void plena_emu_set_limits(struct plena_emu *emu, uint64_t max_instructions, double max_seconds,
                          const volatile sig_atomic_t *stop);

int plena_emu_run(struct plena_emu *emu, const struct plena_program *prog, plena_emu_observer obs,
                  void *obs_ctx, struct plena_emu_result *res, struct plena_err *err);

/* One-line trap message of docs/machine.md "After a trap":
 * "trap at pc N (MNEMONIC, file:line): kind: detail (word 0xXXXXXXXX)". */
void plena_emu_format_trap(const struct plena_trap *t, const struct plena_program *prog, char *buf,
                           size_t n);

/* Dumps (docs/formats.md "Dumps"). */
enum plena_dump_mask {
    PLENA_DUMP_VRAM = 1,
    PLENA_DUMP_MRAM = 2,
    PLENA_DUMP_FPSRAM = 4,
    PLENA_DUMP_INTSRAM = 8,
    PLENA_DUMP_HBM = 16,
    PLENA_DUMP_DEFAULT = 1 | 2 | 4 | 8
};
int plena_emu_write_dumps(struct plena_emu *emu, const char *dir, unsigned mask,
                          struct plena_err *err);
/* File name of one dump (a single PLENA_DUMP_* bit): the upstream names
 * "vram_dump.bin", "mram_dump.bin", "fpsram_dump.bin", "intsram_dump.bin",
 * "hbm_dump.bin"; NULL for anything else. */
const char *plena_emu_dump_file(unsigned dump_bit);

/* State access (tests, reference comparison, replay). */
uint16_t plena_emu_vram_get(const struct plena_emu *emu, uint64_t elem_addr); /* BF16 bits */
void plena_emu_vram_set(struct plena_emu *emu, uint64_t elem_addr, uint16_t bf16);
float plena_emu_mram_get(const struct plena_emu *emu, uint64_t elem_addr);
void plena_emu_mram_set(struct plena_emu *emu, uint64_t elem_addr, float v); /* exact f32 */
uint16_t plena_emu_fpsram_get(const struct plena_emu *emu, uint32_t i);
void plena_emu_fpsram_set(struct plena_emu *emu, uint32_t i, uint16_t bf16);
uint32_t plena_emu_intsram_get(const struct plena_emu *emu, uint32_t i);
void plena_emu_intsram_set(struct plena_emu *emu, uint32_t i, uint32_t v);
uint32_t plena_emu_gp_get(const struct plena_emu *emu, unsigned r);
uint16_t plena_emu_fp_get(const struct plena_emu *emu, unsigned r); /* BF16 bits */
int plena_emu_hbm_read(const struct plena_emu *emu, uint64_t addr, void *dst, size_t n);
int plena_emu_hbm_write(struct plena_emu *emu, uint64_t addr, const void *src, size_t n,
                        struct plena_err *err);
const struct plena_settings *plena_emu_settings(const struct plena_emu *emu);

#endif
