/* The replay options of docs/replay.md "Pipeline" as one row table over
 * struct plena_replay_opts: `plena replay` parses them, and `plena campaign`
 * parses the same rows (into the fingerprint) and forwards them verbatim to
 * every worker; plena_cli_replay_worker_rows are forwarded too but stay
 * outside the fingerprint. Defaults are plena_replay_opts_default's. */
#include <stddef.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/replay_opts.h"
#include "isa/program.h"

PLENA_OPT_ENUM_OF(weights_mode);
PLENA_OPT_ENUM_OF(input_mode);

static const struct plena_opt_enum lowerings = {.names = plena_lowering_options};
static const struct plena_opt_enum routings = {.names =
                                                   (const char *const[]){"fixed", "device", NULL}};

#define O struct plena_replay_opts
const struct plena_opt plena_cli_replay_rows[] = {
    {.names = "--lowering",
     .kind = PLENA_OPT_CHOICE,
     .metavar = "L",
     PLENA_OPT_FIELD(O, lowering),
     .choices = &lowerings,
     .help = "routed lowering: expert-major (each active expert's weights once, its tokens in "
             "full BLEN-row tiles) or pair-major (one pair per tile, the upstream compiler's "
             "form); part of the fingerprint"},
    PLENA_OPT_ENUM_ROW("--weights", "W", O, weights, &plena_opt_enum_weights_mode,
                       "expert and shared weights"),
    PLENA_OPT_UINT_ROW("--weight-seed", "N", O, weight_seed, 0, UINT64_MAX, "weight seed"),
    PLENA_OPT_ENUM_ROW("--input", "I", O, input, &plena_opt_enum_input_mode, "MoE input x"),
    PLENA_OPT_UINT_ROW("--input-seed", "N", O, input_seed, 0, UINT64_MAX, "input seed"),
    PLENA_OPT_ENUM_ROW("--routing", "R", O, routing_device, &routings,
                       "fixed: the trace's ids and weights; device: the model's router on the "
                       "device over preloaded logits that reproduce the trace's selection (build "
                       "dir TRACE_ID.device, so both runs fit one --out; exports pair them into "
                       "device_minus_fixed rows)"),
    {.names = "--profile",
     .kind = PLENA_OPT_FLAG,
     PLENA_OPT_FIELD(O, profile),
     .ival = 1,
     .excludes = "--no-profile",
     .help = "write the stage profile"},
    {.names = "--no-profile",
     .kind = PLENA_OPT_FLAG,
     PLENA_OPT_FIELD(O, profile),
     .ival = 0,
     .def_text = "off: the profile is written",
     .help = "no stage profile"},
    PLENA_OPT_FLAG_ROW("--overlap", O, overlap, "the prefetch/compute overlap overlay"),
    {.names = "--repeat",
     .kind = PLENA_OPT_UINT,
     .metavar = "N",
     PLENA_OPT_FIELD(O, repeat),
     .min = 2,
     .max = 1000,
     .flags = PLENA_OPT_ZERO_OFF,
     .help = "repeat gate with N emulator runs"},
    {.names = "--mlen",
     .kind = PLENA_OPT_UINT,
     .metavar = "N",
     PLENA_OPT_FIELD(O, mlen),
     .min = 1,
     .max = 4096,
     .def_text = "the trace's replay.mlen",
     .help = "override the trace's replay MLEN"},
    {.names = "--blen",
     .kind = PLENA_OPT_UINT,
     .metavar = "N",
     PLENA_OPT_FIELD(O, blen),
     .min = 1,
     .max = 4096,
     .def_text = "the trace's replay.blen",
     .help = "override the trace's replay BLEN"},
    {.names = "--settings",
     .kind = PLENA_OPT_PATH,
     .metavar = "FILE",
     PLENA_OPT_FIELD(O, settings_path),
     .def_text = "the built-in lookup",
     .help = "settings file"},
    {.names = NULL}, /* end: the groups that share this table have n_rows 0 */
};
/* Outside the fingerprint (they change no output byte), forwarded to every
 * campaign worker like the rows above. */
const struct plena_opt plena_cli_replay_worker_rows[] = {
    PLENA_OPT_PATH_ROW("--weight-cache", "DIR", O, weight_cache,
                       "read generated random weight matrices from DIR and store the missing "
                       "ones there, shared by every trace and worker (created when missing; the "
                       "same bytes either way: docs/design.md \"Weight cache\")"),
    {.names = NULL},
};
#undef O

void plena_cli_replay_init(struct plena_replay_opts *o)
{
    plena_replay_opts_default(o);
}
