/* cmd_sys.c - `winml sys [-f json]`: CPU, ISA features, memory, kernels, version. */
#include <getopt.h>
#include <stdio.h>
#include <sys/utsname.h>

#include "cli/cli.h"
#include "core/cpu.h"
#include "kernels/kernels.h"

static void help(void) {
    printf("usage: winml sys [-f table|json] [-o FILE]\n\n"
           "Reports this machine: CPU model, cores, ISA features detected (AVX2, FMA,\n"
           "F16C, AVX-512 ...), memory, the kernel back ends compiled in, the version.\n");
}

int wm_cmd_sys(int argc, char **argv) {
    wm_cli c;
    wm_cli_init(&c, "winml sys");
    static const struct option longs[] = {WM_CLI_COMMON_LONG, {0, 0, 0, 0}};
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":" WM_CLI_COMMON_SHORT, longs, NULL)) != -1) {
        if (opt == 'h') {
            help();
            return WM_EXIT_OK;
        }
        int r = wm_cli_common_opt(&c, opt, optarg);
        if (r < 0) return WM_EXIT_ERROR;
        if (r && opt != 'm') continue;
        return wm_cli_usage_error(&c, "unknown option '%s'", argv[optind - 1]);
    }
    if (optind < argc) return wm_cli_usage_error(&c, "unexpected argument '%s'", argv[optind]);

    wm_cpu_info ci;
    wm_cpu_detect(&ci);
    struct utsname u;
    int have_uname = uname(&u) == 0;
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "version", WM_VERSION_STRING);
    wm_json_obj(&j, "os");
    wm_json_str(&j, "system", have_uname ? u.sysname : "unknown");
    wm_json_str(&j, "release", have_uname ? u.release : "unknown");
    wm_json_str(&j, "machine", have_uname ? u.machine : "unknown");
    wm_json_obj_end(&j);
    wm_json_obj(&j, "cpu");
    wm_json_str(&j, "model", ci.model);
    wm_json_int(&j, "logical_cores", ci.logical_cores);
    if (ci.physical_cores) wm_json_int(&j, "physical_cores", ci.physical_cores);
    else wm_json_null(&j, "physical_cores");
    wm_json_obj(&j, "features");
    wm_json_bool(&j, "sse4_2", ci.sse42);
    wm_json_bool(&j, "avx", ci.avx);
    wm_json_bool(&j, "avx2", ci.avx2);
    wm_json_bool(&j, "fma", ci.fma);
    wm_json_bool(&j, "f16c", ci.f16c);
    wm_json_bool(&j, "bmi2", ci.bmi2);
    wm_json_bool(&j, "avx512f", ci.avx512f);
    wm_json_bool(&j, "avx512bw", ci.avx512bw);
    wm_json_bool(&j, "avx512vl", ci.avx512vl);
    wm_json_bool(&j, "avx512_vnni", ci.avx512vnni);
    wm_json_bool(&j, "avx512_bf16", ci.avx512bf16);
    wm_json_bool(&j, "avx_vnni", ci.avxvnni);
    wm_json_bool(&j, "amx", ci.amx);
    wm_json_bool(&j, "neon", ci.neon);
    wm_json_obj_end(&j);
    wm_json_obj_end(&j);
    wm_json_obj(&j, "memory");
    wm_json_uint(&j, "total_bytes", ci.mem_total_bytes);
    wm_json_uint(&j, "available_bytes", ci.mem_available_bytes);
    wm_json_obj_end(&j);
    /* the kernel table the engine selects (WM_KERNELS=generic forces the portable one) and those built in */
    wm_json_obj(&j, "kernels");
    wm_json_str(&j, "selected", wm_kernels_get()->name);
    wm_json_arr(&j, "available");
    wm_json_str(&j, NULL, wm_kernels_generic()->name);
    if (wm_kernels_avx2()) wm_json_str(&j, NULL, wm_kernels_avx2()->name);
    if (wm_kernels_avx512()) wm_json_str(&j, NULL, wm_kernels_avx512()->name);
    wm_json_arr_end(&j);
    wm_json_obj_end(&j);
    wm_json_arr(&j, "devices");
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "name", "cpu");
    wm_json_str(&j, "kind", "CPU");
    wm_json_str(&j, "description", ci.model);
    wm_json_obj_end(&j);
    wm_json_arr_end(&j);
    wm_json_obj(&j, "build");
    wm_json_str(&j, "compiler", __VERSION__);
#ifdef __OPTIMIZE__
    wm_json_bool(&j, "optimized", 1);
#else
    wm_json_bool(&j, "optimized", 0);
#endif
    wm_json_obj_end(&j);
    wm_json_obj_end(&j);
    int rc = wm_cli_emit(&c, "winml sys", &j);
    wm_json_free(&j);
    return rc;
}
