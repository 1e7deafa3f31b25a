/* det_log / det_exp / det_sincos of docs/numerics.md "Deterministic math".
 * Algorithms are the classic fdlibm ones (Sun, 1993: Cody-Waite reduction,
 * then minimax polynomials with the published coefficients), re-expressed
 * with frexp/ldexp/floor in place of bit twiddling. Every expression is
 * evaluated in the written order in binary64 (-ffp-contract=off), so the
 * results do not depend on the C library. Only the reduced domains the trace
 * generators need are supported: no Payne-Hanek reduction for huge sin/cos
 * arguments. */
#include "num/detmath.h"

#include <math.h> /* floor, frexp, ldexp only: exact operations */

/* ln2 split so that k * LN2_HI is exact for |k| < 2^21. */
static const double LN2_HI = 6.93147180369123816490e-01; /* 0x3FE62E42 FEE00000 */
static const double LN2_LO = 1.90821492927058770002e-10; /* 0x3DEA39EF 35793C76 */
static const double INV_LN2 = 1.44269504088896338700e+00;

static int is_finite(double x)
{
    return x == x && x - x == 0.0; /* false for NaN and +-Inf */
}

int plena_det_exp(double x, double *out)
{
    if (!(x >= -700.0 && x <= 700.0)) return -1; /* also rejects NaN */
    /* x = k ln2 + r, |r| <= ln2/2 (r = hi - lo carried in two parts) */
    double k = floor(x * INV_LN2 + 0.5);
    double hi = x - k * LN2_HI; /* exact */
    double lo = k * LN2_LO;
    double r = hi - lo;
    /* exp(r) = 1 + r + r*c/(2 - c) with c = r - r^2 * P(r^2), the rational
     * form of fdlibm's e_exp.c (error below 2^-59 before rounding). */
    static const double P1 = 1.66666666666666019037e-01, P2 = -2.77777777770155933842e-03,
                        P3 = 6.61375632143793436117e-05, P4 = -1.65339022054652515390e-06,
                        P5 = 4.13813679705723846039e-08;
    double t = r * r;
    double c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))));
    double y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    *out = ldexp(y, (int)k); /* |k| <= 1010: the result stays normal */
    return 0;
}

int plena_det_log(double x, double *out)
{
    if (!(x > 0.0) || !is_finite(x)) return -1;
    int k;
    double m = frexp(x, &k); /* x = m 2^k, m in [0.5, 1) */
    /* Move m into [sqrt(2)/2, sqrt(2)) so that |f| <= 0.4143. */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        k -= 1;
    }
    double f = m - 1.0; /* exact (Sterbenz) */
    /* log(1+f) = f - f^2/2 + s (f^2/2 + R(z)), s = f/(2+f), fdlibm's e_log.c */
    static const double Lg1 = 6.666666666666735130e-01, Lg2 = 3.999999999940941908e-01,
                        Lg3 = 2.857142874366239149e-01, Lg4 = 2.222219843214978396e-01,
                        Lg5 = 1.818357216161805012e-01, Lg6 = 1.531383769920937332e-01,
                        Lg7 = 1.479819860511658591e-01;
    double s = f / (2.0 + f);
    double z = s * s;
    double w = z * z;
    double t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
    double t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
    double R = t2 + t1;
    double hfsq = 0.5 * f * f;
    double dk = (double)k;
    *out = dk * LN2_HI - ((hfsq - (s * (hfsq + R) + dk * LN2_LO)) - f);
    return 0;
}

/* sin(x + y) for |x + y| <= pi/4, y a tail below ulp(x) (fdlibm k_sin.c). */
static double kernel_sin(double x, double y)
{
    static const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                        S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                        S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
    double z = x * x;
    double w = z * z;
    double r = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    double v = z * x;
    return x - ((z * (0.5 * y - v * r) - y) - v * S1);
}

/* cos(x + y) for |x + y| <= pi/4 (fdlibm k_cos.c, Evans' form). */
static double kernel_cos(double x, double y)
{
    static const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                        C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                        C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;
    double z = x * x;
    double w = z * z;
    double r = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    double hz = 0.5 * z;
    double a = 1.0 - hz;
    return a + (((1.0 - a) - hz) + (z * r - x * y));
}

static int exponent_of(double v)
{
    int e;
    frexp(v, &e);
    return e;
}

/* x = n pi/2 + (y0 + y1) for |x| <= 2^20: three-part Cody-Waite reduction
 * with pi/2 split into 33-bit pieces (fdlibm e_rem_pio2.c, medium case);
 * n < 2^20, so every n * PIO2_i is exact. The second and third pieces are
 * only applied when cancellation has eaten the bits the first leaves. */
static long rem_pio2(double x, double *y0, double *y1)
{
    static const double INV_PIO2 = 6.36619772367581382433e-01, PIO2_1 = 1.57079632673412561417e+00,
                        PIO2_1T = 6.07710050650619224932e-11, PIO2_2 = 6.07710050630396597660e-11,
                        PIO2_2T = 2.02226624879595063154e-21, PIO2_3 = 2.02226624871116645580e-21,
                        PIO2_3T = 8.47842766036889956997e-32;
    double fn = floor(x * INV_PIO2 + 0.5);
    double r = x - fn * PIO2_1;
    double w = fn * PIO2_1T;
    double a = r - w;
    int ex = exponent_of(x);
    if (ex - exponent_of(a) > 16) {
        double t = r;
        w = fn * PIO2_2;
        r = t - w;
        w = fn * PIO2_2T - ((t - r) - w);
        a = r - w;
        if (ex - exponent_of(a) > 49) {
            t = r;
            w = fn * PIO2_3;
            r = t - w;
            w = fn * PIO2_3T - ((t - r) - w);
            a = r - w;
        }
    }
    *y0 = a;
    *y1 = (r - a) - w;
    return (long)fn;
}

int plena_det_sincos(double x, double *s, double *c)
{
    if (!(x >= -0x1p20 && x <= 0x1p20)) return -1; /* also rejects NaN */
    double y0, y1;
    long n;
    if (x >= -0.78539816339744830962 && x <= 0.78539816339744830962) {
        y0 = x;
        y1 = 0.0;
        n = 0;
    } else {
        n = rem_pio2(x, &y0, &y1);
    }
    double ks = kernel_sin(y0, y1), kc = kernel_cos(y0, y1);
    switch (((n % 4) + 4) % 4) {
    case 0:
        *s = ks;
        *c = kc;
        break;
    case 1:
        *s = kc;
        *c = -ks;
        break;
    case 2:
        *s = -ks;
        *c = -kc;
        break;
    default:
        *s = -kc;
        *c = ks;
        break;
    }
    return 0;
}
