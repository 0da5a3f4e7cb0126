/* jinja_format.c - Python's printf-style formatting (str % args), used by the % operator on
 * strings and by the format filter. %s/%r count code points for width and precision; numbers go
 * through C's printf, which writes them as Python does for these conversions. */
#include <stdio.h>
#include <string.h>

#include "llm/jinja_impl.h"

/* s % args (args: a tuple = several, a dict = mapping keys, anything else = one value) */
int wm_jformat(jctx *c, const jnode *at, jv fmt, jv args, jv *out) {
    const char *p = fmt.u.s.p;
    size_t n = fmt.u.s.n, ai = 0;
    jv *av = &args;
    size_t an = 1;
    int mapping = args.t == JV_DICT && args.u.d->kind == JD_DICT;
    if (args.t == JV_LIST && args.u.l->tuple) {
        av = args.u.l->v;
        an = args.u.l->n;
    }
    jbuf b = {0};
    for (size_t i = 0; i < n;) {
        if (p[i] != '%') {
            size_t j = i;
            while (j < n && p[j] != '%') j++;
            if (wm_jbuf_put(c, &b, p + i, j - i)) goto fail;
            i = j;
            continue;
        }
        i++;
        if (i < n && p[i] == '%') {
            if (wm_jbuf_putc(c, &b, '%')) goto fail;
            i++;
            continue;
        }
        jv v;
        if (i < n && p[i] == '(') { /* %(key)s */
            size_t j = i + 1;
            while (j < n && p[j] != ')') j++;
            if (j >= n || !mapping) {
                wm_jerr(c, at, WM_ERR_INPUT, "format: %s", j >= n ? "incomplete format key" : "format requires a mapping");
                goto fail;
            }
            if (!wm_jdict_get(c, args.u.d, p + i + 1, j - i - 1, &v)) {
                wm_jerr(c, at, WM_ERR_INPUT, "format: key '%.*s' not found", (int)(j - i - 1), p + i + 1);
                goto fail;
            }
            i = j + 1;
        } else {
            v = wm_jv_undef(NULL);
        }
        char flags[8] = "";
        size_t nf = 0;
        while (i < n && strchr("-+ #0", p[i]) && p[i] && nf < 6) flags[nf++] = p[i++];
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (i < n && p[i] >= '0' && p[i] <= '9') {
            width = 0;
            while (i < n && p[i] >= '0' && p[i] <= '9' && width < 100000) width = width * 10 + (p[i++] - '0');
        }
        if (i < n && p[i] == '.') {
            i++;
            prec = 0;
            while (i < n && p[i] >= '0' && p[i] <= '9' && prec < 1000) prec = prec * 10 + (p[i++] - '0');
        }
        if (width > 100000 || prec > 1000) {
            wm_jerr(c, at, WM_ERR_INPUT, "format: width or precision too large");
            goto fail;
        }
        if (i >= n) {
            wm_jerr(c, at, WM_ERR_INPUT, "format: incomplete format");
            goto fail;
        }
        char conv = p[i++];
        if (v.t == JV_UNDEF && !mapping) {
            if (ai >= an) {
                wm_jerr(c, at, WM_ERR_INPUT, "format: not enough arguments for format string");
                goto fail;
            }
            v = av[ai++];
        } else if (v.t == JV_UNDEF) {
            v = args; /* a mapping given to a positional conversion: the mapping itself */
            ai = an;
        }
        char spec[32], num[1200];
        jv text;
        if (conv == 's' || conv == 'r' || conv == 'a') {
            jbuf t = {0};
            if ((conv == 's' ? wm_jv_str(c, &t, v) : wm_jv_repr(c, &t, v)) || wm_jbuf_to_str(c, &t, &text)) {
                wm_jbuf_free(&t);
                goto fail;
            }
            size_t len = wm_jlen(c, text.u.s.p, text.u.s.n), keep = text.u.s.n;
            if (prec >= 0 && (size_t)prec < len) { /* precision cuts code points */
                keep = 0;
                for (int k = 0; k < prec; k++) keep = wm_u8_next(text.u.s.p, text.u.s.n, keep);
                len = (size_t)prec;
            }
            int left = strchr(flags, '-') != NULL;
            size_t pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
            for (size_t k = 0; k < pad && !left; k++)
                if (wm_jbuf_putc(c, &b, ' ')) goto fail;
            if (wm_jbuf_put(c, &b, text.u.s.p, keep)) goto fail;
            for (size_t k = 0; k < pad && left; k++)
                if (wm_jbuf_putc(c, &b, ' ')) goto fail;
            continue;
        }
        int is_int = strchr("diouxXc", conv) != NULL, is_flt = strchr("eEfFgG", conv) != NULL;
        if (!is_int && !is_flt) {
            wm_jerr(c, at, WM_ERR_INPUT, "format: unsupported format character '%c'", conv);
            goto fail;
        }
        if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT) {
            wm_jerr(c, at, WM_ERR_INPUT, "format: %%%c format: a real number is required, not %s", conv, wm_jv_typename(v));
            goto fail;
        }
        if (conv == 'c') {
            wm_jerr(c, at, WM_ERR_UNSUPPORTED, "format: %%c is not supported");
            goto fail;
        }
        if (is_int) {
            if (v.t == JV_FLOAT && (conv == 'x' || conv == 'X' || conv == 'o')) {
                wm_jerr(c, at, WM_ERR_INPUT, "format: %%%c format: an integer is required, not float", conv);
                goto fail;
            }
            long long x = v.t == JV_INT ? (long long)v.u.i : v.t == JV_BOOL ? v.u.b : (long long)v.u.f;
            if (v.t == JV_FLOAT && !(v.u.f > -9.2e18 && v.u.f < 9.2e18)) {
                wm_jerr(c, at, WM_ERR_INPUT, "format: number out of range");
                goto fail;
            }
            char cv = conv == 'i' || conv == 'u' ? 'd' : conv;
            if (conv == 'o' && strchr(flags, '#')) {
                wm_jerr(c, at, WM_ERR_UNSUPPORTED, "format: %%#o is not supported");
                goto fail;
            }
            {
                if (width >= 0 && prec >= 0) snprintf(spec, sizeof spec, "%%%s%d.%dll%c", flags, width, prec, cv);
                else if (width >= 0) snprintf(spec, sizeof spec, "%%%s%dll%c", flags, width, cv);
                else if (prec >= 0) snprintf(spec, sizeof spec, "%%%s.%dll%c", flags, prec, cv);
                else snprintf(spec, sizeof spec, "%%%sll%c", flags, cv);
                snprintf(num, sizeof num, spec, x);
            }
        } else {
            double x = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b;
            if (width >= 0 && prec >= 0) snprintf(spec, sizeof spec, "%%%s%d.%d%c", flags, width, prec, conv);
            else if (width >= 0) snprintf(spec, sizeof spec, "%%%s%d%c", flags, width, conv);
            else if (prec >= 0) snprintf(spec, sizeof spec, "%%%s.%d%c", flags, prec, conv);
            else snprintf(spec, sizeof spec, "%%%s%c", flags, conv);
            snprintf(num, sizeof num, spec, x);
        }
        if (wm_jbuf_put(c, &b, num, strlen(num))) goto fail;
    }
    if (!mapping && ai < an) {
        wm_jerr(c, at, WM_ERR_INPUT, "format: not all arguments converted during string formatting");
        goto fail;
    }
    return wm_jbuf_to_str(c, &b, out);
fail:
    wm_jbuf_free(&b);
    return -1;
}

