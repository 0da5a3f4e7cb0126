/* jinja_stmt.c - statements: {% if/elif/else %}, {% for ... if ... %} with else, {% set %}
 * (names, tuples, ns.attr, block set with filters), {% macro %}, {% filter %},
 * {% generation %}, break/continue (inside loops only), and the template body. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_parse.h"

/* for/set targets: name, ns.attr (set only), or a comma tuple of names */
static jnode *assign_target(ps *p, int with_ns, const char *extra_end) {
    jtok *t0 = cur(p);
    char b[64];
    jnode *tup = NULL, *first = NULL;
    for (;;) {
        if (first && expect_op(p, K_COMMA, ",")) return NULL;
        if (first && (is_op(cur(p), K_ASSIGN) || is_name(cur(p), extra_end ? extra_end : "\x01") ||
                      cur(p)->type == T_BLOCK_END || is_op(cur(p), K_PIPE)))
            break;
        jtok *t = cur(p);
        if (t->type != T_NAME) return pfail(p, t, "can't assign to %s", describe(t, b, sizeof b));
        jnode *e = mk(p, N_NAME, t);
        if (!e || !(e->name = name_dup(p, t))) return NULL;
        adv(p);
        if (with_ns && is_op(cur(p), K_DOT)) {
            adv(p);
            if (cur(p)->type != T_NAME) return pfail(p, cur(p), "expected an attribute name");
            e->kind = N_NSREF;
            if (!(e->name2 = name_dup(p, cur(p)))) return NULL;
            adv(p);
        }
        if (!first) {
            first = e;
        } else {
            if (push(p, &tup->items, &tup->n, e)) return NULL;
        }
        if (!is_op(cur(p), K_COMMA)) break;
        if (!tup && (!(tup = mk(p, N_TUPLE, t0)) || push(p, &tup->items, &tup->n, first))) return NULL;
    }
    if (tup)
        for (size_t i = 0; i < tup->n; i++)
            if (tup->items[i]->kind == N_NSREF) return pfail(p, t0, "can't assign to a namespace attribute in a tuple");
    return tup ? tup : first;
}

/* FOR_USES_LOOP when the subtree names "loop", FOR_HAS_MACRO when it defines a macro (depth is
 * bounded by the parser's own nesting limit) */
static int walk_flags(const jnode *n, int depth) {
    if (!n || depth > 4 * 1024) return FOR_USES_LOOP | FOR_HAS_MACRO;
    int f = 0;
    if (n->kind == N_NAME && !strcmp(n->name, "loop")) f |= FOR_USES_LOOP;
    if (n->kind == N_MACRO) f |= FOR_HAS_MACRO;
    if ((n->kind == N_NSREF) && !strcmp(n->name, "loop")) f |= FOR_USES_LOOP;
    const jnode *kids[3] = {n->a, n->b, n->c};
    for (int i = 0; i < 3; i++)
        if (kids[i]) f |= walk_flags(kids[i], depth + 1);
    for (size_t i = 0; i < n->n; i++) f |= walk_flags(n->items[i], depth + 1);
    for (size_t i = 0; i < n->n2; i++) f |= walk_flags(n->items2[i], depth + 1);
    return f;
}

static int expect_block_end(ps *p) {
    char b[64];
    if (cur(p)->type != T_BLOCK_END) {
        pfail(p, cur(p), "expected end of statement block '%%}', got %s", describe(cur(p), b, sizeof b));
        return -1;
    }
    adv(p);
    return 0;
}

static int subparse(ps *p, jnode ***body, size_t *n, const char *const *ends, const jtok *opener);

static jnode *stmt_if(ps *p, jtok *t) {
    jnode *n = mk(p, N_IF, t);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    if (!n || !(n->a = tuple_expr(p, 0, NULL, 0)) || expect_block_end(p)) return NULL;
    if (subparse(p, &n->items, &n->n, ends, t)) return NULL;
    jtok *e = cur(p);
    adv(p);
    if (is_name(e, "elif")) {
        jnode *sub = stmt_if(p, e);
        if (!sub || push(p, &n->items2, &n->n2, sub)) return NULL;
        return n;
    }
    if (is_name(e, "else")) {
        static const char *const ends2[] = {"endif", NULL};
        if (expect_block_end(p) || subparse(p, &n->items2, &n->n2, ends2, t)) return NULL;
        adv(p);
    }
    return expect_block_end(p) ? NULL : n;
}

static jnode *stmt_for(ps *p, jtok *t) {
    jnode *n = mk(p, N_FOR, t);
    char b[64];
    if (!n || !(n->a = assign_target(p, 0, "in"))) return NULL;
    if (!is_name(cur(p), "in")) return pfail(p, cur(p), "expected 'in', got %s", describe(cur(p), b, sizeof b));
    adv(p);
    if (!(n->b = tuple_expr(p, 0, "recursive", 0))) return NULL;
    if (is_name(cur(p), "if")) {
        adv(p);
        if (!(n->c = expression(p, 1))) return NULL;
    }
    if (is_name(cur(p), "recursive")) return punsupported(p, cur(p), "a recursive for loop");
    static const char *const ends[] = {"endfor", "else", NULL};
    if (expect_block_end(p)) return NULL;
    p->loops++;
    if (subparse(p, &n->items, &n->n, ends, t)) return NULL;
    p->loops--;
    for (size_t i = 0; i < n->n; i++) n->op |= walk_flags(n->items[i], 0);
    if (is_name(cur(p), "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        adv(p);
        if (expect_block_end(p) || subparse(p, &n->items2, &n->n2, ends2, t)) return NULL;
    }
    adv(p);
    return expect_block_end(p) ? NULL : n;
}

static jnode *stmt_set(ps *p, jtok *t) {
    jnode *n = mk(p, N_SET, t);
    if (!n || !(n->a = assign_target(p, 1, NULL))) return NULL;
    if (is_op(cur(p), K_ASSIGN)) {
        adv(p);
        if (!(n->b = tuple_expr(p, 1, NULL, 0)) || expect_block_end(p)) return NULL;
        return n;
    }
    n->kind = N_SETBLOCK;
    if (n->a->kind == N_TUPLE) return pfail(p, t, "a block set takes one target");
    if (is_op(cur(p), K_PIPE) && !(n->c = filter_chain(p, NULL))) return NULL;
    static const char *const ends[] = {"endset", NULL};
    if (expect_block_end(p) || subparse(p, &n->items, &n->n, ends, t)) return NULL;
    adv(p);
    return expect_block_end(p) ? NULL : n;
}

static jnode *stmt_macro(ps *p, jtok *t) {
    jnode *n = mk(p, N_MACRO, t);
    char b[64];
    if (!n) return NULL;
    if (cur(p)->type != T_NAME) return pfail(p, cur(p), "expected a macro name, got %s", describe(cur(p), b, sizeof b));
    if (!(n->name = name_dup(p, cur(p)))) return NULL;
    adv(p);
    if (expect_op(p, K_LPAREN, "(")) return NULL;
    while (!is_op(cur(p), K_RPAREN)) {
        if (n->n && expect_op(p, K_COMMA, ",")) return NULL;
        if (is_op(cur(p), K_RPAREN)) break;
        if (cur(p)->type != T_NAME) return pfail(p, cur(p), "expected a parameter name, got %s", describe(cur(p), b, sizeof b));
        jnode *a = mk(p, N_KWARG, cur(p));
        if (!a || !(a->name = name_dup(p, cur(p)))) return NULL;
        adv(p);
        if (is_op(cur(p), K_ASSIGN)) {
            adv(p);
            if (!(a->a = expression(p, 1))) return NULL;
        } else {
            for (size_t i = 0; i < n->n; i++)
                if (n->items[i]->a) return pfail(p, cur(p), "non-default parameter follows a default parameter");
        }
        if (push(p, &n->items, &n->n, a)) return NULL;
    }
    adv(p);
    static const char *const ends[] = {"endmacro", NULL};
    int loops = p->loops;
    p->loops = 0;
    if (expect_block_end(p) || subparse(p, &n->items2, &n->n2, ends, t)) return NULL;
    p->loops = loops;
    adv(p);
    if (cur(p)->type == T_NAME) adv(p); /* {% endmacro name %} */
    return expect_block_end(p) ? NULL : n;
}

static jnode *statement(ps *p) {
    jtok *t = cur(p);
    char b[64];
    if (t->type != T_NAME) return pfail(p, t, "expected a tag name, got %s", describe(t, b, sizeof b));
    adv(p);
    if (is_name(t, "if")) return stmt_if(p, t);
    if (is_name(t, "for")) return stmt_for(p, t);
    if (is_name(t, "set")) return stmt_set(p, t);
    if (is_name(t, "macro")) return stmt_macro(p, t);
    if (is_name(t, "break") || is_name(t, "continue")) {
        if (!p->loops) return pfail(p, t, "'%s' outside of a loop", is_name(t, "break") ? "break" : "continue");
        jnode *n = mk(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
        return !n || expect_block_end(p) ? NULL : n;
    }
    if (is_name(t, "generation") || is_name(t, "filter")) {
        int gen = is_name(t, "generation");
        jnode *n = mk(p, gen ? N_BLOCK : N_FILTERBLOCK, t);
        if (!n) return NULL;
        if (!gen) {
            if (!is_op(cur(p), K_PIPE)) {
                /* "{% filter name(args) %}": parse as a chain starting with the name */
                jnode *f = mk(p, N_FILTER, cur(p));
                if (!f || dotted_name(p, f, 0)) return NULL;
                if (is_op(cur(p), K_LPAREN) && call_args(p, f)) return NULL;
                if (!(n->c = filter_chain(p, f))) return NULL;
            }
        }
        static const char *const g_ends[] = {"endgeneration", NULL};
        static const char *const f_ends[] = {"endfilter", NULL};
        if (expect_block_end(p) || subparse(p, &n->items, &n->n, gen ? g_ends : f_ends, t)) return NULL;
        adv(p);
        return expect_block_end(p) ? NULL : n;
    }
    static const char *const unsup[] = {"include", "extends", "import", "from", "block", "call", "with",
                                        "autoescape", "do", "trans", NULL};
    for (int i = 0; unsup[i]; i++)
        if (is_name(t, unsup[i])) {
            char what[64];
            snprintf(what, sizeof what, "the '%s' tag", unsup[i]);
            return punsupported(p, t, what);
        }
    return pfail(p, t, "unknown tag %s", describe(t, b, sizeof b));
}

/* Statements up to a {% name %} with name in ends (left at that name), or EOF when ends is NULL. */
static int subparse(ps *p, jnode ***body, size_t *n, const char *const *ends, const jtok *opener) {
    char b[64];
    if (enter(p)) return -1;
    for (;;) {
        jtok *t = cur(p);
        jnode *s = NULL;
        if (t->type == T_EOF) {
            if (!ends) break;
            pfail(p, t, "unexpected end of template: the '%.*s' tag opened at line %d col %d is not closed (expected '%s')",
                  opener->type == T_NAME ? (int)opener->n : 3, opener->type == T_NAME ? opener->p : "tag",
                  opener->line, opener->col, ends[0]);
            return -1;
        }
        if (t->type == T_DATA) {
            if (!(s = mk(p, N_TEXT, t))) return -1;
            s->val = wm_jv_cstr(t->p, t->n);
            adv(p);
        } else if (t->type == T_VAR_BEGIN) {
            adv(p);
            if (!(s = mk(p, N_OUTPUT, t)) || !(s->a = tuple_expr(p, 1, NULL, 0))) return -1;
            if (cur(p)->type != T_VAR_END) {
                pfail(p, cur(p), "expected end of print statement '}}', got %s", describe(cur(p), b, sizeof b));
                return -1;
            }
            adv(p);
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(p);
            if (ends)
                for (int i = 0; ends[i]; i++)
                    if (is_name(cur(p), ends[i])) {
                        p->depth--;
                        return 0;
                    }
            if (!(s = statement(p))) return -1;
        } else {
            pfail(p, t, "unexpected %s", describe(t, b, sizeof b));
            return -1;
        }
        if (push(p, body, n, s)) return -1;
    }
    p->depth--;
    return 0;
}

wm_status wm_jparse(wm_jinja *t, const char *src, size_t n, wm_error *err) {
    jtok *toks;
    size_t nt;
    wm_status st = wm_jlex(&t->arena, src, n, &toks, &nt, err);
    if (st) return st;
    ps p = {t, toks, nt, 0, 0, 0, err, 0};
    jtok start = {0};
    start.line = start.col = 1;
    jnode *root = mk(&p, N_BLOCK, &start);
    if (!root) return WM_ERR_NOMEM;
    if (subparse(&p, &root->items, &root->n, NULL, &start)) return err && err->status ? err->status : WM_ERR_INPUT;
    t->root = root;
    return WM_OK;
}
