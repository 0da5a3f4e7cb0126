#define _GNU_SOURCE
#include "cli/cli.h"
#include "builder/recipe.h"
#include "core/ep.h"
#include "core/output.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void wm_cli_init(wm_cli *c, const char *prog) {
    memset(c, 0, sizeof *c);
    c->prog = prog;
    const char *nc = getenv("NO_COLOR");
    c->color = isatty(STDOUT_FILENO) && !(nc && *nc);
}

int wm_cli_common_opt(wm_cli *c, int opt, const char *arg) {
    switch (opt) {
    case 'm':
    case 'o': { /* one model and one output per run: a second, other value is refused, never silently the one used */
        const char **v = opt == 'm' ? &c->model : &c->out;
        if (*v && strcmp(*v, arg)) {
            wm_cli_usage_error(c, "-%c given twice ('%s' and '%s'%s): give one", opt, *v, arg,
                               opt == 'o' ? "; --output-dir is -o" : "");
            return -1;
        }
        *v = arg;
        return 1;
    }
    case 'v': c->verbose++; return 1;
    case 'q': c->quiet = 1; return 1;
    case 'f':
        if (!strcmp(arg, "json")) c->json = 1;
        else if (!strcmp(arg, "table") || !strcmp(arg, "text")) c->json = 0;
        else {
            wm_cli_usage_error(c, "-f: unknown format '%s' (use table or json)", arg);
            return -1;
        }
        return 1;
    default: return 0;
    }
}

int wm_cli_other_opt(wm_cli *c, int opt, const char *arg, char **argv) {
    int r = wm_cli_common_opt(c, opt, arg);
    if (r < 0) return WM_EXIT_ERROR;
    if (r) return 0;
    const char *target;
    if (opt == WM_CLI_O_EP) return wm_cli_ep_arg(c, arg, 1, &target);
    if (opt == WM_CLI_O_DEVICE || opt == 'd') return wm_cli_device_arg(c, arg, 1, &target);
    /* a short option is named by optopt (argv[optind - 1] may be its group "-vx" or the word before it) */
    char shortname[3] = {'-', (char)optopt, 0};
    const char *name = optopt > 32 && optopt < 127 ? shortname : argv[optind - 1];
    if (opt == ':') return wm_cli_usage_error(c, "option %s needs a value", name);
    return wm_cli_usage_error(c, "unknown option '%s'", name);
}

int wm_cli_default_out(const wm_cli *c, const char *in, const char *suffix, char *out, size_t n) {
    size_t l = strlen(in);
    while (l > 1 && in[l - 1] == '/') l--; /* "m.onnx/" names the same file */
    if (l >= 5 && !strncasecmp(in + l - 5, ".onnx", 5)) l -= 5;
    if (!l || l + strlen(suffix) >= n) return wm_cli_usage_error(c, "-m %s: no default output name (give -o)", in);
    snprintf(out, n, "%.*s%s", (int)l, in, suffix);
    return 0;
}

int wm_cli_ep_arg(const wm_cli *c, const char *v, int run_here, const char **out) {
    const char *alias = !strcasecmp(v, "auto") ? "cpu" : wm_ep_find(v);
    if (!alias)
        return wm_cli_usage_error(c, "--ep: unknown execution provider '%s' (auto, %s, or their ONNX Runtime names)", v,
                                  wm_ep_alias_list());
    if (run_here && strcmp(alias, "cpu"))
        return wm_cli_usage_error(c, "--ep: '%s' is not available: this build runs on cpu only (available: cpu; "
                                  "auto = cpu)", v);
    *out = alias;
    return 0;
}

int wm_cli_device_arg(const wm_cli *c, const char *v, int run_here, const char **out) {
    static const char *const devs[] = {"cpu", "gpu", "npu"};
    const char *d = !strcasecmp(v, "auto") ? "cpu" : NULL;
    for (size_t i = 0; i < 3 && !d; i++)
        if (!strcasecmp(v, devs[i])) d = devs[i];
    if (!d) return wm_cli_usage_error(c, "--device: unknown device '%s' (auto, cpu, gpu or npu)", v);
    if (run_here && strcmp(d, "cpu"))
        return wm_cli_usage_error(c, "--device: '%s' is not available: this build runs on cpu only (available: cpu; "
                                  "auto = cpu)", v);
    *out = d;
    return 0;
}

int wm_cli_build_target(const wm_cli *c, const char **ep, const char **device) {
    if (!*ep) {
        if (*device && strcmp(*device, "cpu"))
            return wm_cli_usage_error(c, "--device %s: name the EP that drives it with --ep (qnn, openvino, vitisai "
                                      "drive an npu; dml, qnn, openvino, cuda ... a gpu)", *device);
        *ep = "cpu";
    }
    if (!*device) *device = wm_ep_default_device(*ep);
    else if (!wm_ep_drives(*ep, *device))
        return wm_cli_usage_error(c, "--device %s: the %s EP drives %s only", *device, *ep, wm_ep_devices(*ep));
    return 0;
}

int wm_cli_precision_arg(const wm_cli *c, const char *arg, const char **given, int *prec) {
    if (*given && strcmp(*given, arg))
        return wm_cli_usage_error(c, "-p %s -p %s: one precision per build (winml quantize composes -p int4 -p fp16 "
                                  "on an ONNX file)", *given, arg);
    wm_error pe = {0};
    if (wm_precision_parse(arg, prec, &pe)) return wm_cli_usage_error(c, "%s", pe.msg);
    *given = arg;
    return 0;
}

const char *wm_cli_long_name(const struct option *longs, int opt) {
    for (const struct option *o = longs; o && o->name; o++)
        if (!o->flag && o->val == opt) return o->name;
    return "?";
}

/* The text of a flag's number as a user writes one: no leading blank (strtol and strtod skip them: " -5" was read
   as -5) and no hexadecimal (strtod reads "0x10" as 16 and "0x1p3" as 8). */
static int plain_number(const char *v) {
    if (!*v || !strchr("0123456789+-.", *v)) return 0;
    return !strpbrk(v, "xX");
}

int wm_cli_int_arg(const wm_cli *c, const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = plain_number(v) ? strtol(v, &end, 10) : 0;
    if (!plain_number(v) || *end || errno || x < lo || x > hi)
        return wm_cli_usage_error(c, "%s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    *out = x;
    return 0;
}

int wm_cli_num_arg(const wm_cli *c, const char *flag, const char *v, double lo, int lo_open, double hi, double *out) {
    char *end;
    double x = plain_number(v) ? strtod(v, &end) : NAN;
    if (!plain_number(v) || *end || !isfinite(x) || x < lo || (lo_open && x == lo) || x > hi)
        return wm_cli_usage_error(c, "%s: '%s' is not a number in %c%g, %g]", flag, v, lo_open ? '(' : '[', lo, hi);
    *out = x;
    return 0;
}

int wm_cli_list_arg(const wm_cli *c, const char *flag, const char *v, long lo, long hi, size_t max_n, long **out,
                    size_t *n) {
    size_t k = 0, cap = 0;
    long *a = NULL;
    const char *s = v;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        char item[32];
        char *end;
        long x = 0;
        int ok = len > 0 && len < sizeof item && (!max_n || k < max_n);
        if (ok) {
            memcpy(item, s, len);
            item[len] = 0;
            errno = 0;
            ok = plain_number(item) && (x = strtol(item, &end, 10), !*end && !errno && x >= lo && x <= hi);
        }
        if (ok && k == cap) {
            long *b = realloc(a, (cap = cap ? 2 * cap : 16) * sizeof *b);
            if (!b) {
                free(a);
                return wm_cli_usage_error(c, "%s: out of memory", flag);
            }
            a = b;
        }
        if (!ok) {
            free(a);
            if (max_n && k >= max_n)
                return wm_cli_usage_error(c, "%s: more than %zu values in '%s'", flag, max_n, v);
            return wm_cli_usage_error(c, "%s: expected comma-separated integers in [%ld, %ld], got '%s'", flag, lo, hi,
                                      v);
        }
        a[k++] = x;
        if (!comma) break;
        s = comma + 1;
    }
    *out = a;
    *n = k;
    return 0;
}

int wm_cli_json_out_check(const wm_cli *c, const char *path) {
    wm_error e = {0};
    return path && wm_json_out_check(path, c->model, &e) ? wm_cli_fail(c, &e) : 0;
}

int wm_cli_report_check(const wm_cli *c, const char *report, const char *model_out) {
    if (!report) return 0;
    struct stat a, b;
    if (!strcmp(report, model_out) ||
        (!stat(report, &a) && !stat(model_out, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
        return wm_cli_usage_error(c, "--report %s: the model's output file (-o); give the report another name", report);
    return wm_cli_json_out_check(c, report);
}

int wm_cli_fail(const wm_cli *c, const wm_error *e) {
    /* one line whatever the message quotes (a file name or a key holding a newline): controls become '?' */
    char line[sizeof e->msg];
    snprintf(line, sizeof line, "%s", e->msg[0] ? e->msg : wm_status_name(e->status));
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    fprintf(stderr, "%s: error: %s\n", c->prog, line);
    return e->status == WM_ERR_CHECK ? WM_EXIT_CHECK : WM_EXIT_ERROR;
}

int wm_cli_usage_error(const wm_cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wm_error e = {.status = WM_ERR_USAGE};
    vsnprintf(e.msg, sizeof e.msg - 64, fmt, ap); /* room for the hint */
    va_end(ap);
    size_t n = strlen(e.msg);
    snprintf(e.msg + n, sizeof e.msg - n, " (see %s --help)", c->prog);
    return wm_cli_fail(c, &e);
}

void wm_cli_info(const wm_cli *c, const char *fmt, ...) {
    if (c->quiet || c->json) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ table view */

static void scalar_text(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsString(v)) snprintf(buf, n, "%s", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "yes" : "no");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "-");
    else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == (double)(long long)d && d < 9e15 && d > -9e15) snprintf(buf, n, "%lld", (long long)d);
        else snprintf(buf, n, "%.6g", d);
    } else if (cJSON_IsArray(v)) { /* a list of scalars: [a, b, c] */
        size_t used = (size_t)snprintf(buf, n, "[");
        const cJSON *e;
        int first = 1;
        cJSON_ArrayForEach(e, v) {
            char item[256];
            scalar_text(e, item, sizeof item);
            if (used < n) used += (size_t)snprintf(buf + used, n - used, "%s%s", first ? "" : ", ", item);
            first = 0;
        }
        if (used < n) snprintf(buf + used, n - used, "]");
    } else snprintf(buf, n, "{...}");
}

/* 1 when v holds no objects at any depth (nested lists of scalars print on one line) */
static int all_scalars(const cJSON *v) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (cJSON_IsObject(e) || (cJSON_IsArray(e) && !all_scalars(e))) return 0;
    return 1;
}

static void render(const wm_cli *c, const cJSON *v, int indent) {
    const char *b = c->color ? "\033[1m" : "", *r = c->color ? "\033[0m" : "";
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const char *k = e->string ? e->string : "";
        if (cJSON_IsObject(e)) {
            if (!e->child) {
                printf("%*s%s%s%s: -\n", indent, "", b, k, r);
                continue;
            }
            printf("%*s%s%s%s:\n", indent, "", b, k, r);
            render(c, e, indent + 2);
        } else if (cJSON_IsArray(e) && !all_scalars(e)) {
            printf("%*s%s%s%s (%d):\n", indent, "", b, k, r, cJSON_GetArraySize(e));
            const cJSON *row;
            cJSON_ArrayForEach(row, e) {
                if (!cJSON_IsObject(row)) continue;
                char line[2048];
                size_t used = 0;
                const cJSON *f;
                line[0] = 0;
                cJSON_ArrayForEach(f, row) {
                    char val[1024];
                    scalar_text(f, val, sizeof val);
                    if (used < sizeof line)
                        used += (size_t)snprintf(line + used, sizeof line - used, "%s%s=%s", used ? "  " : "",
                                                 f->string, val);
                }
                printf("%*s- %s\n", indent + 2, "", line);
            }
        } else {
            char val[4096];
            scalar_text(e, val, sizeof val);
            printf("%*s%-26s %s\n", indent, "", k, val);
        }
    }
}

/*
 * A copy of JSON text (malloc'ed, caller frees; NULL when out of memory) in which the bare words NaN, Infinity
 * and -Infinity that wm_json_num_py writes (outside strings) are quoted, so that cJSON can read it for the table.
 */
static char *quote_py_numbers(const char *text) {
    size_t n = strlen(text), k = 0;
    char *o = malloc(n * 2 + 1);
    if (!o) return NULL;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = text[i];
        if (in_str) {
            o[k++] = ch;
            if (ch == '\\' && i + 1 < n) o[k++] = text[++i];
            else if (ch == '"') in_str = 0;
            continue;
        }
        if (ch == '"') in_str = 1;
        size_t w = !strncmp(text + i, "-Infinity", 9) ? 9 : !strncmp(text + i, "Infinity", 8) ? 8
                 : !strncmp(text + i, "NaN", 3) ? 3 : 0;
        if (w) {
            o[k++] = '"';
            memcpy(o + k, text + i, w);
            k += w;
            o[k++] = '"';
            i += w - 1;
        } else
            o[k++] = ch;
    }
    o[k] = 0;
    return o;
}

int wm_cli_emit(const wm_cli *c, const char *title, const wm_json *j) {
    const char *text = wm_json_text(j);
    if (j->oom) {
        fprintf(stderr, "%s: error: out of memory building the result\n", c->prog);
        return WM_EXIT_ERROR;
    }
    if (c->out) {
        wm_error e = {0};
        if (wm_json_out_check(c->out, c->model, &e) || wm_write_json_atomic(c->out, text, &e)) {
            fprintf(stderr, "%s: error: %s\n", c->prog, e.msg);
            return WM_EXIT_ERROR;
        }
    }
    if (c->json) {
        fputs(text, stdout);
        return fflush(stdout) == 0 ? WM_EXIT_OK : WM_EXIT_ERROR;
    }
    cJSON *doc = cJSON_Parse(text);
    char *quoted = doc ? NULL : quote_py_numbers(text);
    if (quoted) { /* Infinity / NaN of a reference layout: shown as words in the table */
        doc = cJSON_Parse(quoted);
        free(quoted);
    }
    if (!doc) {
        fputs(text, stdout);
        return WM_EXIT_OK;
    }
    if (title && !c->quiet) printf("%s%s%s\n", c->color ? "\033[1;36m" : "", title, c->color ? "\033[0m" : "");
    render(c, doc, 0);
    cJSON_Delete(doc);
    return fflush(stdout) == 0 ? WM_EXIT_OK : WM_EXIT_ERROR;
}
