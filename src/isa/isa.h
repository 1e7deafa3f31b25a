/* The PLENA ISA as data: opcodes, encoding classes, operand forms, units and
 * cost rules, all expanded from isa.def / forms.def / costs.def, plus the
 * word encoder and decoder. spec/isa.md is normative. */
#ifndef PLENA_ISA_ISA_H
#define PLENA_ISA_ISA_H

#include <stdint.h>

#include "../isa/encoding.h"

enum plena_op {
#define PLENA_OP(name, code, cls, form, unit, cost, ops, syn) PLENA_OP_##name = code,
#include "../isa/isa.def"
#undef PLENA_OP
    PLENA_OP_COUNT /* 0x39: opcodes >= this decode as invalid */
};

enum plena_class {
    PLENA_CLASS_R,
    PLENA_CLASS_I18,
    PLENA_CLASS_I22,
    PLENA_CLASS_D,
    PLENA_CLASS_N,
    PLENA_CLASS_INV
};

enum plena_form {
#define PLENA_FORM(id, desc) PLENA_FORM_##id,
#include "../isa/forms.def"
#undef PLENA_FORM
    PLENA_FORM_COUNT
};

enum plena_unit {
    PLENA_UNIT_MATRIX,
    PLENA_UNIT_VECTOR,
    PLENA_UNIT_SCALAR,
    PLENA_UNIT_DMA,
    PLENA_UNIT_CONTROL,
    PLENA_UNIT_NONE
};

enum plena_cost {
#define PLENA_COST_RULE(id, text)         PLENA_COST_##id,
#define PLENA_LATENCY(key, en, dis, used) PLENA_COST_##key,
#include "../isa/costs.def"
#undef PLENA_COST_RULE
#undef PLENA_LATENCY
    PLENA_COST_COUNT
};

/* Latency keys alone, 0-based, in costs.def order. */
enum plena_latency {
#define PLENA_LATENCY(key, en, dis, used) PLENA_LAT_##key,
#include "../isa/costs.def"
#undef PLENA_LATENCY
    PLENA_LAT_COUNT
};

struct plena_op_info {
    const char *name; /* mnemonic; INVALID_xx for invalid rows */
    uint8_t code;
    enum plena_class cls;
    enum plena_form form;
    enum plena_unit unit;
    enum plena_cost cost;
    const char *operands; /* canonical operand list (docs) */
    const char *synopsis;
    int valid; /* 0 for invalid opcodes */
};

/* A decoded instruction: every field extracted (imm is imm18 or imm22 per the
 * class, 0 for R/D/N). Field values are raw: range rules (FP field < 8, ...)
 * are checked when the instruction executes. */
struct plena_insn {
    uint8_t op; /* enum plena_op; >= PLENA_OP_COUNT never stored: decodes to INVALID_00's class */
    uint8_t rd, rs1, rs2, rs3, funct1;
    uint32_t imm;
};

/* Info for opcode 0..63 (0x39..0x3F return an "invalid" row). Never NULL. */
const struct plena_op_info *plena_isa_info(unsigned opcode);
/* Opcode by mnemonic (exact, case-sensitive); -1 when unknown or invalid. */
int plena_isa_lookup(const char *name, unsigned len);

/* Total decode: every word decodes. For invalid opcodes insn->op is the raw
 * opcode value and plena_isa_info(op)->valid is 0. */
void plena_isa_decode(uint32_t word, struct plena_insn *insn);
/* Encodes by class: fields outside the class are not placed (they are 0). */
uint32_t plena_isa_encode(const struct plena_insn *insn);

const char *plena_class_name(enum plena_class c);
const char *plena_form_descriptor(enum plena_form f);
const char *plena_unit_name(enum plena_unit u);
const char *plena_cost_name(enum plena_cost c);
/* Latency key name ("VECTOR_ADD_CYCLES") and reference column values. */
const char *plena_latency_name(enum plena_latency k);
int plena_latency_reference(enum plena_latency k, int dc_en);
/* For a cost that is a latency key, its enum plena_latency; else -1. */
int plena_cost_latency(enum plena_cost c);

#endif
