/* A loaded PLENA program: machine words plus, when the assembly source is
 * known, the PC -> source line table and the stage labels of the label pass
 * (docs/profile.md "Stage attribution", docs/machine.md "Assembly syntax").
 *
 * Producers: the assembler (plena_asm_*), the .mem reader
 * (plena_program_read_mem) and plena_program_load (either, by extension).
 * Consumers: the emulator (words, src_line), the profiler (labels). */
#ifndef PLENA_ISA_PROGRAM_H
#define PLENA_ISA_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/fileio.h"

enum plena_attribution { PLENA_ATTR_LEGACY = 0, PLENA_ATTR_MARKERS = 1 };
/* The routed lowerings, one row each: id, the spelling of the
 * `@routed_lowering=` marker, layout.json and the profile, and the spelling
 * of options and results (docs/lowering.md "Expert-major"). UNSET first. */
#define PLENA_LOWERING_ROUTED(X)                                                                   \
    X(PAIR_MAJOR, "pair_major", "pair-major")                                                      \
    X(EXPERT_MAJOR, "expert_major", "expert-major")
#define PLENA_LOWERING_LIST(X) X(UNSET, "none", "none") PLENA_LOWERING_ROUTED(X)
enum plena_lowering {
#define PLENA_LOWERING_ID(id, marker, option) PLENA_LOWERING_##id,
    PLENA_LOWERING_LIST(PLENA_LOWERING_ID)
#undef PLENA_LOWERING_ID
};
/* The lowering `plena moe`, `plena replay` and `plena campaign` build when
 * --lowering is not given (the library's cfg default stays pair-major, the
 * form the cost tables, gates and R005 figures of docs/lowering.md describe). */
#define PLENA_LOWERING_DEFAULT        PLENA_LOWERING_EXPERT_MAJOR
#define PLENA_LOWERING_DEFAULT_OPTION "expert-major"
/* The spellings of a lowering (UNSET and out of range: "none"). */
const char *plena_lowering_marker(enum plena_lowering l);
const char *plena_lowering_option(enum plena_lowering l);
/* The option spellings of the routed lowerings ("pair-major",
 * "expert-major"), NULL-terminated: the choices of every --lowering. */
extern const char *const plena_lowering_options[];
/* "pair-major" or "expert-major" (an option value); -1 for anything else. */
int plena_lowering_parse_option(const char *s, enum plena_lowering *out);
/* A marker spelling ("none", "pair_major", "expert_major"); -1 otherwise. */
int plena_lowering_parse_marker(const char *s, enum plena_lowering *out);

struct plena_label {
    uint8_t stage;    /* enum plena_stage */
    uint8_t has_pair; /* 0: no pair; every u32 is a pair id (legacy comments use 4294967295) */
    uint32_t pair;    /* static pair id when has_pair */
};

struct plena_unresolved_marker {
    char name[128]; /* stage name as written (may be empty), or "pair=<v>", "routed_lowering=<v>" */
    uint32_t first_line; /* 1-based */
    uint32_t occurrences;
};

struct plena_labels {
    size_t n; /* labels (one per instruction line) */
    struct plena_label *v;
    enum plena_attribution mode;
    uint32_t stage_marker_count; /* stage-marker comment lines, resolved or not */
    size_t n_unresolved;
    struct plena_unresolved_marker *unresolved;
    enum plena_lowering lowering; /* first lowering marker, or UNSET */
    int routed_moe_markers_present;
};

struct plena_program {
    uint32_t *words;
    size_t n;
    char *source_path;  /* assembly file the labels and lines come from, or NULL */
    uint32_t *src_line; /* per PC, 1-based line in source_path; NULL when unknown */
    int has_labels;
    struct plena_labels labels;
    size_t asm_source_bytes, asm_source_lines;     /* 0 without assembly */
    size_t machine_code_bytes, machine_code_lines; /* .mem file figures (0 when assembled) */
};

void plena_program_free(struct plena_program *p); /* frees members; p itself is caller-owned */
void plena_labels_free(struct plena_labels *l);

/* Reads PLENA hex machine code (docs/formats.md "Machine code").
 * A bad token is PLENA_E_INPUT with "file:line: ..." naming the text. */
int plena_program_read_mem(const char *path, struct plena_program *out, struct plena_err *err);
int plena_program_parse_mem(const char *text, size_t len, const char *name,
                            struct plena_program *out, struct plena_err *err);

/* Writes `0x%08X\n` per word. */
int plena_program_write_mem(const char *path, const uint32_t *words, size_t n,
                            struct plena_err *err);

struct plena_asm_diags;
/* Loads `path`: *.asm is assembled in-process (lenient; the assembler's
 * warnings are appended to `warnings` when it is non-NULL, for the caller to
 * print), anything else is read as .mem. */
int plena_program_load(const char *path, struct plena_asm_diags *warnings,
                       struct plena_program *out, struct plena_err *err);

/* Label pass over assembly text (shared by `plena asm --stage-map` and the
 * emulator's --asm). Produces one label per instruction line. */
int plena_labels_from_asm(const char *text, size_t len, const char *name, struct plena_labels *out,
                          struct plena_err *err);

#endif
