/*
 * sweep_run.c - `winml sweep`'s runs: one child process per stage (fork +
 * exec of winml) under a wall-clock kill and RLIMIT_AS, and the results in
 * the reference's layout (sweep.h). Files are written through temporaries
 * renamed into place; a file the sweep did not write is never replaced.
 */
#define _GNU_SOURCE
#include "tasks/sweep.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "core/error.h"
#include "core/file.h"
#include "core/output.h"
#include "hf/config.h"

#define TAIL_BYTES (16u << 10)     /* stdout / stderr kept in a result: the last 16 KiB */
#define JSON_MAX (64u << 20)       /* a stage's JSON on stdout */
#define SWEEP_VERSION 1

typedef struct run_ctx {
    const wm_sweep_opts *o;
    char date[16];
    char day[4096];   /* RESULTS/eval_results/<date> */
    char work[4096];  /* the temporary work folder of this process (builds), tracked */
    int work_slot;
    wm_error *err;
} run_ctx;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void iso_now(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static wm_status mkdirs(const char *path, wm_error *err) {
    char p[4096];
    if (strlen(path) >= sizeof p) return wm_err(err, WM_ERR_USAGE, "%.200s...: path too long", path);
    strcpy(p, path);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        struct stat sb;
        if (mkdir(p, 0755) && errno != EEXIST) return wm_err(err, WM_ERR_IO, "%s: cannot create: %s", p, strerror(errno));
        if (stat(p, &sb) || !S_ISDIR(sb.st_mode)) return wm_err(err, WM_ERR_IO, "%s: exists and is not a folder", p);
        *s = c;
        if (!c) break;
    }
    return WM_OK;
}

/* The last TAIL_BYTES of a file, NUL-terminated (malloc'ed; "" when unreadable); *total its size. */
static char *tail_of(const char *path, size_t *total) {
    *total = 0;
    FILE *f = fopen(path, "rb");
    char *buf = calloc(TAIL_BYTES + 1, 1);
    if (!f || !buf) {
        if (f) fclose(f);
        return buf;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    if (sz > 0) {
        *total = (size_t)sz;
        long from = sz > (long)TAIL_BYTES ? sz - (long)TAIL_BYTES : 0;
        fseek(f, from, SEEK_SET);
        size_t got = fread(buf, 1, TAIL_BYTES, f);
        buf[got] = 0;
        for (size_t i = 0; i < got; i++)
            if (!buf[i]) buf[i] = '?'; /* a NUL would cut the JSON string */
    }
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------ children */

/*
 * Runs argv (argv[0] the executable) with stdout / stderr into files, stdin from /dev/null, RLIMIT_AS at
 * max_memory (0: none), killed (SIGKILL) after timeout_s, and killed with the sweep (PR_SET_PDEATHSIG).
 */
static wm_status spawn(char *const argv[], const char *out, const char *errf, double timeout_s, uint64_t max_memory,
                       wm_sweep_proc *p, wm_error *err) {
    memset(p, 0, sizeof *p);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int fe = fo < 0 ? -1 : open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int fi = fe < 0 ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fi < 0) {
        int e = errno;
        if (fo >= 0) close(fo);
        if (fe >= 0) close(fe);
        return wm_err(err, WM_ERR_IO, "%s: cannot create the stage's output files: %s", out, strerror(e));
    }
    pid_t parent = getpid();
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fo), close(fe), close(fi);
        return wm_err(err, WM_ERR_IO, "cannot start %s: %s", argv[0], strerror(e));
    }
    if (pid == 0) { /* only async-signal-safe calls from here */
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (getppid() != parent) _exit(127);
        if (dup2(fi, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(127);
        if (max_memory) {
            struct rlimit rl = {(rlim_t)max_memory, (rlim_t)max_memory};
            setrlimit(RLIMIT_AS, &rl);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(fo), close(fe), close(fi);
    int status = 0;
    long nap_us = 1000;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) return wm_err(err, WM_ERR_IO, "waiting for %s: %s", argv[0], strerror(errno));
        if (!p->timed_out && timeout_s > 0 && now_s() - t0 > timeout_s) {
            kill(pid, SIGKILL);
            p->timed_out = 1;
        }
        struct timespec ts = {0, nap_us * 1000};
        nanosleep(&ts, NULL);
        if (nap_us < 20000) nap_us *= 2;
    }
    p->elapsed_s = now_s() - t0;
    if (WIFSIGNALED(status)) p->exit_code = -1, p->signal = WTERMSIG(status);
    else p->exit_code = WEXITSTATUS(status);
    return WM_OK;
}

/* argv as one shell-like line (arguments holding blanks or quotes are single-quoted). */
static void join_argv(char *const argv[], char *buf, size_t n) {
    size_t u = 0;
    buf[0] = 0;
    for (int i = 0; argv[i] && u < n; i++) {
        int q = strpbrk(argv[i], " \t'\"$\\") != NULL;
        u += (size_t)snprintf(buf + u, n - u, "%s%s%s%s", i ? " " : "", q ? "'" : "", argv[i], q ? "'" : "");
    }
}

/* One stage's outcome: how it ended, its output tails and its JSON (stdout parsed when it is JSON). */
typedef struct stage_out {
    int ran;
    wm_sweep_proc p;
    char command[8192];
    char *out, *errt;   /* tails, malloc'ed */
    size_t out_bytes, err_bytes;
    cJSON *json;        /* stdout as JSON, or NULL */
    const char *cls;    /* failure class, NULL when it passed */
} stage_out;

static void stage_free(stage_out *s) {
    free(s->out);
    free(s->errt);
    cJSON_Delete(s->json);
    memset(s, 0, sizeof *s);
}

static wm_status run_stage(const run_ctx *c, const char *dir, int stage, char *const argv[], stage_out *s) {
    char out[4200], errf[4200];
    snprintf(out, sizeof out, "%s/%s.out", dir, wm_sweep_stage_name(stage));
    snprintf(errf, sizeof errf, "%s/%s.err", dir, wm_sweep_stage_name(stage));
    join_argv(argv, s->command, sizeof s->command);
    wm_status st = spawn(argv, out, errf, c->o->timeout_s, c->o->max_memory, &s->p, c->err);
    if (st) return st;
    s->ran = 1;
    s->out = tail_of(out, &s->out_bytes);
    s->errt = tail_of(errf, &s->err_bytes);
    if (!s->out || !s->errt) return wm_err(c->err, WM_ERR_NOMEM, "out of memory");
    wm_error je = {0};
    if (s->out_bytes && wm_hf_json_load_py(out, JSON_MAX, &s->json, &je)) s->json = NULL;
    const cJSON *v = stage == WM_SW_ANALYZE && s->json ? cJSON_GetObjectItemCaseSensitive(s->json, "verdict") : NULL;
    s->cls = wm_sweep_classify(stage, &s->p, s->errt, cJSON_IsString(v) ? v->valuestring : NULL);
    return WM_OK;
}

/* ------------------------------------------------------------ result files */

static cJSON *read_json(const char *path) {
    cJSON *d = NULL;
    wm_error e = {0};
    if (wm_hf_json_load(path, JSON_MAX, &d, &e)) return NULL;
    return d;
}

/* 1 when path exists; *ours 1 when it is a JSON object with a "winml_sweep" object (written by the sweep). */
static int exists_ours(const char *path, int *ours, cJSON **doc) {
    struct stat sb;
    *ours = 0;
    if (doc) *doc = NULL;
    if (lstat(path, &sb)) return 0;
    if (!S_ISREG(sb.st_mode)) return 1;
    cJSON *d = read_json(path);
    *ours = d && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(d, "winml_sweep"));
    if (doc && *ours) *doc = d;
    else cJSON_Delete(d);
    return 1;
}

static wm_status write_doc(const char *path, cJSON *doc, wm_error *err) {
    char *text = cJSON_Print(doc);
    if (!text) return wm_err(err, WM_ERR_NOMEM, "out of memory writing %s", path);
    size_t n = strlen(text);
    wm_status st = wm_write_file_atomic(path, text, n, err);
    cJSON_free(text);
    return st;
}

static const char *first_line(const char *text, char *buf, size_t n) {
    const char *s = text ? text : "";
    const char *last = NULL; /* the last non-empty line: a child's error line comes at the end */
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        if (e > p) last = p;
        p = *e ? e + 1 : e;
    }
    if (!last) return NULL;
    const char *e = strchr(last, '\n');
    snprintf(buf, n, "%.*s", (int)(e ? e - last : (long)strlen(last)), last);
    return buf;
}

static cJSON *proc_json(const stage_out *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "exit_code", s->p.exit_code);
    if (s->p.signal) cJSON_AddNumberToObject(o, "signal", s->p.signal);
    else cJSON_AddNullToObject(o, "signal");
    cJSON_AddBoolToObject(o, "timed_out", s->p.timed_out);
    cJSON_AddNumberToObject(o, "elapsed_sec", (double)(long long)(s->p.elapsed_s * 1000 + 0.5) / 1000);
    cJSON_AddStringToObject(o, "command", s->command);
    if (s->cls) cJSON_AddStringToObject(o, "failure_classification", s->cls);
    else cJSON_AddNullToObject(o, "failure_classification");
    return o;
}

/* The lowest value over outputs of cosine_similarity's min: the reference's layout or ours. */
static int min_cosine(const cJSON *doc, double *v) {
    int found = 0;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "metrics"), *e;
    const cJSON *ref = m ? cJSON_GetObjectItemCaseSensitive(m, "cosine_similarity_min") : NULL;
    if (cJSON_IsObject(ref)) {
        cJSON_ArrayForEach(e, ref) if (cJSON_IsNumber(e) && (!found || e->valuedouble < *v)) *v = e->valuedouble, found = 1;
        return found;
    }
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(doc, "outputs");
    cJSON_ArrayForEach(e, outs) {
        const cJSON *cs = cJSON_GetObjectItemCaseSensitive(e, "cosine_similarity");
        const cJSON *mn = cs ? cJSON_GetObjectItemCaseSensitive(cs, "min") : NULL;
        if (cJSON_IsNumber(mn) && (!found || mn->valuedouble < *v)) *v = mn->valuedouble, found = 1;
    }
    return found;
}

static int64_t model_bytes(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/model.onnx", dir);
    int64_t a = wm_file_size(p);
    if (a < 0) return -1;
    snprintf(p, sizeof p, "%s/model.onnx.data", dir);
    int64_t b = wm_file_size(p);
    return a + (b > 0 ? b : 0);
}

/* ------------------------------------------------------------ one recipe */

static wm_status run_recipe(const run_ctx *c, const wm_sweep_recipe *r, const char *result_path, int *passed,
                            const char **cls) {
    const wm_sweep_opts *o = c->o;
    wm_status st = WM_OK;
    char dir[4600], ck[4700], bdir[4700], refdir[4700], model[4800], refmodel[4800];
    snprintf(dir, sizeof dir, "%s/%s", c->work, r->key);
    if (mkdir(dir, 0755) && errno != EEXIST)
        return wm_err(c->err, WM_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    snprintf(bdir, sizeof bdir, "%s/build", dir);
    snprintf(refdir, sizeof refdir, "%s/reference", dir);
    snprintf(model, sizeof model, "%s/model.onnx", bdir);
    snprintf(refmodel, sizeof refmodel, "%s/model.onnx", refdir);
    const char *src = r->model_id; /* the checkpoint: ORG/NAME from the hub cache, or a tiny config */
    if (o->random_weights) {
        snprintf(ck, sizeof ck, "%s/checkpoint", dir);
        char cfg[4800];
        snprintf(cfg, sizeof cfg, "%s/config.json", ck);
        wm_json j;
        wm_json_init(&j);
        if (mkdir(ck, 0755) && errno != EEXIST) st = wm_err(c->err, WM_ERR_IO, "%s: cannot create: %s", ck, strerror(errno));
        if (!st) st = wm_sweep_tiny_config(r->path, &j, c->err);
        if (!st) st = wm_write_file_atomic(cfg, wm_json_text(&j), strlen(wm_json_text(&j)), c->err);
        wm_json_free(&j);
        if (st) return st;
        src = ck;
    }
    char iters[32], samples[32], rpath[4096];
    snprintf(iters, sizeof iters, "%d", o->iterations);
    snprintf(samples, sizeof samples, "%d", o->samples);
    snprintf(rpath, sizeof rpath, "%s", r->path);
    char *exe = (char *)o->exe, *m = (char *)src;
    char *a_build[] = {exe, "build", "-c", rpath, "-m", m, "-o", bdir, "-q", "-f", "json",
                       o->random_weights ? "--random-weights" : NULL, NULL};
    char *a_analyze[] = {exe, "analyze", "-m", model, "--ep", "cpu", "-f", "json", "-q", NULL};
    char *a_perf[] = {exe, "perf", "-m", bdir, "--warmup", "2", "--iterations", iters, "-f", "json", NULL};
    char *a_ref[] = {exe, "export", "-c", rpath, "-m", m, "-o", refdir, "-q", "-f", "json",
                     o->random_weights ? "--random-weights" : NULL, NULL};
    char *a_cmp[] = {exe, "eval", "--mode", "compare", "-m", model, "--reference", refmodel, "--samples", samples,
                     "--threshold", "cosine_similarity=0.99", "-f", "json", NULL};
    char *const *argvs[WM_SW_NSTAGES] = {a_build, a_analyze, a_perf, a_ref, a_cmp};
    stage_out s[WM_SW_NSTAGES];
    memset(s, 0, sizeof s);
    char ts[32];
    iso_now(ts, sizeof ts);
    int perf_ok = 1, failed_stage = -1;
    for (int k = WM_SW_BUILD; k <= WM_SW_PERF && perf_ok && !st; k++) {
        st = run_stage(c, dir, k, argvs[k], &s[k]);
        if (!st && s[k].cls) perf_ok = 0, failed_stage = k;
    }
    int acc_ok = 0;
    const char *skip = NULL;
    if (!st && perf_ok) {
        st = run_stage(c, dir, WM_SW_EXPORT_REF, argvs[WM_SW_EXPORT_REF], &s[WM_SW_EXPORT_REF]);
        if (!st && s[WM_SW_EXPORT_REF].cls) skip = "the float32 reference export failed", failed_stage = WM_SW_EXPORT_REF;
        else if (!st) {
            st = run_stage(c, dir, WM_SW_COMPARE, argvs[WM_SW_COMPARE], &s[WM_SW_COMPARE]);
            acc_ok = !st && !s[WM_SW_COMPARE].cls;
            if (!st && !acc_ok) failed_stage = WM_SW_COMPARE;
        }
    } else if (!st)
        skip = "the build, analysis or perf stage failed";
    if (st) {
        for (int k = 0; k < WM_SW_NSTAGES; k++) stage_free(&s[k]);
        return st;
    }
    /* the reference's eval_result.json, ours in winml_sweep */
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "model", r->model_id);
    cJSON_AddStringToObject(doc, "task", r->task);
    cJSON_AddStringToObject(doc, "device", "cpu");
    if (r->model_type[0]) cJSON_AddStringToObject(doc, "model_type", r->model_type);
    else cJSON_AddNullToObject(doc, "model_type");
    cJSON_AddNullToObject(doc, "group");
    cJSON_AddNullToObject(doc, "priority");
    cJSON *types = cJSON_AddArrayToObject(doc, "eval_types_run");
    cJSON_AddItemToArray(types, cJSON_CreateString("perf"));
    cJSON_AddItemToArray(types, cJSON_CreateString("accuracy"));
    cJSON_AddStringToObject(doc, "run_timestamp", ts);
    /* perf: the build, analyze and perf stages (the reference's perf command builds too) */
    int last = failed_stage >= 0 && failed_stage <= WM_SW_PERF ? failed_stage : WM_SW_PERF;
    const stage_out *pl = &s[last];
    double pel = 0;
    for (int k = WM_SW_BUILD; k <= WM_SW_PERF; k++) pel += s[k].ran ? s[k].p.elapsed_s : 0;
    char line[1024];
    cJSON *perf = cJSON_AddObjectToObject(doc, "perf");
    cJSON_AddBoolToObject(perf, "passed", perf_ok);
    cJSON_AddNumberToObject(perf, "elapsed", (double)(long long)(pel * 1000 + 0.5) / 1000);
    cJSON_AddNumberToObject(perf, "exit_code", pl->p.exit_code);
    if (perf_ok && s[WM_SW_PERF].json) cJSON_AddItemToObject(perf, "result", cJSON_Duplicate(s[WM_SW_PERF].json, 1));
    else cJSON_AddNullToObject(perf, "result");
    cJSON_AddStringToObject(perf, "stdout_output", pl->out);
    cJSON_AddStringToObject(perf, "stderr_output", pl->errt);
    cJSON_AddNumberToObject(perf, "raw_stdout_bytes", (double)pl->out_bytes);
    cJSON_AddNumberToObject(perf, "raw_stderr_bytes", (double)pl->err_bytes);
    cJSON_AddBoolToObject(perf, "timeout", pl->p.timed_out);
    cJSON_AddStringToObject(perf, "command", pl->command);
    const char *el = perf_ok ? NULL : first_line(pl->errt, line, sizeof line);
    if (!perf_ok && !el) {
        if (pl->p.timed_out) snprintf(line, sizeof line, "%s: killed after %g s", wm_sweep_stage_name(last), o->timeout_s);
        else if (pl->p.signal) snprintf(line, sizeof line, "%s: killed by signal %d", wm_sweep_stage_name(last), pl->p.signal);
        else snprintf(line, sizeof line, "%s: exit %d", wm_sweep_stage_name(last), pl->p.exit_code);
        el = line;
    }
    if (el) cJSON_AddStringToObject(perf, "error", el);
    else cJSON_AddNullToObject(perf, "error");
    if (pl->cls) cJSON_AddStringToObject(perf, "failure_classification", pl->cls);
    else cJSON_AddNullToObject(perf, "failure_classification");
    /* accuracy: eval --mode compare of the build against the plain float32 export of the same weights */
    const stage_out *cs = &s[WM_SW_COMPARE];
    cJSON *acc = cJSON_AddObjectToObject(doc, "accuracy");
    cJSON_AddBoolToObject(acc, "skipped", skip != NULL);
    if (skip) cJSON_AddStringToObject(acc, "skip_reason", skip);
    else cJSON_AddNullToObject(acc, "skip_reason");
    if (cs->ran) cJSON_AddStringToObject(acc, "winml_eval_status", acc_ok ? "PASS" : "FAIL");
    else cJSON_AddNullToObject(acc, "winml_eval_status");
    double cmin = 0;
    if (cs->json && min_cosine(cs->json, &cmin)) {
        cJSON *wm = cJSON_AddObjectToObject(acc, "winml_metric");
        cJSON_AddStringToObject(wm, "metric", "cosine_similarity");
        cJSON_AddNumberToObject(wm, "value", cmin);
        cJSON_AddNumberToObject(wm, "num_samples", o->samples);
    } else
        cJSON_AddNullToObject(acc, "winml_metric");
    if (cs->json) cJSON_AddItemToObject(acc, "metrics", cJSON_Duplicate(cs->json, 1));
    else cJSON_AddNullToObject(acc, "metrics");
    cJSON_AddNullToObject(acc, "dataset"); /* seeded random inputs, no data set */
    if (cs->ran) {
        cJSON_AddNumberToObject(acc, "winml_eval_exit_code", cs->p.exit_code);
        cJSON_AddStringToObject(acc, "winml_eval_stdout", cs->out);
        cJSON_AddStringToObject(acc, "winml_eval_stderr", cs->errt);
        cJSON_AddStringToObject(acc, "winml_eval_command", cs->command);
    } else {
        cJSON_AddNullToObject(acc, "winml_eval_exit_code");
        cJSON_AddNullToObject(acc, "winml_eval_stdout");
        cJSON_AddNullToObject(acc, "winml_eval_stderr");
        cJSON_AddNullToObject(acc, "winml_eval_command");
    }
    double ael = (s[WM_SW_EXPORT_REF].ran ? s[WM_SW_EXPORT_REF].p.elapsed_s : 0) + (cs->ran ? cs->p.elapsed_s : 0);
    cJSON_AddNumberToObject(acc, "elapsed_winml", (double)(long long)(ael * 1000 + 0.5) / 1000);
    int64_t mb = s[WM_SW_BUILD].cls ? -1 : model_bytes(bdir);
    if (mb >= 0) cJSON_AddNumberToObject(doc, "onnx_size_bytes", (double)mb);
    else cJSON_AddNullToObject(doc, "onnx_size_bytes");
    cJSON_AddStringToObject(doc, "ep", "cpu");
    cJSON_AddStringToObject(doc, "precision", r->precision);
    /* ours */
    *passed = perf_ok && acc_ok;
    *cls = failed_stage < 0 ? NULL : s[failed_stage].cls;
    cJSON *w = cJSON_AddObjectToObject(doc, "winml_sweep");
    cJSON_AddNumberToObject(w, "version", SWEEP_VERSION);
    cJSON_AddStringToObject(w, "key", r->key);
    cJSON_AddStringToObject(w, "recipe", r->path);
    if (r->part[0]) cJSON_AddStringToObject(w, "part", r->part);
    else cJSON_AddNullToObject(w, "part");
    if (r->ep[0]) cJSON_AddStringToObject(w, "recipe_ep", r->ep), cJSON_AddStringToObject(w, "recipe_device", r->device);
    else cJSON_AddNullToObject(w, "recipe_ep"), cJSON_AddNullToObject(w, "recipe_device");
    cJSON_AddBoolToObject(w, "random_weights", o->random_weights);
    cJSON_AddStringToObject(w, "status", *passed ? "passed" : "failed");
    if (*cls) cJSON_AddStringToObject(w, "failure_classification", *cls);
    else cJSON_AddNullToObject(w, "failure_classification");
    if (failed_stage >= 0) cJSON_AddStringToObject(w, "failed_stage", wm_sweep_stage_name(failed_stage));
    else cJSON_AddNullToObject(w, "failed_stage");
    cJSON *stages = cJSON_AddObjectToObject(w, "stages");
    for (int k = 0; k < WM_SW_NSTAGES; k++)
        if (s[k].ran) cJSON_AddItemToObject(stages, wm_sweep_stage_name(k), proc_json(&s[k]));
    if (s[WM_SW_BUILD].json) cJSON_AddItemToObject(w, "build_manifest", cJSON_Duplicate(s[WM_SW_BUILD].json, 1));
    if (s[WM_SW_ANALYZE].json) {
        const cJSON *an = s[WM_SW_ANALYZE].json;
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(an, "summary"), *v = cJSON_GetObjectItemCaseSensitive(an, "verdict");
        if (cJSON_IsString(v)) cJSON_AddStringToObject(w, "analyze_verdict", v->valuestring);
        if (sum) cJSON_AddItemToObject(w, "analyze_summary", cJSON_Duplicate(sum, 1));
    }
    cJSON_AddBoolToObject(w, "complete", 1); /* the last key: resume trusts a file that has it */
    for (int k = 0; k < WM_SW_NSTAGES; k++) stage_free(&s[k]);
    st = write_doc(result_path, doc, c->err);
    cJSON_Delete(doc);
    wm_rm_tree(dir);
    return st;
}

/* ------------------------------------------------------------ the sweep */

static int is_date(const char *s) {
    if (strlen(s) != 10 || s[4] != '-' || s[7] != '-') return 0;
    for (int i = 0; i < 10; i++)
        if (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9')) return 0;
    return 1;
}

/* The latest eval_results/<date> holding the sweep's environment.json, or "" when none. */
static void latest_sweep(const char *root, char *date, size_t n) {
    date[0] = 0;
    DIR *d = opendir(root);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_date(e->d_name) || strcmp(e->d_name, date) <= 0) continue;
        char p[4200];
        int ours = 0;
        snprintf(p, sizeof p, "%s/%s/environment.json", root, e->d_name);
        if (exists_ours(p, &ours, NULL) && ours) snprintf(date, n, "%s", e->d_name);
    }
    closedir(d);
}

static wm_status write_environment(const run_ctx *c, const char *path) {
    char ts[32], out[4200], errf[4200];
    iso_now(ts, sizeof ts);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "timestamp", ts);
    struct utsname u;
    char plat[512] = "unknown";
    if (!uname(&u)) snprintf(plat, sizeof plat, "%s-%s-%s", u.sysname, u.release, u.machine);
    cJSON_AddStringToObject(doc, "platform", plat);
    /* the reference's Python stack: not part of this build */
    static const char *const absent[] = {"python_version", "onnxruntime_version", "torch_version",
                                         "transformers_version", "optimum_version", "git_commit",
                                         "git_commit_message", "git_commit_date"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) cJSON_AddNullToObject(doc, absent[i]);
    /* winml sys -f json, from the binary the stages run */
    snprintf(out, sizeof out, "%s/sys.out", c->work);
    snprintf(errf, sizeof errf, "%s/sys.err", c->work);
    char *argv[] = {(char *)c->o->exe, "sys", "-f", "json", NULL};
    wm_sweep_proc p;
    wm_status st = spawn(argv, out, errf, 60, c->o->max_memory, &p, c->err);
    cJSON *sys = !st && p.exit_code == 0 ? read_json(out) : NULL;
    if (sys) cJSON_AddItemToObject(doc, "winml_sys", sys);
    else cJSON_AddNullToObject(doc, "winml_sys");
    cJSON *w = cJSON_AddObjectToObject(doc, "winml_sweep");
    cJSON_AddNumberToObject(w, "version", SWEEP_VERSION);
    cJSON_AddStringToObject(w, "recipes", c->o->recipes);
    cJSON_AddBoolToObject(w, "random_weights", c->o->random_weights);
    cJSON_AddNumberToObject(w, "timeout_sec", c->o->timeout_s);
    cJSON_AddNumberToObject(w, "max_memory_bytes", (double)c->o->max_memory);
    if (!st) st = write_doc(path, doc, c->err);
    cJSON_Delete(doc);
    return st;
}

static const cJSON *get(const cJSON *o, const char *k) { return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL; }

/* One summary row from a recipe's eval_result.json (doc NULL: not run). */
static void summary_row(wm_json *j, const wm_sweep_recipe *r, const cJSON *doc) {
    const cJSON *w = get(doc, "winml_sweep"), *perf = get(doc, "perf"), *acc = get(doc, "accuracy");
    wm_json_obj(j, NULL);
    wm_json_str(j, "key", r->key);
    wm_json_str(j, "model", r->model_id);
    wm_json_str(j, "task", r->task);
    wm_json_str(j, "precision", r->precision);
    wm_json_str(j, "model_type", r->model_type[0] ? r->model_type : NULL);
    wm_json_str(j, "recipe_ep", r->ep[0] ? r->ep : NULL);
    wm_json_str(j, "recipe_device", r->device[0] ? r->device : NULL);
    wm_json_str(j, "part", r->part[0] ? r->part : NULL);
    wm_json_str(j, "ep", "cpu");
    wm_json_str(j, "device", "cpu");
    const cJSON *s = get(w, "status"), *f = get(w, "failure_classification"), *fs = get(w, "failed_stage");
    wm_json_str(j, "status", cJSON_IsString(s) ? s->valuestring : "not_run");
    wm_json_str(j, "failure_classification", cJSON_IsString(f) ? f->valuestring : NULL);
    wm_json_str(j, "failed_stage", cJSON_IsString(fs) ? fs->valuestring : NULL);
    const cJSON *bp = get(get(w, "build_manifest"), "precision"); /* what was built (a null quant section: fp32) */
    wm_json_str(j, "built_precision", cJSON_IsString(bp) ? bp->valuestring : NULL);
    const cJSON *err = get(perf, "error");
    wm_json_str(j, "error", cJSON_IsString(err) ? err->valuestring : NULL);
    const cJSON *lat = get(get(get(perf, "result"), "latency_ms"), "mean");
    if (cJSON_IsNumber(lat)) wm_json_num(j, "latency_ms_mean", lat->valuedouble);
    else wm_json_null(j, "latency_ms_mean");
    const cJSON *cv = get(get(acc, "winml_metric"), "value");
    if (cJSON_IsNumber(cv)) wm_json_num(j, "cosine_similarity_min", cv->valuedouble);
    else wm_json_null(j, "cosine_similarity_min");
    const cJSON *sz = get(doc, "onnx_size_bytes"), *ts = get(doc, "run_timestamp"), *rw = get(w, "random_weights");
    if (cJSON_IsNumber(sz)) wm_json_num(j, "onnx_size_bytes", sz->valuedouble);
    else wm_json_null(j, "onnx_size_bytes");
    wm_json_str(j, "run_timestamp", cJSON_IsString(ts) ? ts->valuestring : NULL);
    if (doc) wm_json_bool(j, "random_weights", cJSON_IsTrue(rw));
    else wm_json_null(j, "random_weights");
    wm_json_obj_end(j);
}

static const char *const CLASSES[] = {"EXPORT_FAIL", "ANALYZER_BLOCK", "OPT_FAIL", "COMPILE_FAIL", "RUNTIME_FAIL",
                                      "ENVIRONMENT", "TIMEOUT", "UNKNOWN"};

wm_status wm_sweep_run(const wm_sweep_opts *o, wm_json *summary, wm_error *err) {
    wm_json_init(summary);
    run_ctx c = {.o = o, .work_slot = -1, .err = err};
    wm_sweep_recipe *rs = NULL;
    size_t n = 0;
    wm_status st = wm_sweep_list(o->recipes, &rs, &n, err);
    if (st) return st;
    size_t *sel = calloc(n, sizeof *sel);
    uint8_t *done = calloc(n, 1);
    if (!sel || !done) {
        free(sel), free(done), free(rs);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (wm_sweep_in_shard(i, o->shard_i, o->shard_n)) sel[ns++] = i;
    /* the folder: RESULTS/eval_results/<date> */
    char root[4096];
    snprintf(root, sizeof root, "%s/eval_results", o->results);
    if (o->date) snprintf(c.date, sizeof c.date, "%s", o->date);
    else if (o->resume) latest_sweep(root, c.date, sizeof c.date);
    if (!c.date[0]) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(c.date, sizeof c.date, "%Y-%m-%d", &tm);
    }
    snprintf(c.day, sizeof c.day, "%s/%s", root, c.date);
    char models[4200], envp[4200], sump[4200];
    snprintf(models, sizeof models, "%s/models", c.day);
    snprintf(envp, sizeof envp, "%s/environment.json", c.day);
    snprintf(sump, sizeof sump, "%s/summary.json", c.day);
    int ours = 0;
    /* files we did not write are never replaced: checked before any work */
    if (exists_ours(envp, &ours, NULL) && !ours)
        st = wm_err(err, WM_ERR_INPUT, "%s exists and was not written by winml sweep: not replacing it", envp);
    if (!st && exists_ours(sump, &ours, NULL) && !ours)
        st = wm_err(err, WM_ERR_INPUT, "%s exists and was not written by winml sweep: not replacing it", sump);
    char path[4800];
    for (size_t k = 0; k < ns && !st; k++) {
        snprintf(path, sizeof path, "%s/%s/eval_result.json", models, rs[sel[k]].key);
        cJSON *d = NULL;
        if (exists_ours(path, &ours, &d) && !ours)
            st = wm_err(err, WM_ERR_INPUT, "%s exists and was not written by winml sweep: not replacing it", path);
        const cJSON *w = get(d, "winml_sweep"), *key = get(w, "key");
        if (!st && o->resume && d && cJSON_IsTrue(get(w, "complete")) && cJSON_IsString(key) &&
            !strcmp(key->valuestring, rs[sel[k]].key))
            done[k] = 1;
        cJSON_Delete(d);
    }
    if (!st) st = mkdirs(models, err);
    if (!st) {
        wm_sweep_stale(c.day); /* the temporaries and work folders of a killed sweep */
        char wfinal[4200];
        snprintf(wfinal, sizeof wfinal, "%s/.work", c.day);
        st = wm_tmp_mkdir(wfinal, c.work, sizeof c.work, &c.work_slot, err);
    }
    if (!st && (!o->resume || !exists_ours(envp, &ours, NULL))) st = write_environment(&c, envp);
    double t0 = now_s();
    size_t ran = 0, resumed = 0;
    int stopped = 0;
    for (size_t k = 0; k < ns && !st; k++) {
        const wm_sweep_recipe *r = &rs[sel[k]];
        wm_sweep_event ev = {k + 1, ns, r->key, 0, NULL, NULL, 0};
        if (done[k]) {
            resumed++;
            ev.done = 2;
            if (o->progress) o->progress(o->ctx, &ev);
            continue;
        }
        if (o->limit && (long)ran >= o->limit) {
            stopped = 1;
            break;
        }
        if (o->progress) o->progress(o->ctx, &ev);
        char mdir[4700];
        snprintf(mdir, sizeof mdir, "%s/%s", models, r->key);
        if (mkdir(mdir, 0755) && errno != EEXIST) {
            st = wm_err(err, WM_ERR_IO, "%s: cannot create: %s", mdir, strerror(errno));
            break;
        }
        wm_sweep_stale(mdir);
        snprintf(path, sizeof path, "%s/eval_result.json", mdir);
        int passed = 0;
        const char *cls = NULL;
        double t1 = now_s();
        if ((st = run_recipe(&c, r, path, &passed, &cls))) break;
        ran++;
        done[k] = 1;
        ev.done = 1, ev.status = passed ? "passed" : "failed", ev.failure = cls, ev.elapsed_s = now_s() - t1;
        if (o->progress) o->progress(o->ctx, &ev);
    }
    if (c.work[0]) {
        wm_rm_tree(c.work);
        wm_tmp_untrack(c.work_slot);
    }
    if (!st) { /* the summary of this slice, from the files (resumed ones included) */
        wm_json *j = summary;
        size_t n_pass = 0, n_fail = 0, n_not = 0, by[8] = {0};
        wm_json_obj(j, NULL);
        wm_json_str(j, "tool", "winml sweep");
        wm_json_int(j, "version", SWEEP_VERSION);
        wm_json_str(j, "results_dir", c.day);
        wm_json_str(j, "date", c.date);
        wm_json_str(j, "recipes", o->recipes);
        wm_json_int(j, "recipes_total", (int64_t)n);
        char sh[32];
        snprintf(sh, sizeof sh, "%d/%d", o->shard_i, o->shard_n > 0 ? o->shard_n : 1);
        wm_json_str(j, "shard", sh);
        wm_json_int(j, "selected", (int64_t)ns);
        wm_json_int(j, "ran", (int64_t)ran);
        wm_json_int(j, "resumed", (int64_t)resumed);
        wm_json_bool(j, "random_weights", o->random_weights);
        wm_json_bool(j, "stopped_early", stopped);
        wm_json_num(j, "elapsed_sec", (double)(long long)((now_s() - t0) * 1000 + 0.5) / 1000);
        wm_json_arr(j, "results");
        for (size_t k = 0; k < ns; k++) {
            cJSON *d = NULL;
            snprintf(path, sizeof path, "%s/%s/eval_result.json", models, rs[sel[k]].key);
            if (done[k]) exists_ours(path, &ours, &d);
            summary_row(j, &rs[sel[k]], d);
            const cJSON *w = get(d, "winml_sweep"), *s = get(w, "status"), *f = get(w, "failure_classification");
            if (!d) n_not++;
            else if (cJSON_IsString(s) && !strcmp(s->valuestring, "passed")) n_pass++;
            else n_fail++;
            for (int q = 0; q < 8 && cJSON_IsString(f); q++)
                if (!strcmp(f->valuestring, CLASSES[q])) by[q]++;
            cJSON_Delete(d);
        }
        wm_json_arr_end(j);
        wm_json_int(j, "passed", (int64_t)n_pass);
        wm_json_int(j, "failed", (int64_t)n_fail);
        wm_json_int(j, "not_run", (int64_t)n_not);
        wm_json_obj(j, "failure_classes");
        for (int q = 0; q < 8; q++) wm_json_int(j, CLASSES[q], (int64_t)by[q]);
        wm_json_obj_end(j);
        wm_json_obj(j, "winml_sweep"); /* the marker that this file is the sweep's */
        wm_json_int(j, "version", SWEEP_VERSION);
        wm_json_obj_end(j);
        wm_json_obj_end(j);
        if (j->oom) st = wm_err(err, WM_ERR_NOMEM, "out of memory writing the summary");
        else st = wm_write_json_atomic(sump, wm_json_text(j), err);
    }
    free(sel), free(done), free(rs);
    return st;
}
