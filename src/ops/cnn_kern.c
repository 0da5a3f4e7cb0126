/* cnn_kern.c - small vector kernels of the vision ops (scalar versions; see conv_impl.h). */
#include "ops/conv_impl.h"

void wm_conv_axpy(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
