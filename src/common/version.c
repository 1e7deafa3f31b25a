/* plena_version: see version.h. */
#include "common/version.h"

const char *plena_version(void)
{
    return PLENA_VERSION;
}
