/*
 * weights.h - turning checkpoint tensors (or seeded random values) into
 * float32 ONNX initializers, streamed.
 *
 * A sink either keeps every tensor inline (bytes in the model arena; for
 * models under the external-data threshold) or streams each tensor of at
 * least min_bytes straight into one data file as it is added, at aligned
 * offsets, hashing the bytes on the way (SHA-256). Streaming is a
 * pipeline: values are converted into one of four 16 MiB slots while a
 * hasher thread and a writer thread each take the previous ones in order,
 * so a build's memory stays far below the model size and conversion,
 * hashing and the copy into the page cache overlap. float16 / bfloat16 / float64 sources are converted on the
 * fly; 2-D tensors may be transposed on the way (Linear [out, in] ->
 * MatMul [in, out]) by blocks. With release_source set (sources are file
 * mappings), pages of the source are released after each tensor
 * (MADV_DONTNEED), so the mapped checkpoint does not add up in the
 * resident set either.
 */
#ifndef WM_BUILDER_WEIGHTS_H
#define WM_BUILDER_WEIGHTS_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "core/sha256.h"
#include "hf/safetensors.h"
#include "onnx/graph.h"

typedef struct wm_wsrc {
    const wm_st_tensor *t; /* checkpoint tensor, or NULL for generated values */
    int transpose;         /* store t^T (t must be 2-D) */
    uint64_t seed;         /* generated: uniform in [-scale, scale] from a stream keyed by (seed, name) */
    float scale, fill;     /* generated with scale == 0: every value is fill */
    float add;             /* added to every value of t (Gemma's norm weights stored as 1 + w); not to generated */
    const float *vals;     /* with t NULL: the values themselves (computed at export: BatchNorm folded into Conv) */
    int moe_fc, moe_layer; /* vals stacked from a checkpoint's experts: fc 1 / 2 of the MoE of that layer (0: not) */
} wm_wsrc;

/* All of t's values as float32 into dst (t->numel floats), converted from its dtype. */
void wm_st_read_f32(const wm_st_tensor *t, float *dst);

/* An initializer made from a checkpoint tensor, or stacked from a layer's experts: where the export's weights came
   from (wm_wsink.recs). */
typedef struct wm_wsrc_rec {
    char *name;              /* the initializer's name (malloc'ed) */
    const wm_st_tensor *t;   /* its checkpoint tensor; NULL for stacked experts */
    int transpose;           /* stored as t^T */
    int moe_fc, moe_layer;   /* stacked experts: fc1 [E, 2I, H] / fc2 [E, H, I] of the MoE of that layer */
} wm_wsrc_rec;

#define WM_WSINK_SLOTS 4           /* slots of the convert -> (hash, write) pipeline */
#define WM_WSINK_SLOT (16u << 20)   /* bytes per slot */

typedef struct wm_wsink_stage {
    struct wm_wsink *s;
    int stage; /* 0 hash, 1 write */
} wm_wsink_stage;

typedef struct wm_wsink {
    wm_onnx_model *m;
    int fd;                   /* -1: inline mode */
    char path[PATH_MAX];      /* data file */
    char location[256];       /* as written in the model */
    uint64_t pos;             /* bytes produced for the data file */
    uint64_t min_bytes, align;
    wm_sha256 sha;            /* of the data file, updated by the hasher thread */
    uint64_t n_tensors, n_external, param_bytes;
    int release_source; /* sources are file mappings: drop their pages after use (never for heap memory) */
    /* the pipeline (external mode): the producer fills slot[cur]; stage 0 (hasher) and stage 1 (writer) threads
     * each take the queued slots in order; queued[k] holds the bits of the stages still to run on slot k */
    uint8_t *slot[WM_WSINK_SLOTS];
    size_t slot_n[WM_WSINK_SLOTS];
    int queued[WM_WSINK_SLOTS];
    int cur, next[2], stop, werr, thread_on, sync_on;
    size_t cur_n;
    uint64_t w_off;           /* bytes written by the writer thread */
    pthread_t thread[2];
    wm_wsink_stage stage[2];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    wm_wsrc_rec *recs;        /* each initializer added from a checkpoint tensor (freed by wm_wsink_close unless taken) */
    size_t n_recs;
} wm_wsink;

/*
 * data_path NULL: every tensor inline. Otherwise tensors of >= 1 KiB go to
 * data_path (created, truncated), referenced from the model as location.
 * s owns a descriptor and buffers until wm_wsink_close.
 */
wm_status wm_wsink_init(wm_wsink *s, wm_onnx_model *m, const char *data_path, const char *location, wm_error *err);
/* Adds float32 initializer name with dims to g, values from src. */
wm_status wm_wsink_add(wm_wsink *s, wm_graph *g, const char *name, const int64_t *dims, size_t nd, const wm_wsrc *src,
                       wm_error *err);
/* Flushes and fsyncs the data file; sha_hex receives its digest ("" in inline mode). */
wm_status wm_wsink_finish(wm_wsink *s, char sha_hex[65], wm_error *err);
/* Drops the source pages of checkpoint tensor t from this process when s releases its sources (file mappings):
   for tensors read outside the sink (a mixture of experts' matrices, stacked before they are added). */
void wm_wsink_release(const wm_wsink *s, const wm_st_tensor *t);
/* Frees n records and the array. */
void wm_wsrc_recs_free(wm_wsrc_rec *v, size_t n);
/* Releases buffers, the descriptor (does not remove the file) and the records not taken. */
void wm_wsink_close(wm_wsink *s);


#endif
