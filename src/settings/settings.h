/* Machine settings from plena_settings.toml (docs/formats.md
 * "Settings file", docs/timing.md "Clock" and "HBM model").
 *
 * Policy: no per-key fallback. Every required key of the file in use must be
 * present and valid, else loading fails naming the dotted key (and line).
 * Only the documented optional keys have defaults. When no file is
 * given or found, the built-in byte copy of configs/plena_settings.toml is
 * used (config_path empty). Unknown keys under CONFIG, LATENCY and HBM are
 * warnings collected in the struct; this module never prints. */
#ifndef PLENA_SETTINGS_SETTINGS_H
#define PLENA_SETTINGS_SETTINGS_H

#include <stdint.h>

#include <stddef.h>

#include "../common/err.h"
#include "../common/fileio.h"
#include "../isa/isa.h"
#include "../num/num.h"

/* HBM storage type of one DMA stream (PRECISION.HBM_*_TYPE). */
enum plena_hbm_type_kind { PLENA_HBM_MX = 0, PLENA_HBM_BF16 = 1, PLENA_HBM_FP16 = 2 };
struct plena_hbm_type {
    enum plena_hbm_type_kind kind;
    uint32_t block; /* MX block size (8 or 32); 0 for plain types */
};

enum plena_hbm_model_kind { PLENA_HBM_MODEL_HBM2 = 0, PLENA_HBM_MODEL_IDEAL = 1 };

/* [TRANSACTIONAL.HBM] parameters; all have defaults (docs/timing.md "HBM model"). */
struct plena_hbm_params {
    enum plena_hbm_model_kind model;
    uint64_t tck_ps;
    uint32_t channels, pseudo_channels, bank_groups, banks_per_group;
    uint32_t row_bytes;
    uint32_t address_hash_bit;
    uint32_t row_idle_close;
    uint32_t nBL, nCL, nCWL, nRCD, nRP, nRAS, nRC, nRTP, nWR, nWTR, nRRDS, nRRDL, nFAW;
    uint32_t nREFI, nRFC;
};

#define PLENA_SETTINGS_MAX_WARNINGS 16
/* The largest CONFIG.CLOCK_PERIOD_PS and HBM.TCK_PS: a cycle count below
 * 2^32 times it stays below 2^64 ps (docs/formats.md "Settings file"). */
#define PLENA_SETTINGS_PERIOD_MAX_PS 1000000000u
/* The largest settings file read (the reference file is about 8 KiB). */
#define PLENA_SETTINGS_MAX_BYTES ((size_t)1 << 20)

struct plena_settings {
    /* [TRANSACTIONAL.CONFIG] */
    int64_t dc_en;
    uint32_t max_loop_instructions;
    uint32_t blen, hlen, mlen, vlen, broadcast_amount;
    uint64_t hbm_size;
    uint32_t matrix_sram_size; /* rows of MLEN elements */
    uint64_t vector_sram_size; /* rows of VLEN elements */
    uint32_t hbm_m_prefetch_amount, hbm_v_prefetch_amount, hbm_v_writeback_amount;
    uint32_t fp_sram_depth, int_sram_depth;
    enum plena_mx_mode mx_mode;
    uint64_t clock_period_ps;
    /* [TRANSACTIONAL.PRECISION] */
    struct plena_hbm_type hbm_m_weight_type, hbm_m_kv_type, hbm_v_act_type, hbm_v_kv_type;
    /* [TRANSACTIONAL.LATENCY]: both columns, and the active one per DC_EN */
    uint32_t latency_en[PLENA_LAT_COUNT], latency_dis[PLENA_LAT_COUNT];
    uint32_t latency[PLENA_LAT_COUNT];
    /* [TRANSACTIONAL.HBM] */
    struct plena_hbm_params hbm;
    /* CONFIG.HBM_CHANNELS when the file has it (it then equals hbm.channels), else 0 */
    uint32_t config_hbm_channels;
    /* provenance */
    char config_path[4096]; /* empty for the built-in copy */
    /* Optional keys that took their default, one "KEY = value" per line
     * ('\n'-separated; HBM keys as "HBM.nCL = 7"), for the startup listing
     * `settings: <line> (default)`. */
    char defaults_used[1024];
    /* Warnings ("<file>:<line>: <dotted key>: unknown key ignored"), for the
     * CLI to print. n_warnings counts all; only the first MAX are kept. */
    unsigned n_warnings;
    char warnings[PLENA_SETTINGS_MAX_WARNINGS][256];
};

/* Loads with the lookup order of docs/formats.md "Settings file": explicit path, then
 * $PLENA_SETTINGS_TOML, ./plena_settings.toml, ../plena_settings.toml, else the
 * built-in copy. `path` may be NULL. Errors are PLENA_E_INPUT with the
 * documented message forms (file:line: dotted.key: ...). */
int plena_settings_load(const char *path, struct plena_settings *s, struct plena_err *err);
/* Parses settings text (name is used in messages). */
int plena_settings_parse(const char *text, size_t len, const char *name, struct plena_settings *s,
                         struct plena_err *err);
/* The built-in reference settings (never fails). */
void plena_settings_reference(struct plena_settings *s);
/* The embedded copy of configs/plena_settings.toml. */
const char *plena_settings_reference_text(void);

/* Applies one override "TABLE.KEY=VALUE" (TABLE one of CONFIG, LATENCY, HBM;
 * LATENCY sets the active column) and re-validates. Used by gates --set. */
int plena_settings_override(struct plena_settings *s, const char *assignment,
                            struct plena_err *err);

/* Applies several overrides, then validates once (so "CONFIG.MLEN=32" and
 * "CONFIG.VLEN=32" can be given together). On error `s` is unchanged; the
 * error's where is "--set <assignment>" and its msg names the dotted key. */
int plena_settings_override_many(struct plena_settings *s, const char *const *assignments,
                                 size_t n_assignments, struct plena_err *err);

/* Writes a complete settings file equivalent to `s` (every key explicit,
 * including the optional ones and the [TRANSACTIONAL.HBM] table), such that
 * parsing it gives settings equal to `s` (plena_settings_equal). Returns 0,
 * or PLENA_E_NOMEM if the buffer ran out of memory. */
int plena_settings_to_toml(const struct plena_settings *s, struct plena_buf *out);

/* 1 if every machine value (CONFIG, PRECISION, LATENCY, HBM) is equal;
 * provenance, defaults_used and warnings are not compared. */
int plena_settings_equal(const struct plena_settings *a, const struct plena_settings *b);

/* The effective numeric [TRANSACTIONAL.HBM] parameters in docs/timing.md "HBM model"
 * order (TCK_PS .. nRFC; MODEL is a string: plena_settings_hbm_model_name).
 * Fills at most `max` pairs (names/values may be NULL when max is 0) and
 * returns the total number of parameters. */
size_t plena_settings_hbm_params(const struct plena_settings *s, const char **names,
                                 uint64_t *values, size_t max);
/* "hbm2" / "ideal"; "plena" / "ocp". */
const char *plena_settings_hbm_model_name(enum plena_hbm_model_kind m);
const char *plena_settings_mx_mode_name(enum plena_mx_mode m);

/* Derived quantities. */
static inline uint64_t plena_settings_vram_elems(const struct plena_settings *s)
{
    return s->vector_sram_size * (uint64_t)s->vlen;
}
static inline uint32_t plena_settings_mram_tiles(const struct plena_settings *s)
{
    return s->matrix_sram_size / s->mlen;
}

#endif
