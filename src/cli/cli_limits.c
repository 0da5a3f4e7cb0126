/* cli_limits.c - --max-memory, --max-loop-iterations, --timeout (see cli_limits.h). */
#include "cli/cli_limits.h"

#include <errno.h>
#include <stdlib.h>

#include "core/sysmem.h"

int wm_cli_limits_opt(const wm_cli *c, int opt, const char *arg, wm_session_opts *so) {
    char *end;
    switch (opt) {
    case WM_CLI_O_MAXMEM:
        if (wm_parse_size(arg, &so->max_memory)) {
            wm_cli_usage_error(c, "--max-memory: '%s' is not a size (bytes, or with K, M, G, T: 512M, 4G)", arg);
            return -1;
        }
        return 1;
    case WM_CLI_O_MAXITER: {
        errno = 0;
        long long v = strtoll(arg, &end, 10);
        if (!*arg || *end || errno || v < 1) {
            wm_cli_usage_error(c, "--max-loop-iterations: '%s' is not a count >= 1", arg);
            return -1;
        }
        so->max_loop_iterations = v;
        return 1;
    }
    case WM_CLI_O_TIMEOUT: {
        double v = strtod(arg, &end);
        if (!*arg || *end || !(v > 0) || v > 1e9) {
            wm_cli_usage_error(c, "--timeout: '%s' is not a number of seconds > 0", arg);
            return -1;
        }
        so->timeout_s = v;
        return 1;
    }
    default: return 0;
    }
}
