/* PLENA disassembler (docs/machine.md "Disassembly"): one word -> canonical assembly with
 * every optional operand written out, `.word 0xXXXXXXXX` for Invalid
 * opcodes. Operand order and kinds come from forms.def; there is no
 * per-opcode printing code. It does not annotate bits outside the class. */
#ifndef PLENA_ISA_DISASM_H
#define PLENA_ISA_DISASM_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/fileio.h"

/* Longest line plena_disasm_word can produce, including the NUL. */
#define PLENA_DISASM_MAX 128

/* Writes the text of `w` into buf (n >= PLENA_DISASM_MAX never truncates).
 * Returns the text length. The exact inverse of the assembler: a word no
 * instruction text reproduces (undefined opcode, FP register field >= 8, bits
 * outside the form's fields) is written as `.word 0x...` plus a comment. */
size_t plena_disasm_word(uint32_t w, char *buf, size_t n);

/* Appends one line per word to `out`. PLENA_E_NOMEM when an append fails. */
int plena_disasm_words(const uint32_t *words, size_t n, struct plena_buf *out,
                       struct plena_err *err);

#endif
