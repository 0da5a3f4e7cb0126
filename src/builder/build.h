/*
 * build.h - the build pipeline: checkpoint -> export -> optim -> quant ->
 * compile, one output folder.
 *
 * Stages run through one interface (wm_stage_fn); a stage reports done,
 * skipped (its recipe section is null) or not run (not available in this
 * build yet: optim and compile today), each recorded with its reason in
 * build_manifest.json and on stderr. A recipe asking for a quantization
 * that cannot be produced yet fails up front (WM_ERR_UNSUPPORTED) rather
 * than silently writing float32.
 *
 * The output folder is assembled under a sibling temporary name and renamed
 * into place at the end (the commit point), so a failure leaves no half
 * artifact. An existing folder that a winml build wrote with this build's
 * cache_key (recipe, checkpoint files, seed, version) is reused as it is;
 * any other is refused unless rebuild is set (and is only replaced when it
 * holds a previous winml build).
 */
#ifndef WM_BUILDER_BUILD_H
#define WM_BUILDER_BUILD_H

#include <stdint.h>

#include "core/json.h"
#include "winml/winml.h"

typedef struct wm_build_opts {
    const char *model;      /* -m: checkpoint folder */
    const char *out_dir;    /* -o */
    const char *recipe;     /* -c, NULL: defaults for the checkpoint */
    int task;               /* -t, -1: the recipe's or the checkpoint's */
    int precision;          /* -p, -1: the recipe's */
    const char *ep, *device;
    int no_compile, rebuild;
    int random;             /* --random-weights */
    uint64_t seed;
    int export_only;        /* `winml export`: model files only */
    int progress;           /* stage lines and per-layer progress on stderr (a TTY) */
    int quiet;              /* no stage notes on stderr */
    uint64_t external_threshold; /* 0: 100 MiB */
    const char *analyze_rules;   /* --analyze: the EP rules folder (its <ep>.json); NULL: no analysis */
} wm_build_opts;

/* Runs the pipeline; summary receives the manifest JSON (an object). */
wm_status wm_build(const wm_build_opts *o, wm_json *summary, wm_error *err);

#endif
