/* PLENA instruction word layout, drawn once (docs/machine.md "Instruction word").
 *
 *  31        26 25    22 21   18 17   14 13   10 9     6 5      0
 * +------------+--------+-------+-------+-------+-------+--------+
 * |   (free)   | funct1 |  rs3  |  rs2  |  rs1  |  rd   | opcode |   R
 * +------------+--------+-------+-------+-------+-------+--------+
 * |            imm18 [31:14]            |  rs1  |  rd   | opcode |   I18
 * +-------------------------------------+-------+-------+--------+
 * |                imm22 [31:10]                |  rd   | opcode |   I22
 * +---------------------------------------------+-------+--------+
 * |                    (unused, 0)              |  rd   | opcode |   D
 * |                    (unused, 0)                      | opcode |   N
 *
 * Immediates are UNSIGNED and zero-extended; nothing is sign-extended.
 * Bits outside an instruction's class are ignored by the decoder. */
#ifndef PLENA_ISA_ENCODING_H
#define PLENA_ISA_ENCODING_H

#include <stdint.h>

#define PLENA_POS_OPCODE  0
#define PLENA_SIZE_OPCODE 6
#define PLENA_POS_RD      6
#define PLENA_SIZE_RD     4
#define PLENA_POS_RS1     10
#define PLENA_SIZE_RS1    4
#define PLENA_POS_RS2     14
#define PLENA_SIZE_RS2    4
#define PLENA_POS_RS3     18
#define PLENA_SIZE_RS3    4
#define PLENA_POS_FUNCT1  22
#define PLENA_SIZE_FUNCT1 4
#define PLENA_POS_IMM18   14
#define PLENA_SIZE_IMM18  18
#define PLENA_POS_IMM22   10
#define PLENA_SIZE_IMM22  22

#define PLENA_IMM18_MAX ((1u << 18) - 1u)
#define PLENA_IMM22_MAX ((1u << 22) - 1u)

static inline uint32_t plena_getfield(uint32_t w, unsigned pos, unsigned size)
{
    return (w >> pos) & ((size >= 32) ? 0xFFFFFFFFu : ((1u << size) - 1u));
}

static inline uint32_t plena_setfield(uint32_t w, unsigned pos, unsigned size, uint32_t v)
{
    uint32_t mask = ((size >= 32) ? 0xFFFFFFFFu : ((1u << size) - 1u)) << pos;
    return (w & ~mask) | ((v << pos) & mask);
}

#endif
