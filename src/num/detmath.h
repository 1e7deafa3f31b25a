/* Deterministic transcendental functions for trace generation
 * (docs/numerics.md "Deterministic math"): built only from IEEE basic
 * operations, floor, frexp and ldexp, so results are byte-identical on every
 * IEEE-754 machine (unlike libm). Accuracy: within 4 ulp of the true value
 * on the stated domains; outside them the functions return non-zero and
 * leave *out untouched. */
#ifndef PLENA_NUM_DETMATH_H
#define PLENA_NUM_DETMATH_H

/* Natural logarithm; domain: finite x > 0 (subnormals included). */
int plena_det_log(double x, double *out);
/* e^x; domain: |x| <= 700 (NaN rejected). */
int plena_det_exp(double x, double *out);
/* sin and cos together; domain: |x| <= 2^20 (NaN rejected). */
int plena_det_sincos(double x, double *s, double *c);

#endif
