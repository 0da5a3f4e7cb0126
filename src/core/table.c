/* table.c - JSONL / TSV / CSV tables read as a stream of bounded lines (see table.h). */
#include "core/table.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"
#include "core/arrow_ipc.h"
#include "core/parquet.h"

#define MAX_COLS 256
#define MAX_JSON_DEPTH 32
#define CHUNK ((size_t)64 << 10) /* read buffer of a file */
#define HINT_LINE "raise it with --max-line-bytes SIZE"

void wm_table_free(wm_table *t) {
    if (!t) return;
    for (size_t i = 0; t->names && i < t->n_cols; i++) free(t->names[i]);
    for (size_t i = 0; t->cells && i < t->n_rows * t->n_cols; i++) free(t->cells[i]);
    free(t->names);
    free(t->cells);
    free(t->lines);
    free(t->sizes);
    memset(t, 0, sizeof *t);
}

void wm_table_fmt_double(char *b, size_t n, double d) {
    if (isnan(d)) snprintf(b, n, "NaN");
    else if (isinf(d)) snprintf(b, n, d > 0 ? "Infinity" : "-Infinity");
    else {
        snprintf(b, n, "%.15g", d);
        if (strtod(b, NULL) != d) snprintf(b, n, "%.17g", d);
    }
}

void wm_table_fmt_float(char *b, size_t n, float f) {
    if (isnan(f) || isinf(f)) {
        wm_table_fmt_double(b, n, f);
        return;
    }
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(b, n, "%.*g", prec, (double)f);
        if (strtof(b, NULL) == f) return;
    }
}

int wm_table_col(const wm_table *t, const char *spec) {
    for (size_t i = 0; i < t->n_cols; i++) /* names first: GLUE headers start with '#' too ("#1 String") */
        if (!strcmp(t->names[i], spec)) return (int)i;
    if (spec[0] == '#' && spec[1]) {
        char *end;
        long i = strtol(spec + 1, &end, 10);
        return !*end && i >= 0 && (size_t)i < t->n_cols ? (int)i : -1;
    }
    return -1;
}

/* Appends a row of t->n_cols cells (taken over on success) starting on line. -1 on OOM (cells left to the caller). */
static int add_row(wm_table *t, char **row, size_t line, size_t *cap) {
    if (t->n_rows == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        char **cells = realloc(t->cells, nc * t->n_cols * sizeof *cells);
        if (!cells) return -1;
        t->cells = cells;
        size_t *lines = realloc(t->lines, nc * sizeof *lines);
        if (!lines) return -1;
        t->lines = lines;
        *cap = nc;
    }
    memcpy(t->cells + t->n_rows * t->n_cols, row, t->n_cols * sizeof *row);
    t->lines[t->n_rows++] = line;
    return 0;
}

static void free_cells(char **cells, int n) {
    for (int i = 0; i < n; i++) free(cells[i]);
}

/* ---------------------------------------------------------------- bounded lines */

typedef struct src {
    FILE *f;           /* NULL (and gz NULL): the whole text is in chunk */
    gzFile gz;         /* a gzip-compressed file, read decompressed */
    const char *chunk; /* the file's read buffer (own) or the text */
    char *own;
    size_t len, pos;   /* bytes in chunk, the next one to read */
    char *line;        /* a line crossing the end of the read buffer, put together */
    size_t line_cap;
    size_t max_line;
    size_t line_no;    /* of the line last returned, 1-based */
    const char *label;
    int started;
} src;

/* The next bytes of the file into the read buffer: 1, 0 at its end; an error status on a read error. */
static wm_status refill(src *s, int *more, wm_error *err) {
    *more = 0;
    if (!s->f && !s->gz) return WM_OK;
    size_t n;
    if (s->gz) {
        int r = gzread(s->gz, s->own, (unsigned)CHUNK), ze;
        if (r < 0) {
            const char *m = gzerror(s->gz, &ze);
            return wm_err(err, WM_ERR_INPUT, "%s: gzip data: %s", s->label, ze == Z_ERRNO ? strerror(errno) : m);
        }
        n = (size_t)r;
    } else if (!(n = fread(s->own, 1, CHUNK, s->f)) && ferror(s->f))
        return wm_err(err, WM_ERR_IO, "%s: read error: %s", s->label, strerror(errno));
    s->chunk = s->own, s->len = n, s->pos = 0;
    *more = n > 0;
    return WM_OK;
}

/* 1-based position of the first byte of p[0..n) that is not valid UTF-8 or is NUL (*nul set), 0 when none. */
static size_t utf8_bad(const unsigned char *p, size_t n, int *nul) {
    size_t i = 0;
    *nul = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            if (!c) return *nul = 1, i + 1;
            i++;
            continue;
        }
        size_t k;
        unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return i + 1; /* a continuation byte, an overlong lead (C0, C1) or past U+10FFFF */
        for (size_t j = 1; j <= k; j++) { /* a sequence cut short or broken: the position of its first byte */
            if (i + j >= n) return i + 1;
            unsigned d = p[i + j];
            if (j == 1 ? d < lo || d > hi : (d & 0xC0) != 0x80) return i + 1;
        }
        i += k + 1;
    }
    return 0;
}

/* The error for a line over the limit: reads on to its end (nothing kept) to name its length. */
static wm_status too_long(src *s, uint64_t so_far, int ended, wm_error *err) {
    while (!ended) {
        int more;
        wm_status st = refill(s, &more, err);
        if (st) return st;
        if (!more) break;
        const char *nl = memchr(s->chunk, '\n', s->len);
        so_far += nl ? (uint64_t)(nl - s->chunk) : s->len;
        ended = nl != NULL;
    }
    return wm_err(err, WM_ERR_INPUT, "%s:%zu: the line is %llu bytes long, over the limit of %zu bytes (%s)", s->label,
                  s->line_no, (unsigned long long)so_far, s->max_line, HINT_LINE);
}

/*
 * The next line, without its '\n', in *out (n bytes; valid until the next call): *got 1, or 0 at the end of the
 * text. A UTF-8 byte order mark at the start is skipped. Errors name the file and line: over max_line, invalid
 * UTF-8 or a NUL byte.
 */
static wm_status next_line(src *s, const char **out, size_t *n, int *got, wm_error *err) {
    int more;
    wm_status st;
    *got = 0;
    if (!s->started) {
        s->started = 1;
        if ((s->f || s->gz) && (st = refill(s, &more, err))) return st;
        if (s->len - s->pos >= 3 && !memcmp(s->chunk + s->pos, "\xEF\xBB\xBF", 3)) s->pos += 3;
    }
    if (s->pos == s->len) {
        if ((st = refill(s, &more, err))) return st;
        if (!more) return WM_OK;
    }
    s->line_no++;
    size_t acc = 0;
    int whole = 0; /* the line lies in the read buffer: no copy */
    for (;;) {
        if (s->pos == s->len) {
            if ((st = refill(s, &more, err))) return st;
            if (!more) break; /* the last line has no '\n' */
        }
        const char *p = s->chunk + s->pos, *nl = memchr(p, '\n', s->len - s->pos);
        size_t seg = nl ? (size_t)(nl - p) : s->len - s->pos;
        if (seg > s->max_line - acc) {
            s->pos = nl ? s->pos + seg + 1 : s->len;
            return too_long(s, (uint64_t)acc + seg, nl != NULL, err);
        }
        if (nl && !acc) {
            *out = p, *n = seg, whole = 1;
            s->pos += seg + 1;
            break;
        }
        if (acc + seg + 1 > s->line_cap) {
            size_t cap = s->line_cap ? 2 * s->line_cap : 256;
            if (cap < acc + seg + 1) cap = acc + seg + 1;
            if (cap > s->max_line + 1) cap = s->max_line + 1;
            char *nb = realloc(s->line, cap);
            if (!nb) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
            s->line = nb, s->line_cap = cap;
        }
        memcpy(s->line + acc, p, seg);
        acc += seg;
        s->pos += seg + (nl ? 1 : 0);
        if (nl) break;
    }
    if (!whole) *out = s->line ? s->line : "", *n = acc;
    int nul;
    size_t bad = utf8_bad((const unsigned char *)*out, *n, &nul);
    if (bad)
        return wm_err(err, WM_ERR_INPUT, "%s:%zu: %s at byte %zu", s->label, s->line_no,
                      nul ? "a NUL byte" : "invalid UTF-8", bad);
    *got = 1;
    return WM_OK;
}

/* ---------------------------------------------------------------- TSV / CSV */

typedef struct cellbuf {
    char *p;
    size_t len, cap;
} cellbuf;

static int cb_put(cellbuf *b, char c) {
    if (b->len + 2 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 32;
        char *np = realloc(b->p, cap);
        if (!np) return -1;
        b->p = np, b->cap = cap;
    }
    b->p[b->len++] = c;
    return 0;
}

/* The cell in b, as a new string (b emptied), into cells[*k]; -1 on OOM, -3 past max cells. */
static int cb_end(cellbuf *b, char **cells, int *k, int max) {
    if (*k == max) return -3;
    if (!b->p && !(b->p = malloc(1))) return -1;
    b->p[b->len] = 0;
    cells[(*k)++] = b->p;
    memset(b, 0, sizeof *b);
    return 0;
}

/*
 * One record whose first line is line (n bytes); a CSV quoted cell open at the end of a line takes the next
 * line too (its line break kept in the cell). Cells are new strings in cells; returns the count, or, with the
 * record's cells freed, -1 on OOM, -2 on an unterminated quote, -3 past max cells, -4 a record over max_line,
 * -5 an error of the source (err set).
 */
static int read_record(src *s, const char *line, size_t n, char sep, int quoting, char **cells, int max,
                       wm_error *err) {
    cellbuf b = {0};
    int k = 0, quoted = 0, rc = 0, at_start = 1; /* at_start: the next byte starts a cell */
    size_t total = n, i = 0;
    int cr = n && line[n - 1] == '\r'; /* CRLF: the CR ends the record, or stays in an open quoted cell */
    if (cr) n--;
    for (;;) {
        if (i == n) {
            if (!quoted) {
                rc = cb_end(&b, cells, &k, max);
                break;
            }
            if ((cr && (rc = cb_put(&b, '\r'))) || (rc = cb_put(&b, '\n'))) break;
            int got;
            if (next_line(s, &line, &n, &got, err)) {
                rc = -5;
                break;
            }
            if (!got || n > s->max_line - total) {
                rc = got ? -4 : -2;
                break;
            }
            total += n;
            cr = n && line[n - 1] == '\r';
            if (cr) n--;
            i = 0;
            continue;
        }
        char c = line[i++];
        if (at_start) {
            at_start = 0;
            if (quoting && c == '"') {
                quoted = 1;
                continue;
            }
        }
        if (quoted) {
            if (c == '"') {
                if (i < n && line[i] == '"') i++; /* "" is one quote */
                else {
                    quoted = 0;
                    continue;
                }
            }
        } else if (c == sep) {
            if ((rc = cb_end(&b, cells, &k, max))) break;
            at_start = 1;
            continue;
        }
        if ((rc = cb_put(&b, c))) break;
    }
    free(b.p);
    if (rc) {
        free_cells(cells, k);
        return rc;
    }
    return k;
}

/* The message of read_record's failure rc for the record that started on line. */
static wm_status record_err(const src *s, int rc, size_t line, wm_error *err) {
    if (rc == -5) return err->status;
    if (rc == -1) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
    if (rc == -2) return wm_err(err, WM_ERR_INPUT, "%s:%zu: unterminated quoted cell", s->label, line);
    if (rc == -3) return wm_err(err, WM_ERR_INPUT, "%s:%zu: more than %d columns", s->label, line, MAX_COLS);
    return wm_err(err, WM_ERR_INPUT,
                  "%s:%zu: the record is over the limit of %zu bytes at line %zu (an unclosed quote?) (%s)", s->label,
                  line, s->max_line, s->line_no, HINT_LINE);
}

static wm_status parse_sv(src *s, char sep, size_t max_rows, wm_table *t, wm_error *err) {
    char *cells[MAX_COLS];
    const char *line;
    size_t n, cap = 0;
    int got, quoting = sep == ',';
    wm_status st = next_line(s, &line, &n, &got, err);
    if (st) return st;
    if (!got || !n || (n == 1 && line[0] == '\r'))
        return wm_err(err, WM_ERR_INPUT, "%s:1: no header row", s->label);
    int k = read_record(s, line, n, sep, quoting, cells, MAX_COLS, err);
    if (k < 0) return record_err(s, k, 1, err);
    t->n_cols = (size_t)k;
    if (!(t->names = malloc((size_t)k * sizeof *t->names))) {
        free_cells(cells, k);
        return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
    }
    memcpy(t->names, cells, (size_t)k * sizeof *cells);
    while (!max_rows || t->n_rows < max_rows) {
        if ((st = next_line(s, &line, &n, &got, err))) return st;
        if (!got) break;
        size_t at = s->line_no;
        if (!n || (n == 1 && line[0] == '\r')) continue; /* a blank line */
        k = read_record(s, line, n, sep, quoting, cells, MAX_COLS, err);
        if (k < 0) return record_err(s, k, at, err);
        if ((size_t)k != t->n_cols) {
            free_cells(cells, k);
            return wm_err(err, WM_ERR_INPUT, "%s:%zu: the row has %d cells, the header %zu", s->label, at, k,
                          t->n_cols);
        }
        if (add_row(t, cells, at, &cap)) {
            free_cells(cells, k);
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
        }
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- JSONL */

static int json_depth_ok(const char *s, size_t n) {
    int d = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') {
            if (++d > MAX_JSON_DEPTH) return 0;
        } else if (c == '}' || c == ']') d--;
    }
    return 1;
}

static char *cell_of(const cJSON *v) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (cJSON_IsNumber(v) || cJSON_IsBool(v)) return cJSON_PrintUnformatted(v);
    return NULL;
}

static wm_status parse_jsonl(src *s, size_t max_rows, wm_table *t, wm_error *err) {
    size_t cap = 0;
    const char *q;
    size_t n;
    int got;
    while (!max_rows || t->n_rows < max_rows) {
        wm_status st = next_line(s, &q, &n, &got, err);
        if (st) return st;
        if (!got) break;
        while (n && (*q == ' ' || *q == '\t' || *q == '\r')) q++, n--;
        while (n && (q[n - 1] == ' ' || q[n - 1] == '\t' || q[n - 1] == '\r')) n--;
        if (!n) continue;
        size_t line = s->line_no;
        if (!json_depth_ok(q, n))
            return wm_err(err, WM_ERR_INPUT, "%s:%zu: nested deeper than %d", s->label, line, MAX_JSON_DEPTH);
        cJSON *o = cJSON_ParseWithLength(q, n);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            return wm_err(err, WM_ERR_INPUT, "%s:%zu: not a JSON object", s->label, line);
        }
        if (!t->names) { /* the first object's keys are the columns */
            size_t k = 0;
            for (const cJSON *e = o->child; e; e = e->next) k++;
            if (k == 0 || k > MAX_COLS) {
                cJSON_Delete(o);
                return wm_err(err, WM_ERR_INPUT, "%s:%zu: an object with 1 to %d keys is expected", s->label, line,
                              MAX_COLS);
            }
            if (!(t->names = calloc(k, sizeof *t->names))) {
                cJSON_Delete(o);
                return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
            }
            t->n_cols = k;
            k = 0;
            for (const cJSON *e = o->child; e; e = e->next)
                if (!(t->names[k++] = strdup(e->string ? e->string : ""))) st = WM_ERR_NOMEM;
        }
        char *row[MAX_COLS] = {0};
        for (size_t c = 0; c < t->n_cols && !st; c++)
            row[c] = cell_of(cJSON_GetObjectItemCaseSensitive(o, t->names[c]));
        cJSON_Delete(o);
        if (st || add_row(t, row, line, &cap)) {
            free_cells(row, (int)t->n_cols);
            return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", s->label);
        }
    }
    if (!t->names) return wm_err(err, WM_ERR_INPUT, "%s: no rows", s->label);
    return WM_OK;
}

/* ---------------------------------------------------------------- entry points */

static wm_status parse_src(src *s, wm_table_format fmt, const wm_table_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    s->max_line = o && o->max_line ? o->max_line : WM_TABLE_MAX_LINE;
    size_t max_rows = o ? o->max_rows : 0;
    wm_status st;
    switch (fmt) {
    case WM_TABLE_JSONL: st = parse_jsonl(s, max_rows, t, err); break;
    case WM_TABLE_TSV: st = parse_sv(s, '\t', max_rows, t, err); break;
    case WM_TABLE_CSV: st = parse_sv(s, ',', max_rows, t, err); break;
    default: st = wm_err(err, WM_ERR_USAGE, "%s: unknown data set format", s->label);
    }
    free(s->line);
    if (st) wm_table_free(t);
    return st;
}

wm_status wm_table_parse(const char *text, size_t len, wm_table_format fmt, const char *label, const wm_table_opts *o,
                         wm_table *t, wm_error *err) {
    src s = {.chunk = text ? text : "", .len = text ? len : 0, .label = label};
    return parse_src(&s, fmt, o, t, err);
}

/* The format of path's extension (".gz" looked through, *gz set), AUTO when none is known. */
static wm_table_format format_of(const char *path, int *gz) {
    size_t n = strlen(path);
    *gz = n > 3 && !strcmp(path + n - 3, ".gz");
    if (*gz) n -= 3;
    static const struct {
        const char *ext;
        wm_table_format fmt;
    } exts[] = {{".jsonl", WM_TABLE_JSONL}, {".json", WM_TABLE_JSONL}, {".tsv", WM_TABLE_TSV},
                {".csv", WM_TABLE_CSV}, {".parquet", WM_TABLE_PARQUET}, {".arrow", WM_TABLE_ARROW}};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++) {
        size_t k = strlen(exts[i].ext);
        if (n >= k && !strncmp(path + n - k, exts[i].ext, k)) /* parquet and arrow compress inside */
            return *gz && exts[i].fmt >= WM_TABLE_PARQUET ? WM_TABLE_AUTO : exts[i].fmt;
    }
    return WM_TABLE_AUTO;
}

wm_status wm_table_read(const char *path, wm_table_format fmt, const wm_table_opts *o, wm_table *t, wm_error *err) {
    memset(t, 0, sizeof *t);
    int gz = 0;
    wm_table_format ext = format_of(path, &gz);
    if (fmt == WM_TABLE_AUTO) fmt = ext;
    if (fmt == WM_TABLE_AUTO)
        return wm_err(err, WM_ERR_USAGE,
                      "%s: cannot tell the format from the extension (.jsonl, .tsv, .csv, each optionally .gz, "
                      ".parquet or .arrow)", path);
    if (fmt == WM_TABLE_PARQUET || fmt == WM_TABLE_ARROW) {
        wm_parquet_opts po = {.max_rows = o ? o->max_rows : 0};
        return fmt == WM_TABLE_PARQUET ? wm_parquet_read(path, &po, t, err) : wm_arrow_read(path, &po, t, err);
    }
    FILE *f = fopen(path, "rb");
    if (!f) return wm_err(err, WM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return wm_err(err, WM_ERR_INPUT, "%s: is a folder, not a data set file", path);
    }
    src s = {.f = f, .own = malloc(CHUNK), .label = path};
    if (gz) { /* zlib reads the file from here on (gzdopen takes over the descriptor) */
        int fd = dup(fileno(f));
        fclose(f);
        s.f = f = NULL;
        if (fd < 0 || !(s.gz = gzdopen(fd, "rb"))) {
            if (fd >= 0) close(fd);
            free(s.own);
            return wm_err(err, WM_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        }
    }
    wm_status st = s.own ? parse_src(&s, fmt, o, t, err) : wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    free(s.own);
    if (f) fclose(f);
    if (s.gz) gzclose(s.gz);
    return st;
}
