/*
 * onnx_out.h - a model file and its external data file, replaced in one step.
 *
 * A model goes to <path> and, when its weights go external, to a data file beside it. Replacing an existing
 * output must never leave a model over a data file that is not its own, whenever the process dies:
 *   - the new data file gets the first of the names <base>.data, <base>.1.data, ... that neither the model being
 *     replaced nor the input model reads (so two names alternate; a file already there is the orphan of an
 *     interrupted write of this output and is replaced), so the rename of the model is the single commit point
 *     and the old pair stays whole until then;
 *   - after the commit the data files of the replaced model that carry those names are removed (never one the
 *     input model still reads, never a file of another name);
 *   - the model records its data file's size and a fingerprint (metadata_props "winml.external_data": 64
 *     samples of 4 KiB spread over the file, hashed), which wm_onnx_load checks, so a pair mixed by other means
 *     (a partial copy, another tool) is refused by name instead of computing with the wrong weights. A file
 *     that only grew past the recorded size (keep_data appends) still matches.
 * Both writers (wm_onnx_save, wm_quant_save) go through wm_onnx_pair.
 */
#ifndef WM_ONNX_OUT_H
#define WM_ONNX_OUT_H

#include <limits.h>
#include <stdint.h>

#include "core/output.h"
#include "onnx/onnx_model.h"

#define WM_DATA_RECORD_KEY "winml.external_data"

typedef struct wm_onnx_pair {
    const char *path;                  /* the model's final path */
    char data_name[NAME_MAX + 1];      /* the data file's location as the model writes it */
    char data_path[PATH_MAX];          /* resolved inside the model's folder */
    char tmp_data[PATH_MAX + 64], tmp_model[PATH_MAX + 64];
    int data_fd, model_fd, data_slot, model_slot;
    char prev[4][NAME_MAX + 1];        /* data files (by our names) of the model being replaced */
    size_t n_prev;
    int in_is_out;                     /* the input model is the file being replaced */
} wm_onnx_pair;

/*
 * Starts writing model path: data_name NULL picks the name (as above); a name given is used as it is
 * (a private staging folder). in: the model being saved, whose own data files are never removed while it is
 * another file than path (may be NULL). Nothing is created yet. Release with wm_onnx_pair_end.
 */
wm_status wm_onnx_pair_begin(wm_onnx_pair *p, const char *path, const char *data_name, const wm_onnx_model *in,
                             wm_error *err);
/* The temporary data file (p->data_fd) and the temporary model file (p->model_fd). */
wm_status wm_onnx_pair_open_data(wm_onnx_pair *p, wm_error *err);
wm_status wm_onnx_pair_open_model(wm_onnx_pair *p, wm_error *err);
/* Renames the data file (when opened) and then the model into place, then retires the replaced model's data
 * files. The model's bytes must be written and synced. */
wm_status wm_onnx_pair_commit(wm_onnx_pair *p, wm_error *err);
/* Closes what is open and removes what was not committed. */
void wm_onnx_pair_end(wm_onnx_pair *p);

/* The fingerprint of the first `bytes` bytes of fd (pread), 64 hex digits. */
wm_status wm_onnx_data_fingerprint(int fd, uint64_t bytes, char hex[65], wm_error *err);

/*
 * Replaces mp's metadata_props, for the encode, by a copy (in arena a) where the record of data file loc is
 * set (loc NULL: removed); *saved_props / *saved_n keep the original array for wm_onnx_record_restore.
 */
wm_status wm_onnx_record_set(wm_onnx_modelproto *mp, wm_arena *a, const char *loc, uint64_t bytes, const char *hex,
                             wm_onnx_sse ***saved_props, size_t *saved_n, wm_error *err);
void wm_onnx_record_restore(wm_onnx_modelproto *mp, wm_onnx_sse **saved_props, size_t saved_n);

/* Checks a loaded model's record against its mapped data file (no record, or a malformed one: WM_OK). */
wm_status wm_onnx_record_check(const wm_onnx_model *m, wm_error *err);

/*
 * Before the work of a command that writes model path from input model in (NULL: none): the path is a file
 * name, the lock of path is taken (release with wm_unlock_output), stale temporaries beside it are removed, an
 * existing path must be a regular file that winml wrote (producer_name "winml") unless overwrite, must not be
 * a data file of in, and need bytes must fit on the disk.
 */
wm_status wm_onnx_out_begin(const char *path, const wm_onnx_model *in, int overwrite, uint64_t need,
                            wm_lockfile *lock, wm_error *err);

/* Marks a model a command of winml wrote (producer_name "winml", producer_version this version), which lets a
 * later run replace it without --overwrite (wm_onnx_out_begin). */
wm_status wm_onnx_set_producer(wm_onnx_model *m, wm_error *err);

#endif
