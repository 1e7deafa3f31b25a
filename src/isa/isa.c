/* Opcode table, encoder and decoder, all expanded from isa.def. */
#include "isa/isa.h"
#include "isa/stages.h"

#include <string.h>

/* A vocabulary row of columns.def / stages.def: name and its one-line text. */
struct named_row {
    const char *name, *text;
};

static const struct plena_op_info op_table[64] = {
#define PLENA_OP(name_, code_, cls_, form_, unit_, cost_, rd_, wr_, flow_, ops_, syn_)             \
    [code_] = {#name_,                                                                             \
               code_,                                                                              \
               PLENA_CLASS_##cls_,                                                                 \
               PLENA_FORM_##form_,                                                                 \
               PLENA_UNIT_##unit_,                                                                 \
               PLENA_COST_##cost_,                                                                 \
               PLENA_STATE_SET rd_,                                                                \
               PLENA_STATE_SET wr_,                                                                \
               PLENA_FLOW_##flow_,                                                                 \
               ops_,                                                                               \
               syn_,                                                                               \
               PLENA_CLASS_##cls_ != PLENA_CLASS_INV},
#include "isa/isa.def"
#undef PLENA_OP
};

static const struct plena_op_info invalid_row = {"INVALID",
                                                 0,
                                                 PLENA_CLASS_INV,
                                                 PLENA_FORM_NONE,
                                                 PLENA_UNIT_NONE,
                                                 PLENA_COST_TRAP,
                                                 0,
                                                 0,
                                                 PLENA_FLOW_TRAP,
                                                 "",
                                                 "invalid opcode: traps when executed",
                                                 0};

const struct plena_op_info *plena_isa_info(unsigned opcode)
{
    if (opcode >= PLENA_OP_COUNT) return &invalid_row;
    return &op_table[opcode];
}

int plena_isa_lookup(const char *name, unsigned len)
{
    for (unsigned i = 0; i < PLENA_OP_COUNT; i++) {
        const struct plena_op_info *r = &op_table[i];
        if (r->valid && strlen(r->name) == len && memcmp(r->name, name, len) == 0) return (int)i;
    }
    return -1;
}

void plena_isa_decode(uint32_t w, struct plena_insn *in)
{
    unsigned op = plena_getfield(w, PLENA_POS_OPCODE, PLENA_SIZE_OPCODE);
    const struct plena_op_info *r = plena_isa_info(op);
    in->op = (uint8_t)op;
    in->rd = (uint8_t)plena_getfield(w, PLENA_POS_RD, PLENA_SIZE_RD);
    in->rs1 = (uint8_t)plena_getfield(w, PLENA_POS_RS1, PLENA_SIZE_RS1);
    in->rs2 = (uint8_t)plena_getfield(w, PLENA_POS_RS2, PLENA_SIZE_RS2);
    in->rs3 = (uint8_t)plena_getfield(w, PLENA_POS_RS3, PLENA_SIZE_RS3);
    in->funct1 = (uint8_t)plena_getfield(w, PLENA_POS_FUNCT1, PLENA_SIZE_FUNCT1);
    switch (r->cls) {
    case PLENA_CLASS_I18: in->imm = plena_getfield(w, PLENA_POS_IMM18, PLENA_SIZE_IMM18); break;
    case PLENA_CLASS_I22: in->imm = plena_getfield(w, PLENA_POS_IMM22, PLENA_SIZE_IMM22); break;
    default: in->imm = 0; break;
    }
}

uint32_t plena_isa_encode(const struct plena_insn *in)
{
    const struct plena_op_info *r = plena_isa_info(in->op);
    uint32_t w = plena_setfield(0, PLENA_POS_OPCODE, PLENA_SIZE_OPCODE, in->op);
    switch (r->cls) {
    case PLENA_CLASS_R:
        w = plena_setfield(w, PLENA_POS_RD, PLENA_SIZE_RD, in->rd);
        w = plena_setfield(w, PLENA_POS_RS1, PLENA_SIZE_RS1, in->rs1);
        w = plena_setfield(w, PLENA_POS_RS2, PLENA_SIZE_RS2, in->rs2);
        w = plena_setfield(w, PLENA_POS_RS3, PLENA_SIZE_RS3, in->rs3);
        w = plena_setfield(w, PLENA_POS_FUNCT1, PLENA_SIZE_FUNCT1, in->funct1);
        break;
    case PLENA_CLASS_I18:
        w = plena_setfield(w, PLENA_POS_RD, PLENA_SIZE_RD, in->rd);
        w = plena_setfield(w, PLENA_POS_RS1, PLENA_SIZE_RS1, in->rs1);
        w = plena_setfield(w, PLENA_POS_IMM18, PLENA_SIZE_IMM18, in->imm);
        break;
    case PLENA_CLASS_I22:
        w = plena_setfield(w, PLENA_POS_RD, PLENA_SIZE_RD, in->rd);
        w = plena_setfield(w, PLENA_POS_IMM22, PLENA_SIZE_IMM22, in->imm);
        break;
    case PLENA_CLASS_D: w = plena_setfield(w, PLENA_POS_RD, PLENA_SIZE_RD, in->rd); break;
    case PLENA_CLASS_N:
    case PLENA_CLASS_INV:
    case PLENA_CLASS_COUNT: break;
    }
    return w;
}

static const struct named_row class_table[] = {
#define PLENA_CLASS(id, name, fields) {name, fields},
#include "isa/columns.def"
#undef PLENA_CLASS
};
_Static_assert(sizeof class_table / sizeof class_table[0] == PLENA_CLASS_COUNT, "classes");

const char *plena_class_name(enum plena_class c)
{
    return (unsigned)c < PLENA_CLASS_COUNT ? class_table[c].name : "?";
}

const char *plena_class_fields(enum plena_class c)
{
    return (unsigned)c < PLENA_CLASS_COUNT ? class_table[c].text : "";
}

const char *plena_form_descriptor(enum plena_form f)
{
    static const char *desc[] = {
#define PLENA_FORM(id, d) d,
#include "isa/forms.def"
#undef PLENA_FORM
    };
    return (unsigned)f < PLENA_FORM_COUNT ? desc[f] : "";
}

static const struct {
    const char *name;
    enum plena_resource res;
} unit_table[] = {
#define PLENA_UNIT(id, name, res) {name, PLENA_RESOURCE_##res},
#include "isa/columns.def"
#undef PLENA_UNIT
};
_Static_assert(sizeof unit_table / sizeof unit_table[0] == PLENA_UNIT_COUNT, "units");

static const char *const resource_names[] = {
#define PLENA_RESOURCE(id, name) name,
#include "isa/columns.def"
#undef PLENA_RESOURCE
};
_Static_assert(sizeof resource_names / sizeof resource_names[0] == PLENA_RESOURCE_COUNT,
               "resources");

const char *plena_unit_name(enum plena_unit u)
{
    return (unsigned)u < PLENA_UNIT_COUNT ? unit_table[u].name : "?";
}

enum plena_resource plena_unit_resource(enum plena_unit u)
{
    return (unsigned)u < PLENA_UNIT_COUNT ? unit_table[u].res : PLENA_RESOURCE_OTHER;
}

const char *plena_resource_name(enum plena_resource r)
{
    return (unsigned)r < PLENA_RESOURCE_COUNT ? resource_names[r] : "other";
}

enum plena_resource plena_resource_of(unsigned opcode)
{
    return plena_unit_resource(plena_isa_info(opcode)->unit);
}

const char *plena_cost_name(enum plena_cost c)
{
    static const char *names[] = {
#define PLENA_COST_RULE(id, text)         text,
#define PLENA_LATENCY(key, en, dis, used) #key,
#include "isa/costs.def"
#undef PLENA_COST_RULE
#undef PLENA_LATENCY
    };
    return (unsigned)c < PLENA_COST_COUNT ? names[c] : "?";
}

static const struct named_row state_table[] = {
#define PLENA_STATE(id, name, desc) {name, desc},
#include "isa/columns.def"
#undef PLENA_STATE
};
static const struct named_row flow_table[] = {
#define PLENA_FLOW(id, name, desc) {name, desc},
#include "isa/columns.def"
#undef PLENA_FLOW
};
_Static_assert(sizeof state_table / sizeof state_table[0] == PLENA_STATE_COUNT, "states");
_Static_assert(sizeof flow_table / sizeof flow_table[0] == PLENA_FLOW_COUNT, "flows");

const char *plena_state_name(enum plena_state st)
{
    return (unsigned)st < PLENA_STATE_COUNT ? state_table[st].name : "?";
}

const char *plena_state_meaning(enum plena_state st)
{
    return (unsigned)st < PLENA_STATE_COUNT ? state_table[st].text : "";
}

const char *plena_flow_name(enum plena_flow f)
{
    return (unsigned)f < PLENA_FLOW_COUNT ? flow_table[f].name : "?";
}

const char *plena_flow_meaning(enum plena_flow f)
{
    return (unsigned)f < PLENA_FLOW_COUNT ? flow_table[f].text : "";
}

static const struct {
    const char *name;
    int en, dis;
} latency_table[] = {
#define PLENA_LATENCY(key, en, dis, used) {#key, en, dis},
#include "isa/costs.def"
#undef PLENA_LATENCY
};
_Static_assert(sizeof latency_table / sizeof latency_table[0] == PLENA_LAT_COUNT,
               "latency table length");

const char *plena_latency_name(enum plena_latency k)
{
    return (unsigned)k < PLENA_LAT_COUNT ? latency_table[k].name : "?";
}

int plena_latency_reference(enum plena_latency k, int dc_en)
{
    if ((unsigned)k >= PLENA_LAT_COUNT) return 0;
    return dc_en ? latency_table[k].en : latency_table[k].dis;
}

int plena_cost_latency(enum plena_cost c)
{
    int first = (int)PLENA_COST_COUNT - (int)PLENA_LAT_COUNT;
    if ((int)c < first || (int)c >= (int)PLENA_COST_COUNT) return -1;
    return (int)c - first;
}

static const struct {
    const char *name, *meaning;
    enum plena_stage_branch branch;
    unsigned char tax;
    enum plena_stage_scope scope;
} stage_table[] = {
#define PLENA_STAGE(id, name, branch, tax, scope, meaning)                                         \
    {name, meaning, PLENA_BRANCH_##branch, tax, PLENA_SCOPE_##scope},
#include "isa/stages.def"
#undef PLENA_STAGE
};
_Static_assert(sizeof stage_table / sizeof stage_table[0] == PLENA_STAGE_COUNT, "stage table");

static const struct named_row branch_table[] = {
#define PLENA_STAGE_BRANCH(id, name, role) {name, role},
#include "isa/stages.def"
#undef PLENA_STAGE_BRANCH
};
static const struct named_row scope_table[] = {
#define PLENA_STAGE_SCOPE(id, name, rule) {name, rule},
#include "isa/stages.def"
#undef PLENA_STAGE_SCOPE
};
_Static_assert(sizeof branch_table / sizeof branch_table[0] == PLENA_BRANCH_COUNT, "branches");
_Static_assert(sizeof scope_table / sizeof scope_table[0] == PLENA_SCOPE_COUNT, "scopes");

const char *plena_stage_name(enum plena_stage s)
{
    return (unsigned)s < PLENA_STAGE_COUNT ? stage_table[s].name : "?";
}

const char *plena_stage_meaning(enum plena_stage s)
{
    return (unsigned)s < PLENA_STAGE_COUNT ? stage_table[s].meaning : "";
}

enum plena_stage_branch plena_stage_branch(enum plena_stage s)
{
    return (unsigned)s < PLENA_STAGE_COUNT ? stage_table[s].branch : PLENA_BRANCH_OTHER;
}

int plena_stage_is_routing_tax(enum plena_stage s)
{
    return (unsigned)s < PLENA_STAGE_COUNT && stage_table[s].tax;
}

enum plena_stage_scope plena_stage_scope(enum plena_stage s)
{
    return (unsigned)s < PLENA_STAGE_COUNT ? stage_table[s].scope : PLENA_SCOPE_NONE;
}

int plena_stage_is_routed_expert(enum plena_stage s)
{
    return plena_stage_branch(s) == PLENA_BRANCH_ROUTED && plena_stage_scope(s) == PLENA_SCOPE_PAIR;
}

const char *plena_stage_branch_name(enum plena_stage_branch b)
{
    return (unsigned)b < PLENA_BRANCH_COUNT ? branch_table[b].name : "?";
}

const char *plena_stage_branch_role(enum plena_stage_branch b)
{
    return (unsigned)b < PLENA_BRANCH_COUNT ? branch_table[b].text : "";
}

const char *plena_stage_scope_name(enum plena_stage_scope c)
{
    return (unsigned)c < PLENA_SCOPE_COUNT ? scope_table[c].name : "?";
}

const char *plena_stage_scope_rule(enum plena_stage_scope c)
{
    return (unsigned)c < PLENA_SCOPE_COUNT ? scope_table[c].text : "";
}

int plena_stage_lookup(const char *name, unsigned len)
{
    for (int i = 0; i < PLENA_STAGE_COUNT; i++) {
        const char *n = stage_table[i].name;
        if (strlen(n) == len && memcmp(n, name, len) == 0) return i;
    }
    return -1;
}
