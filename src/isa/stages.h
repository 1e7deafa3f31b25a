/* Stage vocabulary expanded from stages.def (design decision D5). */
#ifndef PLENA_ISA_STAGES_H
#define PLENA_ISA_STAGES_H

enum plena_stage {
#define PLENA_STAGE(id, name, meaning) PLENA_STAGE_##id,
#include "../isa/stages.def"
#undef PLENA_STAGE
    PLENA_STAGE_COUNT
};

const char *plena_stage_name(enum plena_stage s);
const char *plena_stage_meaning(enum plena_stage s);
/* Stage by exact name; -1 when unknown. */
int plena_stage_lookup(const char *name, unsigned len);

#endif
