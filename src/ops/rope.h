/* rope.h - the rotary-embedding rotation shared by RotaryEmbedding and GroupQueryAttention (rotary.c). */
#ifndef WM_OPS_ROPE_H
#define WM_OPS_ROPE_H

#include <stdint.h>

/*
 * Rotates the first rot dims of x in place: pairs (x[i], x[i + rot/2]), or
 * (x[2i], x[2i+1]) when interleaved, by cos c[i] / sin s[i] (rot/2 each).
 */
void wm_rope_rotate(float *x, int64_t rot, const float *c, const float *s, int interleaved);

#endif
