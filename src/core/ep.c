/* ep.c - the execution-provider name table (ep.h). */
#include "core/ep.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *alias, *full, *ihv, *devices; /* devices: the ones it drives, its default first */
} eps[] = {
    {"cpu", "CPUExecutionProvider", "Microsoft", "cpu"},
    {"dml", "DmlExecutionProvider", "Microsoft", "gpu"},
    {"qnn", "QNNExecutionProvider", "QC", "npu,gpu"},
    {"openvino", "OpenVINOExecutionProvider", "Intel", "cpu,gpu,npu"},
    {"vitisai", "VitisAIExecutionProvider", "AMD", "npu"},
    {"trtrtx", "NvTensorRTRTXExecutionProvider", "NVIDIA", "gpu"},
    {"migraphx", "MIGraphXExecutionProvider", "AMD", "gpu"},
    {"cuda", "CUDAExecutionProvider", "NVIDIA", "gpu"},
};
#define N_EPS (sizeof eps / sizeof eps[0])

size_t wm_ep_count(void) { return N_EPS; }

const char *wm_ep_alias_at(size_t i) { return i < N_EPS ? eps[i].alias : NULL; }

static int find(const char *ep) {
    for (size_t i = 0; ep && i < N_EPS; i++)
        if (!strcasecmp(ep, eps[i].alias) || !strcasecmp(ep, eps[i].full)) return (int)i;
    return -1;
}

void wm_ep_identity(const char *ep, const char **full, const char **ihv) {
    int i = find(ep);
    *full = i < 0 ? ep : eps[i].full;
    *ihv = i < 0 ? "Unknown" : eps[i].ihv;
}

const char *wm_ep_alias(const char *ep) {
    int i = find(ep);
    return i < 0 ? ep : eps[i].alias;
}

const char *wm_ep_find(const char *ep) {
    int i = find(ep);
    return i < 0 ? NULL : eps[i].alias;
}

const char *wm_ep_alias_list(void) { return "cpu, dml, qnn, openvino, vitisai, trtrtx, migraphx, cuda"; }

const char *wm_ep_devices(const char *ep) {
    int i = find(ep);
    return i < 0 ? NULL : eps[i].devices;
}

const char *wm_ep_default_device(const char *ep) {
    static const char *const devs[] = {"cpu", "gpu", "npu"};
    const char *d = wm_ep_devices(ep);
    for (size_t k = 0; d && k < 3; k++)
        if (!strncmp(d, devs[k], 3)) return devs[k];
    return NULL;
}

int wm_ep_drives(const char *ep, const char *device) {
    const char *d = wm_ep_devices(ep);
    size_t n = device ? strlen(device) : 0;
    for (const char *p = d; p && n; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncasecmp(p, device, n) && (p[n] == ',' || !p[n])) return 1;
    return 0;
}
