/* analyze_view.h - the console (table) view of `winml analyze` results. */
#ifndef WM_CLI_ANALYZE_VIEW_H
#define WM_CLI_ANALYZE_VIEW_H

#include "analyze/analyze.h"
#include "cli/cli.h"

/*
 * Prints the analyses as[0..n) of graph g (model path for the title) to
 * stdout: a summary line per target, then (unless -q) per target its model
 * checks, op table, components and partitions; -v adds every reason and every
 * node that is not supported. WM_ERR_NOMEM is the only failure.
 */
/* The EP rules folder: $WM_DATA_DIR/ep_rules, else data/ep_rules or share/winml/ep_rules beside the binary's
 * folder. 1 with out[n] set when one exists, else 0. */
int wm_cli_rules_dir(char *out, size_t n);

wm_status wm_analyze_view(const wm_cli *c, const char *model, const wm_graph *g, const wm_analysis *const *as, size_t n,
                          wm_error *err);

#endif
