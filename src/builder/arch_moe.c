/*
 * arch_moe.c - mixture-of-experts layers from the family table's MoE keys (see arch.h): how many experts, how many
 * a token takes, their width, the shared expert, which layers are sparse, and the checks of the expert tensors a
 * checkpoint stores (transformers saves expert e of layer i as its own gate / up / down matrices for Mixtral and
 * Qwen-MoE; GraniteMoE stacks a layer's experts in two 3-D tensors).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch_impl.h"
#include "core/arena.h"
#include "core/error.h"

#define MOE_MAX_EXPERTS 65536
#define MOE_MAX_WIDTH (1 << 24)

/* A boolean key (def when absent or null) into *out; an error naming it when it is no boolean. */
static wm_status key_bool(const wm_arch *a, const char *key, int def, int *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->cfg->root, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsBool(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", a->cfg->file, key);
    *out = cJSON_IsTrue(v);
    return WM_OK;
}

/* The sparse layers: (i + 1) % decoder_sparse_step == 0 and i not in mlp_only_layers (transformers' rule), or
   every layer when the family has no such keys. */
static wm_status sparse_layers(wm_arch *a, const wm_family *f, wm_error *err) {
    const char *file = a->cfg->file;
    int64_t step = 1;
    if (f->moe_sparse_keys && !arch_cfg_int(a, "decoder_sparse_step", 1, 1, 1 << 20, &step, err)) return err->status;
    a->moe_layer = malloc((size_t)a->L);
    if (!a->moe_layer) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < a->L; i++) a->moe_layer[i] = (i + 1) % step == 0;
    const cJSON *v = f->moe_sparse_keys ? cJSON_GetObjectItemCaseSensitive(a->cfg->root, "mlp_only_layers") : NULL;
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsArray(v))
            return wm_err(err, WM_ERR_INPUT, "%s: field 'mlp_only_layers': expected a list of layer indices", file);
        for (const cJSON *e = v->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < 0 ||
                e->valuedouble >= (double)a->L)
                return wm_err(err, WM_ERR_INPUT, "%s: field 'mlp_only_layers': expected layer indices from 0 to %lld",
                              file, (long long)a->L - 1);
            a->moe_layer[(int64_t)e->valuedouble] = 0;
        }
    }
    a->n_moe_layers = 0;
    for (int64_t i = 0; i < a->L; i++) a->n_moe_layers += a->moe_layer[i];
    return WM_OK;
}

wm_status wm_moe_resolve(wm_arch *a, wm_error *err) {
    const wm_family *f = a->fam;
    if (f->keys[WM_FK_MOE] != WM_KEY_USED) return WM_OK;
    const wm_hf_config *c = a->cfg;
    /* transformers spells the count num_local_experts (Mixtral; Qwen3-MoE as saved by transformers 5) or
       num_experts (Qwen's own configs) */
    const char *ekey = "num_local_experts";
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(c->root, ekey);
    if (!ev || cJSON_IsNull(ev)) ekey = "num_experts";
    if (!arch_cfg_int(a, ekey, f->moe_experts, 1, MOE_MAX_EXPERTS, &a->n_experts, err) ||
        !arch_cfg_int(a, "num_experts_per_tok", f->moe_top_k, 1, MOE_MAX_EXPERTS, &a->top_k, err))
        return err->status;
    if (a->top_k > a->n_experts)
        return wm_err(err, WM_ERR_INPUT, "%s: field 'num_experts_per_tok': %lld is more than the %lld experts (%s)",
                      c->file, (long long)a->top_k, (long long)a->n_experts, ekey);
    a->moe_I = a->I;
    if (f->moe_inter_key && !arch_cfg_int(a, f->moe_inter_key, f->moe_inter_def, 1, MOE_MAX_WIDTH, &a->moe_I, err))
        return err->status;
    if (f->moe_shared_key &&
        !arch_cfg_int(a, f->moe_shared_key, f->moe_shared_def, 0, MOE_MAX_WIDTH, &a->shared_I, err))
        return err->status;
    a->shared_gated = !f->moe_shared_ungated;
    a->moe_norm = 1;
    wm_status s;
    if (f->moe_norm_key && (s = key_bool(a, f->moe_norm_key, f->moe_norm_def, &a->moe_norm, err))) return s;
    if (a->act != WM_ACT_SILU)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s': the experts are built as SwiGLU (silu); activation "
                      "'%s' is not supported for them", c->file, c->key_act ? c->key_act : "hidden_act",
                      wm_act_name(a->act));
    uint64_t p;
    if (!wm_mul_u64((uint64_t)a->n_experts, (uint64_t)a->moe_I, &p) || !wm_mul_u64(p, 2 * (uint64_t)a->H, &p) ||
        p > (1ull << 40))
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s': experts x 2 x expert width x hidden_size is over 2^40 "
                      "parameters in one layer", c->file, ekey);
    return sparse_layers(a, f, err);
}

int wm_moe_stacked(const wm_arch *a) {
    const wm_scheme *s = a->sch;
    return s && s->experts[0] && !strstr(s->experts[0], "%e");
}

int wm_moe_expert_name(const wm_arch *a, int layer, int64_t e, int which, char *out, size_t n) {
    const wm_scheme *s = a->sch;
    char pat[192];
    if (!s || !s->experts[which] || !arch_expand(s->experts[which], a->prefix, layer, "", pat, sizeof pat)) return 0;
    const char *at = strstr(pat, "%e");
    int k = at ? snprintf(out, n, "%.*s%lld%s.weight", (int)(at - pat), pat, (long long)e, at + 2)
               : snprintf(out, n, "%s.weight", pat);
    return k > 0 && (size_t)k < n;
}

/* Expert tensor `name` of layer i is in st with dims[rank] and a float dtype; an error naming it otherwise. */
static wm_status check_expert(const wm_arch *a, const wm_st_file *st, const char *name, int64_t i, const char *what,
                              const int64_t *dims, int rank, wm_error *err) {
    const wm_st_tensor *t = arch_st_find(st, name);
    if (!t)
        return wm_err(err, WM_ERR_INPUT, "missing tensor '%s' (%s that %s gives layer %lld)", name, what,
                      a->cfg->file, (long long)i);
    int ok = t->rank == (size_t)rank;
    for (int d = 0; ok && d < rank; d++) ok = t->shape[d] == dims[d];
    if (!ok)
        return rank == 2 ? wm_err(err, WM_ERR_INPUT, "tensor '%s': expected shape [%lld, %lld] from %s", name,
                                  (long long)dims[0], (long long)dims[1], a->cfg->file)
                         : wm_err(err, WM_ERR_INPUT, "tensor '%s': expected shape [%lld, %lld, %lld] from %s", name,
                                  (long long)dims[0], (long long)dims[1], (long long)dims[2], a->cfg->file);
    int32_t dt = wm_st_dtype_onnx(t->dtype);
    if (dt != 1 && dt != 10 && dt != 16 && dt != 11)
        return wm_err(err, WM_ERR_UNSUPPORTED, "tensor '%s': dtype %s is not supported (F32, F16, BF16, F64)", name,
                      wm_st_dtype_name(t->dtype));
    return WM_OK;
}

wm_status wm_moe_check(const wm_arch *a, const wm_st_file *st, wm_error *err) {
    int stacked = wm_moe_stacked(a);
    char what[96];
    for (int64_t i = 0; a->moe_layer && i < a->L; i++) {
        if (!a->moe_layer[i]) continue;
        for (int64_t e = 0; e < (stacked ? 1 : a->n_experts); e++)
            for (int w = 0; w < 3; w++) {
                if (stacked && w == 1) continue;
                char name[160];
                if (!wm_moe_expert_name(a, (int)i, e, w, name, sizeof name))
                    return wm_err(err, WM_ERR_INPUT, "expert tensor name of layer %lld too long", (long long)i);
                wm_status s;
                if (stacked) {
                    int64_t d[3] = {a->n_experts, w == 0 ? 2 * a->moe_I : a->H, w == 0 ? a->H : a->moe_I};
                    snprintf(what, sizeof what, "the %lld experts stacked", (long long)a->n_experts);
                    s = check_expert(a, st, name, i, what, d, 3, err);
                } else {
                    int64_t d[2] = {w < 2 ? a->moe_I : a->H, w < 2 ? a->H : a->moe_I};
                    snprintf(what, sizeof what, "expert %lld of the %lld", (long long)e, (long long)a->n_experts);
                    s = check_expert(a, st, name, i, what, d, 2, err);
                }
                if (s) return s;
            }
    }
    return WM_OK;
}

size_t wm_moe_names(const wm_arch *a, char (*names)[160], size_t cap) {
    size_t n = 0;
    int stacked = wm_moe_stacked(a);
    for (int64_t i = 0; a->moe_layer && i < a->L; i++)
        for (int64_t e = 0; a->moe_layer[i] && e < (stacked ? 1 : a->n_experts); e++)
            for (int w = 0; w < 3; w++) {
                if (stacked && w == 1) continue;
                if (names && n < cap && !wm_moe_expert_name(a, (int)i, e, w, names[n], sizeof names[n]))
                    names[n][0] = 0;
                n++;
            }
    return n;
}

uint64_t wm_moe_params(const wm_arch *a) {
    uint64_t p;
    if (!a->moe_layer) return 0;
    if (!wm_mul_u64((uint64_t)a->n_moe_layers * 3, (uint64_t)a->n_experts, &p) ||
        !wm_mul_u64(p, (uint64_t)a->moe_I, &p) || !wm_mul_u64(p, (uint64_t)a->H, &p))
        return UINT64_MAX;
    return p;
}

void wm_moe_features(const wm_arch *a, wm_json *j) {
    if (!a->moe_layer) return;
    char b[256];
    size_t used = (size_t)snprintf(b, sizeof b, "mixture of experts (com.microsoft MoE) on %lld of %lld layers",
                                   (long long)a->n_moe_layers, (long long)a->L);
    if (a->n_moe_layers < a->L) {
        used += (size_t)snprintf(b + used, sizeof b - used, " (dense MLP on layers");
        for (int64_t i = 0, k = 0; i < a->L && used < sizeof b; i++)
            if (!a->moe_layer[i])
                used += (size_t)snprintf(b + used, sizeof b - used, "%s %lld", k++ ? "," : "", (long long)i);
        if (used < sizeof b) used += (size_t)snprintf(b + used, sizeof b - used, ")");
    }
    if (used < sizeof b)
        snprintf(b + used, sizeof b - used, ": %lld experts (SwiGLU %s, width %lld), top %lld of a softmax router, "
                 "%s", (long long)a->n_experts, wm_act_name(a->act), (long long)a->moe_I, (long long)a->top_k,
                 a->moe_norm ? "weights renormalized" : "weights not renormalized");
    wm_json_str(j, NULL, b);
    if (a->shared_I > 0) {
        snprintf(b, sizeof b, "shared expert (width %lld) %s", (long long)a->shared_I,
                 a->shared_gated ? "scaled by sigmoid(shared_expert_gate x)" : "added without a gate");
        wm_json_str(j, NULL, b);
    }
}
