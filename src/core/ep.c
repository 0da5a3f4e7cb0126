/* ep.c - the execution-provider name table (ep.h). */
#include "core/ep.h"

#include <string.h>
#include <strings.h>

static const struct {
    const char *alias, *full, *ihv;
} eps[] = {
    {"cpu", "CPUExecutionProvider", "Microsoft"},
    {"dml", "DmlExecutionProvider", "Microsoft"},
    {"qnn", "QNNExecutionProvider", "QC"},
    {"openvino", "OpenVINOExecutionProvider", "Intel"},
    {"vitisai", "VitisAIExecutionProvider", "AMD"},
    {"trtrtx", "NvTensorRTRTXExecutionProvider", "NVIDIA"},
    {"migraphx", "MIGraphXExecutionProvider", "AMD"},
    {"cuda", "CUDAExecutionProvider", "NVIDIA"},
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
