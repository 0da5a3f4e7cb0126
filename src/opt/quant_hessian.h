/* quant_hessian.h - GPTQ's calibration statistics (H = X^T X per MatMul input) from winml's engine. */
#ifndef WM_OPT_QUANT_HESSIAN_H
#define WM_OPT_QUANT_HESSIAN_H

#include "opt/quant.h"

/* Statistics by value; each value name and h malloc'ed (wm_quant_hessians_free). */
typedef struct wm_quant_hessians {
    wm_quant_hessian *v;
    size_t n;
} wm_quant_hessians;

/*
 * Runs the float model at model_path (the same model as g, which lists the MatMul / bias-free Gemm inputs that c
 * selects) on n_seq sequences of seq_len tokens in winml's engine, and sums x x^T over the rows of each such
 * input. ids [n_seq * seq_len]: the tokens fed as input_ids; NULL: seeded uniform tokens (runtime/inputs.h, seed
 * seed + sequence). Other inputs as runtime/inputs.h makes them (mask ones, positions counting, no past).
 * diag: only H's diagonal (h [K]: sum of x_k^2, the importance of wm_quant_config.importance), for any K.
 * *out owns the result (wm_quant_hessians_free; freed on error too).
 */
wm_status wm_quant_hessians_collect(const char *model_path, wm_graph *g, const wm_quant_config *c,
                                    const int32_t *ids, size_t n_seq, size_t seq_len, uint64_t seed, int diag,
                                    wm_quant_hessians *out, wm_error *err);

void wm_quant_hessians_free(wm_quant_hessians *h);

#endif
