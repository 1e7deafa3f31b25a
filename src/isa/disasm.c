/* The disassembler: see disasm.h. The operand list of each form is read from
 * the forms.def descriptor at print time (descriptors are tiny), so the
 * assembler and the disassembler cannot disagree about operand order. */
#include "isa/disasm.h"

#include <stdio.h>
#include <string.h>

#include "isa/isa.h"

static uint32_t field_value(const struct plena_insn *in, const char *f, size_t n)
{
    if (n == 2 && !memcmp(f, "rd", 2)) return in->rd;
    if (n == 3 && !memcmp(f, "rs1", 3)) return in->rs1;
    if (n == 3 && !memcmp(f, "rs2", 3)) return in->rs2;
    if (n == 3 && !memcmp(f, "rs3", 3)) return in->rs3;
    if (n == 6 && !memcmp(f, "funct1", 6)) return in->funct1;
    if (n == 3 && !memcmp(f, "imm", 3)) return in->imm;
    return 0;
}

static void set_field(struct plena_insn *in, const char *f, size_t n, uint32_t v)
{
    if (n == 2 && !memcmp(f, "rd", 2)) in->rd = v;
    if (n == 3 && !memcmp(f, "rs1", 3)) in->rs1 = v;
    if (n == 3 && !memcmp(f, "rs2", 3)) in->rs2 = v;
    if (n == 3 && !memcmp(f, "rs3", 3)) in->rs3 = v;
    if (n == 6 && !memcmp(f, "funct1", 6)) in->funct1 = v;
    if (n == 3 && !memcmp(f, "imm", 3)) in->imm = v;
}

/* Calls `fn` for every operand of the descriptor that has a field. */
struct opv {
    char kind[4];
    uint32_t v;
};

/* Also fills *canon with only the fields the canonical text carries, so the
 * caller can tell whether assembling the text gives the word back. */
static size_t operands(const char *d, const struct plena_insn *in, struct opv *o, size_t max,
                       struct plena_insn *canon)
{
    size_t n = 0;
    const char *p = d;
    while (*p && *p != '|' && n < max) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '|') break; /* the first alternative is the canonical form */
        if (*p == '?') p++;
        const char *ks = p;
        while (*p && *p != ':')
            p++;
        size_t kl = (size_t)(p - ks);
        if (*p) p++;
        const char *fs = p;
        while (*p && *p != ' ')
            p++;
        size_t fl = (size_t)(p - fs);
        if (fl == 1 && fs[0] == '-') continue; /* ignored operand: not part of the canonical form */
        if (kl >= sizeof o[n].kind) kl = sizeof o[n].kind - 1;
        memcpy(o[n].kind, ks, kl);
        o[n].kind[kl] = 0;
        o[n].v = field_value(in, fs, fl);
        set_field(canon, fs, fl, o[n].v);
        n++;
    }
    return n;
}

static size_t disasm_text(const struct plena_op_info *r, const struct opv *o, size_t no, char *buf,
                          size_t n);

size_t plena_disasm_word(uint32_t w, char *buf, size_t n)
{
    struct plena_insn in;
    plena_isa_decode(w, &in);
    const struct plena_op_info *r = plena_isa_info(in.op);
    int len;
    if (!r->valid) {
        len = snprintf(buf, n, ".word 0x%08X", w);
        return len < 0 ? 0 : (size_t)len;
    }
    struct opv o[8];
    struct plena_insn canon = {.op = in.op};
    size_t no = operands(plena_form_descriptor(r->form), &in, o, 8, &canon);
    for (size_t i = 0; i < no; i++)
        if (!strcmp(o[i].kind, "F") && o[i].v > 7) {
            len = snprintf(buf, n, ".word 0x%08X ; %s with FP register field %u (>= 8)", w, r->name,
                           o[i].v);
            return len < 0 ? 0 : (size_t)len;
        }
    uint32_t extra = w ^ plena_isa_encode(&canon);
    if (extra) {
        /* Bits outside the form's fields (ignored by every reader) would be
         * lost by the text: keep the word, show the text as a comment. */
        char text[PLENA_DISASM_MAX];
        disasm_text(r, o, no, text, sizeof text);
        len = snprintf(buf, n, ".word 0x%08X ; %s with unused bits 0x%08X set", w, text, extra);
        return len < 0 ? 0 : (size_t)len;
    }
    return disasm_text(r, o, no, buf, n);
}

/* The canonical text: mnemonic and operands. */
static size_t disasm_text(const struct plena_op_info *r, const struct opv *o, size_t no, char *buf,
                          size_t n)
{
    int len;
    size_t at = 0;
    len = snprintf(buf, n, "%s", r->name);
    at = len < 0 ? 0 : (size_t)len;
    for (size_t i = 0; i < no; i++) {
        const char *k = o[i].kind;
        const char *pre = !strcmp(k, "G")   ? "gp"
                          : !strcmp(k, "F") ? "f"
                          : !strcmp(k, "A") ? "a"
                                            : "";
        len = snprintf(buf + (at < n ? at : n), at < n ? n - at : 0, "%s%s%u", i ? ", " : " ", pre,
                       o[i].v);
        at += len < 0 ? 0 : (size_t)len;
    }
    return at;
}

int plena_disasm_words(const uint32_t *words, size_t n, struct plena_buf *out,
                       struct plena_err *err)
{
    char line[PLENA_DISASM_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        size_t l = plena_disasm_word(words[i], line, sizeof line - 1);
        if (l > sizeof line - 2) l = sizeof line - 2;
        line[l] = '\n';
        if (plena_buf_append(out, line, l + 1))
            return PLENA_FAIL(err, PLENA_E_NOMEM, "disasm", "out of memory at pc %zu", i);
    }
    return 0;
}
