/*
 * cli_limits.h - the engine's bounds as flags, shared by the commands that
 * run models (perf, eval, run, generate):
 *   --max-memory SIZE          bytes a session may hold for activations and
 *                              the buffers the model's shapes size (default:
 *                              the memory available; WM_MAX_MEMORY)
 *   --max-loop-iterations N    iterations of one Loop/Scan (default 10^7;
 *                              WM_MAX_LOOP_ITERATIONS)
 *   --timeout SECONDS          one forward pass (default none; WM_TIMEOUT)
 * They fill the matching wm_session_opts fields (runtime.h).
 */
#ifndef WM_CLI_LIMITS_H
#define WM_CLI_LIMITS_H

#include "cli/cli.h"
#include "winml/runtime.h"

enum { WM_CLI_O_MAXMEM = 900, WM_CLI_O_MAXITER, WM_CLI_O_TIMEOUT };

#define WM_CLI_LIMITS_LONG                                                                                 \
    {"max-memory", required_argument, 0, WM_CLI_O_MAXMEM},                                                \
        {"max-loop-iterations", required_argument, 0, WM_CLI_O_MAXITER},                                  \
        {"timeout", required_argument, 0, WM_CLI_O_TIMEOUT}

/* The help lines of the three flags. */
#define WM_CLI_LIMITS_HELP                                                                                         \
    "Bounds: --max-memory SIZE (e.g. 4G; default: the memory available to the process; WM_MAX_MEMORY) caps what\n" \
    "the engine holds for activations and buffers the model's shapes size; --max-loop-iterations N (default\n"     \
    "10000000; WM_MAX_LOOP_ITERATIONS) caps one Loop or Scan; --timeout S (default none; WM_TIMEOUT) caps one\n"     \
    "forward pass. Past a bound the command stops with exit 2, naming the node and the bound.\n"

/*
 * Applies opt when it is one of the three: returns 1 (applied), 0 (not one
 * of them) or -1 (a bad value: usage error printed).
 */
int wm_cli_limits_opt(const wm_cli *c, int opt, const char *arg, wm_session_opts *so);

#endif
