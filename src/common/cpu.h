/* The host's vector extensions, the one place kernels ask before taking a
 * run-time-selected AVX2 / AVX-512F path (num/, emu/, ref/, ckpt/). Always 0
 * off x86-64 or without GCC/clang's CPU builtins. */
#ifndef PLENA_COMMON_CPU_H
#define PLENA_COMMON_CPU_H

int plena_cpu_has_avx2(void);
int plena_cpu_has_avx512f(void);

#endif
