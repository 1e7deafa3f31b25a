/* The constant strings of the profile (docs/profile.md "Constant strings"):
 * one definition each in libplena. The profile writer, `plena moe` and the replay layer print
 * these arrays; tests compare JSON values to them byte for byte. Do not
 * re-wrap or paraphrase them: consumers compare bytes. */
#include "profile/profile.h"

const char plena_profile_text_logical[] =
    "logical byte counts are not modelled; every logical_bytes field is null";

const char plena_profile_text_physical[] =
    "physical bytes count 64-byte HBM transactions issued by each instruction, read-modify-write "
    "reads included";

const char plena_profile_text_resource[] =
    "resource figures bill each instruction's whole serial duration to its opcode class; they are "
    "a proxy, not unit occupancy";

const char plena_profile_text_caveat[] =
    "Stages come from @stage markers, or from legacy comment substrings in unmarked programs; time "
    "and bytes are billed per executed instruction in serial simulated time; pair ids are static "
    "slot numbers from the program text, not expert ids; cycle fields round picoseconds up once "
    "each, so add wall_picos before rounding.";

const char plena_profile_text_shared_vs_routed[] =
    "A shared-vs-routed cycle ratio measures this toolchain's routed lowering at least as much as "
    "the MoE architecture: the pair-major routed lowering runs every (token, expert) pair in its "
    "own BLEN-row slot and fetches that expert's weights again for each pair, so routed cycles "
    "grow with tokens x top_k while the batched shared expert does not; "
    "attribution_notes.routed_lowering names the lowering behind these figures, and the ratio "
    "must not be quoted as an architectural result.";

/* Expert-major: the ratio follows the active experts and their tokens; the
 * residual dependence on the lowering is the padding and the sort. */
const char plena_profile_text_shared_vs_routed_expert_major[] =
    "A shared-vs-routed cycle ratio still depends on this toolchain's routed lowering: the "
    "expert-major routed lowering fetches each active expert's weights once per token block and "
    "runs its tokens in full BLEN-row tiles (at most BLEN-1 padding rows per expert and block), "
    "so routed cycles follow the active experts and their token counts, as the batched shared "
    "expert follows the tokens; routing_stats gives the padding, row utilisation and weight "
    "bytes behind these figures, and attribution_notes.routed_lowering names the lowering.";

const char *plena_profile_shared_vs_routed_text(enum plena_lowering l)
{
    /* no routed expert ran (UNSET): the ratio is null; S, as the format had it */
    return l == PLENA_LOWERING_EXPERT_MAJOR ? plena_profile_text_shared_vs_routed_expert_major
                                            : plena_profile_text_shared_vs_routed;
}
