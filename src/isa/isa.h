/* The PLENA ISA as data: opcodes, encoding classes, operand forms, units,
 * cost rules and the state each opcode reads and writes, all expanded from
 * isa.def / forms.def / costs.def / columns.def, plus the word encoder and
 * decoder. docs/machine.md describes the machine they encode. */
#ifndef PLENA_ISA_ISA_H
#define PLENA_ISA_ISA_H

#include <stdint.h>

#include "../isa/encoding.h"

enum plena_op {
#define PLENA_OP(name, code, cls, form, unit, cost, rd, wr, flow, ops, syn) PLENA_OP_##name = code,
#include "../isa/isa.def"
#undef PLENA_OP
    PLENA_OP_COUNT /* 0x3A: opcodes >= this decode as invalid */
};

enum plena_class {
#define PLENA_CLASS(id, name, fields) PLENA_CLASS_##id,
#include "../isa/columns.def"
#undef PLENA_CLASS
    PLENA_CLASS_COUNT
};

enum plena_form {
#define PLENA_FORM(id, desc) PLENA_FORM_##id,
#include "../isa/forms.def"
#undef PLENA_FORM
    PLENA_FORM_COUNT
};

enum plena_unit {
#define PLENA_UNIT(id, name, res) PLENA_UNIT_##id,
#include "../isa/columns.def"
#undef PLENA_UNIT
    PLENA_UNIT_COUNT
};

/* Resource classes of docs/profile.md "Accumulator", in JSON key order. */
enum plena_resource {
#define PLENA_RESOURCE(id, name) PLENA_RESOURCE_##id,
#include "../isa/columns.def"
#undef PLENA_RESOURCE
    PLENA_RESOURCE_COUNT
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

/* Machine state of the READS/WRITES columns (columns.def): PLENA_STATE_x is
 * the index, PLENA_MASK_x its bit. */
enum plena_state {
#define PLENA_STATE(id, name, desc) PLENA_STATE_##id,
#include "../isa/columns.def"
#undef PLENA_STATE
    PLENA_STATE_COUNT
};
enum plena_state_mask {
    PLENA_MASK_ = 0, /* the empty set "()" of the table */
#define PLENA_STATE(id, name, desc) PLENA_MASK_##id = 1 << PLENA_STATE_##id,
#include "../isa/columns.def"
#undef PLENA_STATE
};
_Static_assert(PLENA_STATE_COUNT <= 31, "state masks fit an int");
#define PLENA_MASK_ACCUMULATORS                                                                    \
    (PLENA_MASK_MACC | PLENA_MASK_VACC | PLENA_MASK_HMACC | PLENA_MASK_HVACC)

/* PLENA_STATE_SET(a, b, ...): the mask of up to 8 state names, as written in
 * the READS/WRITES columns; PLENA_STATE_SET() is 0. A consumer expanding
 * isa.def writes `PLENA_STATE_SET reads` (the column brings its own
 * parentheses). */
#define PLENA_STATE_SET(...)                                                                       \
    (0 PLENA_SSET_CAT_(PLENA_SSET_, PLENA_SSET_N_(__VA_ARGS__))(__VA_ARGS__))
#define PLENA_SSET_N_(...)                             PLENA_SSET_N2_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define PLENA_SSET_N2_(a, b, c, d, e, f, g, h, n, ...) n
#define PLENA_SSET_CAT_(a, b)                          PLENA_SSET_CAT2_(a, b)
#define PLENA_SSET_CAT2_(a, b)                         a##b
#define PLENA_SSET_1(a)                                | PLENA_MASK_##a
#define PLENA_SSET_2(a, ...)                           | PLENA_MASK_##a PLENA_SSET_1(__VA_ARGS__)
#define PLENA_SSET_3(a, ...)                           | PLENA_MASK_##a PLENA_SSET_2(__VA_ARGS__)
#define PLENA_SSET_4(a, ...)                           | PLENA_MASK_##a PLENA_SSET_3(__VA_ARGS__)
#define PLENA_SSET_5(a, ...)                           | PLENA_MASK_##a PLENA_SSET_4(__VA_ARGS__)
#define PLENA_SSET_6(a, ...)                           | PLENA_MASK_##a PLENA_SSET_5(__VA_ARGS__)
#define PLENA_SSET_7(a, ...)                           | PLENA_MASK_##a PLENA_SSET_6(__VA_ARGS__)
#define PLENA_SSET_8(a, ...)                           | PLENA_MASK_##a PLENA_SSET_7(__VA_ARGS__)

/* Where execution continues (FLOW column). */
enum plena_flow {
#define PLENA_FLOW(id, name, desc) PLENA_FLOW_##id,
#include "../isa/columns.def"
#undef PLENA_FLOW
    PLENA_FLOW_COUNT
};

struct plena_op_info {
    const char *name; /* mnemonic; INVALID_xx for invalid rows */
    uint8_t code;
    enum plena_class cls;
    enum plena_form form;
    enum plena_unit unit;
    enum plena_cost cost;
    unsigned reads, writes; /* enum plena_state_mask bits */
    enum plena_flow flow;
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

/* Info for opcode 0..63 (0x3A..0x3F return an "invalid" row). Never NULL. */
const struct plena_op_info *plena_isa_info(unsigned opcode);
/* Opcode by mnemonic (exact, case-sensitive); -1 when unknown or invalid. */
int plena_isa_lookup(const char *name, unsigned len);

/* Total decode: every word decodes. For invalid opcodes insn->op is the raw
 * opcode value and plena_isa_info(op)->valid is 0. */
void plena_isa_decode(uint32_t word, struct plena_insn *insn);
/* Encodes by class: fields outside the class are not placed (they are 0). */
uint32_t plena_isa_encode(const struct plena_insn *insn);

const char *plena_class_name(enum plena_class c);
const char *plena_class_fields(enum plena_class c);
const char *plena_form_descriptor(enum plena_form f);
const char *plena_unit_name(enum plena_unit u);
/* The resource class a unit bills to (columns.def); 'other' out of range. */
enum plena_resource plena_unit_resource(enum plena_unit u);
const char *plena_resource_name(enum plena_resource r);
/* The resource class of an opcode 0..63: its unit's. */
enum plena_resource plena_resource_of(unsigned opcode);
const char *plena_cost_name(enum plena_cost c);
const char *plena_state_name(enum plena_state st);
const char *plena_state_meaning(enum plena_state st);
const char *plena_flow_name(enum plena_flow f);
const char *plena_flow_meaning(enum plena_flow f);
/* Latency key name ("VECTOR_ADD_CYCLES") and reference column values. */
const char *plena_latency_name(enum plena_latency k);
int plena_latency_reference(enum plena_latency k, int dc_en);
/* For a cost that is a latency key, its enum plena_latency; else -1. */
int plena_cost_latency(enum plena_cost c);

/* Top-k shapes C_SET_TOPK_REG can name: the register packs (E << 8) | k with a
 * 14-bit E and an 8-bit k (docs/isa.md, C_SET_TOPK_REG), and V_TOPK needs
 * 1 <= k <= E. Every range check of E and k in plena uses these two. Plain
 * int literals so messages and tables can also stringify them. */
#define PLENA_TOPK_MAX_EXPERTS 16383
#define PLENA_TOPK_MAX_K       255
/* "16383" from PLENA_TOPK_STR(PLENA_TOPK_MAX_EXPERTS), for text tables */
#define PLENA_TOPK_STR_(x) #x
#define PLENA_TOPK_STR(x)  PLENA_TOPK_STR_(x)

#endif
