/*
 * sweep.h - `winml sweep`: every recipe of a folder (the reference's layout
 * <org>_<name>/[<ep>/<device>/]<task>_<precision>_config[_<part>].json) or of
 * a list file, built, analyzed, timed and compared, each stage in its own
 * child process (fork + exec of winml itself) under a wall-clock limit (the
 * child is killed) and an address-space limit (RLIMIT_AS), with the results
 * in the reference's layout:
 *
 *   RESULTS/eval_results/<date>/environment.json
 *   RESULTS/eval_results/<date>/models/<org>__<name>__<task>__<precision>[__<part>][__<ep>-<device>]/eval_result.json
 *   RESULTS/eval_results/<date>/summary.json      (ours: one row per recipe of this run's slice)
 *
 * The key is the reference's <org>__<name>__<task>__<precision>; a part
 * (encoder, decoder ...) and an EP folder other than cpu/cpu are appended so
 * that every recipe of the reference's 299 has its own key. Every file is
 * written to a temporary name and renamed; a file the sweep did not write
 * (no "winml_sweep" object in it) is never replaced. --resume skips the
 * recipes whose eval_result.json is complete; --shard I/N runs the recipes
 * whose index in key order is I modulo N (a Slurm array task or a Kubernetes
 * indexed Job each run one slice into its own folder; the union of the
 * slices' models/ folders is the whole sweep).
 *
 * Stages: build (with --random-weights from a tiny config.json made from the
 * recipe: canonical config keys, sequence room from its inputs), analyze
 * (--ep cpu), perf, export (the plain float32 reference, same seed) and
 * eval --mode compare. Failure classes are the reference's: EXPORT_FAIL,
 * ANALYZER_BLOCK, OPT_FAIL, COMPILE_FAIL, RUNTIME_FAIL, ENVIRONMENT, TIMEOUT,
 * UNKNOWN.
 */
#ifndef WM_TASKS_SWEEP_H
#define WM_TASKS_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "winml/winml.h"

#define WM_SWEEP_MAX_RECIPES 100000

typedef struct wm_sweep_recipe {
    char path[4096];     /* the recipe file as given or found */
    char key[512];       /* the models/ folder name */
    char model_id[256];  /* org/name */
    char task[64], precision[16], part[64], ep[32], device[32]; /* from the path; ep/device "" when flat */
    char model_type[64]; /* loader.model_type ("" when absent) */
} wm_sweep_recipe;

/*
 * The recipes of spec: a folder (walked, *.json, links not followed) or a list file (one recipe path a line,
 * relative to the list's folder unless absolute; blank lines and '#' comments skipped). Each is parsed
 * (wm_recipe_load) and named by its path; sorted by key. Errors (WM_ERR_INPUT / WM_ERR_USAGE / WM_ERR_IO)
 * name the file: an unreadable or invalid recipe, a name outside the layout, two recipes with one key.
 * *out is malloc'ed (free it); *n >= 1 on success.
 */
wm_status wm_sweep_list(const char *spec, wm_sweep_recipe **out, size_t *n, wm_error *err);

/* The key, model id, task, precision, part, ep and device of a recipe path in the reference's layout. */
wm_status wm_sweep_parse_path(const char *path, wm_sweep_recipe *r, wm_error *err);

/* "I/N" with 0 <= I < N <= 100000; WM_ERR_USAGE naming --shard otherwise. */
wm_status wm_sweep_parse_shard(const char *s, int *i, int *n, wm_error *err);

/* 1 when the recipe at index idx (in key order) belongs to shard i of n. */
int wm_sweep_in_shard(size_t idx, int i, int n);

/* Stages of one recipe, in the order they run. */
typedef enum { WM_SW_BUILD, WM_SW_ANALYZE, WM_SW_PERF, WM_SW_EXPORT_REF, WM_SW_COMPARE, WM_SW_NSTAGES } wm_sweep_stage;
const char *wm_sweep_stage_name(int stage);

/* How a child process ended. */
typedef struct wm_sweep_proc {
    int exit_code;      /* -1 when killed by a signal */
    int signal;         /* the signal, 0 when it exited */
    int timed_out;      /* killed by the sweep at the wall-clock limit */
    double elapsed_s;
} wm_sweep_proc;

/*
 * The reference's failure class of a stage that did not pass (stderr_text: what it printed, may be NULL), or
 * NULL when it passed. verdict: analyze's overall verdict (its JSON "verdict"), NULL for other stages. analyze
 * exits 1 for anything short of fully supported; only "unsupported" blocks (ANALYZER_BLOCK): a partial
 * verdict (casts inserted, say) or an op the rules do not know still runs. Static text.
 */
const char *wm_sweep_classify(int stage, const wm_sweep_proc *p, const char *stderr_text, const char *verdict);

/*
 * The tiny config.json for a --random-weights build of the recipe at path (model_type, canonical size keys,
 * max_position_embeddings covering its longest static input_ids / positions plus 2), into j (an object).
 */
wm_status wm_sweep_tiny_config(const char *recipe_path, wm_json *j, wm_error *err);

typedef struct wm_sweep_event {
    size_t index, total;       /* 1-based position in this run's slice, slice size */
    const char *key;
    int done;                  /* 0: starting, 1: finished, 2: skipped (complete result, --resume) */
    const char *status;        /* "passed" / "failed" when done */
    const char *failure;       /* the class, or NULL */
    double elapsed_s;
} wm_sweep_event;

typedef struct wm_sweep_opts {
    const char *recipes;       /* -c: folder or list file */
    const char *results;       /* -o: RESULTS folder (created when missing) */
    const char *exe;           /* the winml binary the stages run */
    const char *date;          /* YYYY-MM-DD, NULL: today (UTC), or with resume the latest sweep folder */
    int random_weights, resume;
    int shard_i, shard_n;      /* 0/1: everything */
    long limit;                /* stop after running this many recipes (0: no limit); the rest wait for --resume */
    double timeout_s;          /* per stage */
    uint64_t max_memory;       /* RLIMIT_AS of each stage, 0: none */
    int iterations, samples;   /* perf iterations, compare samples */
    void (*progress)(void *ctx, const wm_sweep_event *e);
    void *ctx;
} wm_sweep_opts;

/*
 * Runs the sweep (see the header comment). summary receives this run's summary (the JSON also written to
 * summary.json): results folder, counts by status and class, and one row per recipe of the slice. Recipe
 * failures are results, not errors; errors are bad flags or inputs (nothing run) and I/O failures.
 */
wm_status wm_sweep_run(const wm_sweep_opts *o, wm_json *summary, wm_error *err);

#endif
