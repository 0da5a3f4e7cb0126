/* cmd_quantize.c - placeholder while being written. */
#include "cli/cli.h"
int wm_cmd_quantize(int argc, char **argv) { (void)argc; (void)argv; return WM_EXIT_ERROR; }
