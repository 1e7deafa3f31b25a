#include "common/cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* __builtin_cpu_init is idempotent and cheap after its first call; calling it
 * here keeps the answer right even from a constructor that runs before the
 * compiler's own initialiser. */
int plena_cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}

int plena_cpu_has_avx512f(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
}
#else
int plena_cpu_has_avx2(void)
{
    return 0;
}

int plena_cpu_has_avx512f(void)
{
    return 0;
}
#endif
