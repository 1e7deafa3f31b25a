/* libFuzzer target: assembly text -> plena_asm_text in both modes (lenient
 * and strict), with the label pass (the stage map's input) and, by the first
 * byte, the upstream encoder; a program that assembles is disassembled. A
 * crash, sanitizer report, leak or hang is a finding. */
#include "fuzz_util.h"

#include "common/fileio.h"
#include "isa/asm.h"
#include "isa/disasm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const int upstream = data[0] & 1;
    for (int strict = 0; strict < 2; strict++) {
        struct plena_asm_opts o = {
            .strict = strict, .encoder_upstream = upstream, .want_labels = 1};
        struct plena_program p;
        struct plena_asm_diags w = {0};
        struct plena_err err = {0};
        if (!plena_asm_text((const char *)data + 1, size - 1, "f.asm", &o, &p, &w, &err)) {
            struct plena_buf b;
            plena_buf_init(&b);
            plena_disasm_words(p.words, p.n, &b, &err);
            plena_buf_free(&b);
            plena_program_free(&p);
        }
        plena_asm_diags_free(&w);
    }
    struct plena_labels l;
    struct plena_err err = {0};
    if (!plena_labels_from_asm((const char *)data, size, "f.asm", &l, &err)) plena_labels_free(&l);
    return 0;
}
