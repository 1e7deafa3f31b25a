/* libFuzzer target: the .mem machine-code reader and the disassembler
 * (every word of the input, and every word the reader accepted). */
#include "fuzz_util.h"

#include "common/fileio.h"
#include "isa/disasm.h"
#include "isa/program.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plena_program p;
    struct plena_err err = {0};
    struct plena_buf b;
    plena_buf_init(&b);
    if (!plena_program_parse_mem((const char *)data, size, "f.mem", &p, &err)) {
        plena_disasm_words(p.words, p.n, &b, &err);
        plena_program_free(&p);
    }
    char line[PLENA_DISASM_MAX];
    for (size_t i = 0; i + 4 <= size; i += 4) {
        uint32_t w;
        memcpy(&w, data + i, 4);
        plena_disasm_word(w, line, sizeof line);
    }
    plena_buf_free(&b);
    return 0;
}
