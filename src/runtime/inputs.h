/*
 * inputs.h - inputs for a session made from its input specs, or read from a
 * file, for perf and eval.
 *
 * Symbolic dims are bound from explicit NAME=VALUE pairs first, then, for
 * the inputs of the decoder convention (input_ids, position_ids [batch,
 * sequence], attention_mask [batch, past + sequence], past_key_values.N.*
 * [batch, heads, past, head_dim]), by role; then by
 * name: batch-like names take the batch size, names with "past" the past
 * length, "total" or "a + b" forms the past plus sequence length, other
 * names the sequence length (the first dim of an input defaults to the
 * batch). Values: integer inputs that index an embedding table (a Gather
 * or GatherBlockQuantized, possibly after Cast/Reshape) are uniform below
 * its row count (the vocab size); names with "mask" are ones; "position"
 * ids count up from the past length; other integers are zeros; floats are
 * uniform in [0, 1) for 4-D inputs (pixels) and [-1, 1) otherwise. Same
 * seed, same inputs.
 */
#ifndef WM_RUNTIME_INPUTS_H
#define WM_RUNTIME_INPUTS_H

#include "winml/runtime.h"

typedef struct wm_dim_bind {
    const char *name;
    int64_t value;
} wm_dim_bind;

/* Values of one input drawn uniformly in [lo, hi) (a recipe's export value_range; hi excluded). */
typedef struct wm_input_range {
    const char *name;
    double lo, hi;
} wm_input_range;

typedef struct wm_input_opts {
    const wm_dim_bind *dims;
    size_t n_dims;
    int64_t batch; /* default 1 */
    int64_t seq;   /* default 128 */
    int64_t past;  /* default 0 */
    uint64_t seed;
    /* inputs with a range: floats uniform in it, integers in [ceil lo, hi) within an embedding table's rows;
       masks (names holding "mask") stay ones whatever their range */
    const wm_input_range *ranges;
    size_t n_ranges;
} wm_input_opts;

/* A set of input tensors and the buffers they own. */
typedef struct wm_inputs {
    wm_tensor *t;
    size_t n;
    void **bufs;
} wm_inputs;

/* Fills in with one tensor per session input (owned by in; release with wm_inputs_free). */
wm_status wm_inputs_make(const wm_session *s, const wm_input_opts *o, wm_inputs *in, wm_error *err);

/*
 * Reads the session's inputs by name from a safetensors file, or from a
 * numpy .npz / .npy (by the name's suffix: arrays by input name; int64
 * arrays into int32 inputs and float64 into float32 when every value
 * converts). Types and fixed dims are checked when the session runs.
 * Owned by in.
 */
wm_status wm_inputs_read(const wm_session *s, const char *path, wm_inputs *in, wm_error *err);

void wm_inputs_free(wm_inputs *in);

/* The value range [0, n) of integer input i when it indexes an embedding table; 0 when unknown. */
int64_t wm_inputs_index_range(const wm_session *s, size_t i);

#endif
