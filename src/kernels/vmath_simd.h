/*
 * vmath_simd.h - the vector math of the SIMD tables, written once over a vector
 * width: exp (and its form for a softmax's terms, v_exp_nonpos), tanh,
 * sigmoid, erf, GELU (erf and tanh forms), SiLU, ReLU.
 *
 * Included by vmath_avx2.h (8 lanes: vmath_avx2.c, attn_rows_avx2.c) and
 * vmath_avx512.c (16 lanes), each of which defines first:
 *   VF, VM         the float vector and its comparison mask
 *   V(x)           broadcast;  VADD VSUB VMUL VDIV VMIN VMAX
 *   VFMA(a,b,c)    a*b + c;    VFNMA(a,b,c) c - a*b;   VFMS(a,b,c) a*b - c
 *   VRND(x)        round to nearest even;  VSCALE2(p, n) p * 2^n in two factors
 *   VSCALE1(p, n)  p * 2^n for a normal result (one step)
 *   VCMP(a,b,p)    a mask;  VSEL(a,b,m) m ? b : a;  VZERO(m,x) m ? 0 : x
 *   VABS(x)        |x|;     VSIGN(y,x) y with x's sign bit or'ed in
 *   VI             the int32 vector;  VBITS_SHR(x, k) x's bits shifted right k (logical)
 *   VPERM(t, i)    lane j gets t[i_j & 7] of a 16-float table holding 8 values twice (AVX-512 reads
 *                  index bits 0-3, AVX2 bits 0-2: the copy gives both the same value)
 * Every operation is the IEEE one on each lane, in the same order at both
 * widths, so a lane's result does not depend on the width: the AVX-512 table
 * gives the AVX2 table's values bit for bit (asserted by test_kernels_vmath).
 * Accuracy: see vmath_avx2.c.
 */
#ifndef WM_KERNELS_VMATH_SIMD_H
#define WM_KERNELS_VMATH_SIMD_H

#define VINLINE static inline __attribute__((always_inline))

VINLINE VM v_isnan(VF x) { return VCMP(x, x, _CMP_UNORD_Q); }

/* e^x's core for x already clamped: x = n ln2 + r (|r| <= ln2/2, two-constant ln2), degree-7 Taylor in r;
 * returns that polynomial, *n the power of two it is to be scaled by (NaN in, NaN out). */
VINLINE VF v_exp_poly(VF xc, VF *n) {
    *n = VRND(VMUL(xc, V(1.44269504088896341f)));
    VF r = VFNMA(*n, V(0.693145751953125f), xc);
    r = VFNMA(*n, V(1.42860682030941723e-6f), r);
    VF p = V(1.0f / 5040.0f);
    p = VFMA(p, r, V(1.0f / 720.0f));
    p = VFMA(p, r, V(1.0f / 120.0f));
    p = VFMA(p, r, V(1.0f / 24.0f));
    p = VFMA(p, r, V(1.0f / 6.0f));
    p = VFMA(p, r, V(0.5f));
    p = VFMA(p, r, V(1.0f));
    return VFMA(p, r, V(1.0f));
}

/* e^x: the core times 2^n as two factors (so 2^n may be subnormal). x > 89 gives inf, x < -104 gives 0, NaN
 * stays NaN. */
VINLINE VF v_exp(VF x) {
    VF n, p = v_exp_poly(VMIN(VMAX(x, V(-104.0f)), V(89.0f)), &n);
    return VSEL(VSCALE2(p, n), x, v_isnan(x));
}

/* e^x for x <= 0 where a term below 2^-124 may be 0 (a softmax's terms less their row's max: dropped beside
 * the largest, 1): the same core, 2^n added to the exponent in one step (VSCALE1; no subnormal results, whose
 * arithmetic is slow on some cores), x < -86 gives 0, NaN stays NaN (VMAX returns its second operand). */
VINLINE VF v_exp_nonpos(VF x) {
    VF n, p = v_exp_poly(VMAX(V(-86.0f), x), &n);
    return VZERO(VCMP(x, V(-86.0f), _CMP_LT_OQ), VSCALE1(p, n));
}

/* coefficients from bench/fit_vmath.py */
static const float k_tanh[7] = {1.000000000e+00f, -3.333333135e-01f, 1.333320141e-01f, -5.394650623e-02f,
                                2.169989794e-02f, -8.176164702e-03f, 2.142236102e-03f};
static const float k_erf[8] = {1.128379226e+00f, -3.761263788e-01f, 1.128378361e-01f, -2.686547488e-02f,
                               5.221138708e-03f, -8.485438884e-04f, 1.127473806e-04f, -9.689741091e-06f};
static const float k_erfc[13] = {-4.686607440e-07f, 2.821123898e-01f,  2.817983329e-01f, 2.497970760e-01f,
                                 1.567305326e-01f,  1.736470759e-01f,  -2.978590429e-01f, 6.250801682e-01f,
                                 -1.156625509e+00f, 1.166263819e+00f,  -6.476615667e-01f, 1.892380267e-01f,
                                 -2.251910791e-02f};

static const float k_gelu_c[16] = {5.000000000e+00f, 7.000000000e+00f, 9.000000000e+00f, 1.225000000e+01f,
     5.000000000e-01f, 1.500000000e+00f, 2.500000000e+00f, 3.500000000e+00f, 5.000000000e+00f, 7.000000000e+00f,
     9.000000000e+00f, 1.225000000e+01f, 5.000000000e-01f, 1.500000000e+00f, 2.500000000e+00f, 3.500000000e+00f};
static const float k_gelu_q[8][16] = {
    {7.691930234e-02f, 5.589348078e-02f, 4.379878938e-02f, 3.235389665e-02f, 3.496188223e-01f, 2.057806700e-01f,
         1.413313299e-01f, 1.063451543e-01f, 7.691930234e-02f, 5.589348078e-02f, 4.379878938e-02f, 3.235389665e-02f,
         3.496188223e-01f, 2.057806700e-01f, 1.413313299e-01f, 1.063451543e-01f},
    {-1.434575487e-02f, -7.687903009e-03f, -4.753180780e-03f, -2.607052447e-03f, -2.241329104e-01f, -9.027128667e-02f,
         -4.561395198e-02f, -2.673424222e-02f, -1.434575487e-02f, -7.687903009e-03f, -4.753180780e-03f,
         -2.607052447e-03f, -2.241329104e-01f, -9.027128667e-02f, -4.561395198e-02f, -2.673424222e-02f},
    {2.595295431e-03f, 1.039093593e-03f, 5.100779817e-04f, 2.087528701e-04f, 1.187775806e-01f, 3.518686816e-02f,
         1.364828087e-02f, 6.387631875e-03f, 2.595295431e-03f, 1.039093593e-03f, 5.100779817e-04f, 2.087528701e-04f,
         1.187775806e-01f, 3.518686816e-02f, 1.364828087e-02f, 6.387631875e-03f},
    {-4.564856063e-04f, -1.381181210e-04f, -5.414633779e-05f, -1.661190254e-05f, -5.491364002e-02f, -1.249681506e-02f,
         -3.831136040e-03f, -1.459161518e-03f, -4.564856063e-04f, -1.381181210e-04f, -5.414633779e-05f,
         -1.661190254e-05f, -5.491364002e-02f, -1.249681506e-02f, -3.831136040e-03f, -1.459161518e-03f},
    {7.811133401e-05f, 1.803693158e-05f, 5.695088475e-06f, 1.312722929e-06f, 2.280294523e-02f, 4.108996131e-03f,
         1.017008326e-03f, 3.202828229e-04f, 7.811133401e-05f, 1.803693158e-05f, 5.695088475e-06f, 1.312722929e-06f,
         2.280294523e-02f, 4.108996131e-03f, 1.017008326e-03f, 3.202828229e-04f},
    {-1.305945898e-05f, -2.321747615e-06f, -5.940984806e-07f, -1.032623160e-07f, -8.706123568e-03f, -1.267254469e-03f,
         -2.573181991e-04f, -6.767751620e-05f, -1.305945898e-05f, -2.321747615e-06f, -5.940984806e-07f,
         -1.032623160e-07f, -8.706123568e-03f, -1.267254469e-03f, -2.573181991e-04f, -6.767751620e-05f},
    {2.268667458e-06f, 3.190799873e-07f, 5.765972588e-08f, 8.536972018e-09f, 3.247146262e-03f, 3.806132881e-04f,
         6.474537076e-05f, 1.374838666e-05f, 2.268667458e-06f, 3.190799873e-07f, 5.765972588e-08f, 8.536972018e-09f,
         3.247146262e-03f, 3.806132881e-04f, 6.474537076e-05f, 1.374838666e-05f},
    {-3.635597352e-07f, -4.120738240e-08f, -4.827950484e-09f, -6.569725874e-10f, -1.039265539e-03f, -1.021854478e-04f,
         -1.500843882e-05f, -2.854611466e-06f, -3.635597352e-07f, -4.120738240e-08f, -4.827950484e-09f,
         -6.569725874e-10f, -1.039265539e-03f, -1.021854478e-04f, -1.500843882e-05f, -2.854611466e-06f},
};

VINLINE VF v_poly(VF t, const float *c, int n) {
    VF p = V(c[n - 1]);
#pragma GCC unroll 16
    for (int i = n - 2; i >= 0; i--) p = VFMA(p, t, V(c[i]));
    return p;
}

/* tanh: |x| < 0.625 odd polynomial; else sign(x) (1 - e) / (1 + e), e = exp(-2|x|). */
VINLINE VF v_tanh(VF x) {
    VF ax = VABS(x);
    VF small = VMUL(x, v_poly(VMUL(x, x), k_tanh, 7));
    VF e = v_exp(VMUL(ax, V(-2.0f)));
    VF big = VDIV(VSUB(V(1.0f), e), VADD(V(1.0f), e));
    big = VSIGN(big, x);
    return VSEL(big, small, VCMP(ax, V(0.625f), _CMP_LT_OQ));
}

/* sigmoid: e = exp(-|x|), 1/(1+e) for x >= 0, e/(1+e) otherwise (no overflow, no cancellation). */
VINLINE VF v_sigmoid(VF x) {
    VF e = v_exp(VSUB(V(0.0f), VABS(x)));
    VF num = VSEL(e, V(1.0f), VCMP(x, V(0.0f), _CMP_GE_OQ));
    return VDIV(num, VADD(V(1.0f), e));
}

/* For z = zh + zl >= 0: *erf_small = erf(zh), accurate for zh < 1; returns erfc(z), accurate for
 * z >= 0.5: exp(-z^2) with z^2 carried in two floats, times a fit of erfc(z) e^(z^2) in
 * t = 1/(1 + z/2); 0 from z >= 10. */
VINLINE VF v_erfc_tail(VF zh, VF zl, VF *erf_small) {
    VF z2 = VMUL(zh, zh);
    *erf_small = VMUL(zh, v_poly(z2, k_erf, 8));
    VF zc = VMIN(VMAX(zh, V(0.5f)), V(10.0f));
    VF t = VDIV(V(1.0f), VFMA(zc, V(0.5f), V(1.0f)));
    VF R = v_poly(t, k_erfc, 13);
    /* z^2 = hi + lo: hi = zc^2, lo = (zc^2 - hi) + 2 zc zl */
    VF hi = VMUL(zc, zc);
    VF lo = VFMA(VADD(zc, zc), zl, VFMS(zc, zc, hi));
    VF ez = VMUL(v_exp(VSUB(V(0.0f), hi)), VSUB(V(1.0f), lo));
    VF erfc = VMUL(ez, R);
    return VZERO(VCMP(zh, V(10.0f), _CMP_GE_OQ), erfc);
}

VINLINE VF v_erf(VF x) {
    VF z = VABS(x), es;
    VF erfc = v_erfc_tail(z, V(0.0f), &es);
    VF y = VSEL(VSUB(V(1.0f), erfc), es, VCMP(z, V(1.0f), _CMP_LT_OQ));
    y = VSIGN(y, x);
    return VSEL(y, x, v_isnan(x));
}

/* gelu(x) = x Phi(x): x Phi(-a) for x < 0, x - x Phi(-a) for x >= 0 (a = |x|; both relative-accurate, no
 * cancellation), Phi(-a) = Q(a) e^(-a^2/2). Q = erfcx(a/sqrt2)/2 by interval: eight of them, picked by the bits
 * of a + 4 (quarter octaves of [4, 16)), a degree-7 polynomial in a - centre each, its coefficients gathered by a
 * permute (k_gelu_c, k_gelu_q); e^(-x^2/2) with x^2 = hi + lo exactly (the exp of -hi/2 times 1 - lo/2). No
 * division and one exp (the erfc form above takes both). x is clamped to [-20, 20]: beyond, x Phi(-a) underflows
 * to 0 (gelu is x, or -0; -inf gives NaN, -inf * 0 like the definition). */
VINLINE VF v_gelu_erf(VF x) {
    VF xc = VMIN(VMAX(x, V(-20.0f)), V(20.0f));
    VF a = VABS(xc);
    VI i = VBITS_SHR(VADD(VMIN(a, V(11.5f)), V(4.0f)), 21); /* (i & 7): lane of the interval */
    VF u = VSUB(VMIN(a, V(14.5f)), VPERM(k_gelu_c, i));
    VF q = VPERM(k_gelu_q[7], i);
#pragma GCC unroll 8
    for (int d = 6; d >= 0; d--) q = VFMA(q, u, VPERM(k_gelu_q[d], i));
    VF hi = VMUL(xc, xc), lo = VFMS(xc, xc, hi);
    VF n, p = v_exp_poly(VMAX(VMUL(hi, V(-0.5f)), V(-104.0f)), &n);
    VF e = VSCALE2(p, n);
    VF t = VMUL(xc, q);
    t = VFNMA(t, VMUL(lo, V(0.5f)), t); /* x Q(a) (1 - lo/2) */
    VF y = VSEL(VMUL(t, e), VFNMA(t, e, x), VCMP(x, V(0.0f), _CMP_GE_OQ));
    return VSEL(y, VMUL(x, V(0.0f)), VCMP(x, V(-INFINITY), _CMP_NGT_UQ)); /* NaN, -inf: NaN (-inf * 0, as the math) */
}

/* gelu_tanh(x) = x/2 (1 + tanh(u)) = x sigmoid(2u), 2u = x (c1 + c2 x^2). */
VINLINE VF v_gelu_tanh(VF x) {
    const float c1 = 1.59576912160573071f, c2 = 0.0713548162726008f; /* 2 sqrt(2/pi), c1 * 0.044715 */
    VF u2 = VMUL(x, VFMA(V(c2), VMUL(x, x), V(c1)));
    return VMUL(x, v_sigmoid(u2));
}

VINLINE VF v_silu(VF x) { return VMUL(x, v_sigmoid(x)); }

/* QuickGelu: x sigmoid(a x), a x rounded once (as the op's reference computes it in float) */
VINLINE VF v_quick_gelu(VF x, VF a) { return VMUL(x, v_sigmoid(VMUL(a, x))); }

VINLINE VF v_relu(VF x) { return VSEL(VMAX(x, V(0.0f)), x, v_isnan(x)); }

/* The array maps of a width (MAP_FN, defined by the includer: whole vectors, then the tail; MAP_FN1 the same for
   a function of x and a broadcast parameter) and the activation dispatch over them, named P##exp ... P##act;
   FALLBACK(n, y, x, act, p, q) takes the trivial activations (NONE, CLIP, LEAKY_RELU). */
#define VMATH_MAPS(P, FALLBACK)                                                                                        \
    MAP_FN(P##exp, v_exp)                                                                                              \
    MAP_FN(P##tanh, v_tanh)                                                                                            \
    MAP_FN(P##erf, v_erf)                                                                                              \
    MAP_FN(P##sigmoid, v_sigmoid)                                                                                      \
    MAP_FN(P##gelu_erf, v_gelu_erf)                                                                                    \
    MAP_FN(P##gelu_tanh, v_gelu_tanh)                                                                                  \
    MAP_FN(P##silu, v_silu)                                                                                            \
    MAP_FN(P##relu, v_relu)                                                                                            \
    MAP_FN1(P##quick_gelu, v_quick_gelu)                                                                               \
    static void P##act(int64_t n, float *y, const float *x, wm_act act, float p, float q) {                            \
        switch (act) {                                                                                                 \
        case WM_ACT_RELU: P##relu(n, y, x); return;                                                                    \
        case WM_ACT_GELU_ERF: P##gelu_erf(n, y, x); return;                                                            \
        case WM_ACT_GELU_TANH: P##gelu_tanh(n, y, x); return;                                                          \
        case WM_ACT_SILU: P##silu(n, y, x); return;                                                                    \
        case WM_ACT_SIGMOID: P##sigmoid(n, y, x); return;                                                              \
        case WM_ACT_TANH: P##tanh(n, y, x); return;                                                                    \
        case WM_ACT_QUICK_GELU: P##quick_gelu(n, y, x, p); return;                                                     \
        default: FALLBACK(n, y, x, act, p, q); return;                                                                 \
        }                                                                                                              \
    }

#endif
