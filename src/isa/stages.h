/* Stage vocabulary expanded from stages.def
 * (docs/profile.md "Stage vocabulary"): names, meanings and the columns every
 * classifier reads (split branch, routing tax, pair scope), so no module
 * keeps its own list of stages. */
#ifndef PLENA_ISA_STAGES_H
#define PLENA_ISA_STAGES_H

enum plena_stage {
#define PLENA_STAGE(id, name, branch, tax, scope, meaning) PLENA_STAGE_##id,
#include "../isa/stages.def"
#undef PLENA_STAGE
    PLENA_STAGE_COUNT
};

/* Parts of the shared-vs-routed split (stages.def BRANCH column). */
enum plena_stage_branch {
#define PLENA_STAGE_BRANCH(id, name, role) PLENA_BRANCH_##id,
#include "../isa/stages.def"
#undef PLENA_STAGE_BRANCH
    PLENA_BRANCH_COUNT
};

/* A stage's relation to (token, expert) pairs (stages.def SCOPE column). */
enum plena_stage_scope {
#define PLENA_STAGE_SCOPE(id, name, rule) PLENA_SCOPE_##id,
#include "../isa/stages.def"
#undef PLENA_STAGE_SCOPE
    PLENA_SCOPE_COUNT
};

const char *plena_stage_name(enum plena_stage s);
const char *plena_stage_meaning(enum plena_stage s);
/* Stage by exact name; -1 when unknown. */
int plena_stage_lookup(const char *name, unsigned len);

/* Columns; a stage out of range reads as 'other' (branch other, no tax,
 * scope none). */
enum plena_stage_branch plena_stage_branch(enum plena_stage s);
int plena_stage_is_routing_tax(enum plena_stage s);
enum plena_stage_scope plena_stage_scope(enum plena_stage s);
/* The routed experts' own work ("expert_*" of docs/profile.md "Routed lowering"):
 * branch routed and scope pair. */
int plena_stage_is_routed_expert(enum plena_stage s);

const char *plena_stage_branch_name(enum plena_stage_branch b);
const char *plena_stage_branch_role(enum plena_stage_branch b);
const char *plena_stage_scope_name(enum plena_stage_scope c);
const char *plena_stage_scope_rule(enum plena_stage_scope c);

#endif
