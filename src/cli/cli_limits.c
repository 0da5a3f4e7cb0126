/* cli_limits.c - --max-memory, --max-loop-iterations, --timeout (see cli_limits.h). */
#include "cli/cli_limits.h"

#include <limits.h>

#include "core/sysmem.h"

int wm_cli_limits_opt(const wm_cli *c, int opt, const char *arg, wm_session_opts *so) {
    switch (opt) {
    case WM_CLI_O_MAXMEM:
        if (wm_parse_size(arg, &so->max_memory)) {
            wm_cli_usage_error(c, "--max-memory: '%s' is not a size (bytes, or with K, M, G, T: 512M, 4G)", arg);
            return -1;
        }
        return 1;
    case WM_CLI_O_MAXITER: { /* the numbers of every command go through cli.c's parsers */
        long v;
        if (wm_cli_int_arg(c, "--max-loop-iterations", arg, 1, LONG_MAX, &v)) return -1;
        so->max_loop_iterations = v;
        return 1;
    }
    case WM_CLI_O_TIMEOUT:
        if (wm_cli_num_arg(c, "--timeout", arg, 0, 1, 1e9, &so->timeout_s)) return -1;
        return 1;
    default: return 0;
    }
}
