/* PLENA assembler (docs/machine.md "Assembly syntax"): text -> struct
 * plena_program. Operand parsing is driven by isa.def + forms.def only; the
 * strict/lenient rules (docs/machine.md "Strict and lenient assembly"), the
 * upstream-encoder placement (docs/machine.md "Upstream encoder"), and the
 * shared line scanner the label pass (labels.c) uses so both see the same
 * instruction lines. The library never prints: warnings are returned in a
 * list. */
#ifndef PLENA_ISA_ASM_H
#define PLENA_ISA_ASM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../common/err.h"
#include "../isa/program.h"

struct plena_asm_opts {
    int strict;           /* the strict column of "Strict and lenient assembly"; 0 = lenient */
    int encoder_upstream; /* reproduce upstream placement, warn where it differs */
    int want_labels;      /* also run the label pass (labels.c) into out->labels */
};

/* One warning. Errors are not listed: the first error stops assembly and is
 * returned in struct plena_err (where = "file:line:col"). */
struct plena_asm_diag {
    uint32_t line, col; /* 1-based */
    char text[248];
};

/* Warning list. At most PLENA_ASM_MAX_DIAGS are kept (a 5M-line file full of
 * gp0 writes must not need gigabytes); n_total counts all of them. */
#define PLENA_ASM_MAX_DIAGS 1000
struct plena_asm_diags {
    char *name; /* file name the positions refer to */
    size_t n, cap;
    struct plena_asm_diag *v;
    size_t n_total;
};

void plena_asm_diags_free(struct plena_asm_diags *d);
/* "file:line:col: warning: text" into buf. */
const char *plena_asm_diag_format(const struct plena_asm_diags *d, size_t i, char *buf, size_t n);

/* Assembles `text` (len bytes; need not be NUL-terminated). `name` is the
 * file name used in diagnostics and stored as out->source_path. `warnings`
 * may be NULL. On error `out` is left empty (freed). */
int plena_asm_text(const char *text, size_t len, const char *name,
                   const struct plena_asm_opts *opts, struct plena_program *out,
                   struct plena_asm_diags *warnings, struct plena_err *err);
/* Reads `path` and assembles it. */
int plena_asm_file(const char *path, const struct plena_asm_opts *opts, struct plena_program *out,
                   struct plena_asm_diags *warnings, struct plena_err *err);

/* ---- The shared line scanner (assembler and label pass) ----
 * Lines split on LF; a CR before LF (in fact any trailing CR) is dropped. A
 * line is classified by its first non-blank character. */
enum plena_asm_line_kind {
    PLENA_ASM_LINE_BLANK,   /* empty after trimming */
    PLENA_ASM_LINE_COMMENT, /* first non-blank is ';' (markers live here) */
    PLENA_ASM_LINE_SLASH,   /* first non-blank starts "//" */
    PLENA_ASM_LINE_INSN, /* first non-blank is 'A'..'Z', or a ".word" directive: exactly one word */
    PLENA_ASM_LINE_OTHER /* anything else: an error for the assembler */
};

struct plena_asm_line {
    const char *s; /* line start (untrimmed) */
    size_t len;    /* without LF / trailing CR */
    size_t first;  /* offset of the first non-blank character (== len when blank) */
    size_t end;    /* offset just past the last non-blank character */
    uint32_t no;   /* 1-based line number */
    enum plena_asm_line_kind kind;
};

static inline int plena_asm_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* ".word" followed by a blank: the one directive, a raw 32-bit word (what
 * the disassembler prints for a word no instruction text reproduces). */
static inline int plena_asm_is_word_directive(const char *s, size_t n)
{
    return n >= 5 && !memcmp(s, ".word", 5) && (n == 5 || plena_asm_is_blank(s[5]) || s[5] == ';');
}

/* Iterator: *pos starts at 0, *lineno at 0. Returns 0 at end of text. */
static inline int plena_asm_next_line(const char *text, size_t len, size_t *pos, uint32_t *lineno,
                                      struct plena_asm_line *ln)
{
    size_t p = *pos;
    if (p >= len) return 0;
    const char *s = text + p;
    size_t rest = len - p;
    const char *nl = (const char *)memchr(s, '\n', rest);
    size_t n = nl ? (size_t)(nl - s) : rest;
    *pos = p + n + (n < rest ? 1 : 0);
    size_t l = n;
    while (l > 0 && s[l - 1] == '\r')
        l--;
    ln->s = s;
    ln->len = l;
    ln->no = ++*lineno;
    size_t f = 0;
    while (f < l && plena_asm_is_blank(s[f]))
        f++;
    size_t e = l;
    while (e > f && plena_asm_is_blank(s[e - 1]))
        e--;
    ln->first = f;
    ln->end = e;
    if (f == l) {
        ln->kind = PLENA_ASM_LINE_BLANK;
    } else if (s[f] == ';') {
        ln->kind = PLENA_ASM_LINE_COMMENT;
    } else if (s[f] == '/' && f + 1 < l && s[f + 1] == '/') {
        ln->kind = PLENA_ASM_LINE_SLASH;
    } else if ((s[f] >= 'A' && s[f] <= 'Z') || plena_asm_is_word_directive(s + f, l - f)) {
        ln->kind = PLENA_ASM_LINE_INSN;
    } else {
        ln->kind = PLENA_ASM_LINE_OTHER;
    }
    return 1;
}

#endif
