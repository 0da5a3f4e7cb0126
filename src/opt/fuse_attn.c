/* fuse_attn.c - attention fusions (placeholder while being written). */
#include "opt/match.h"

wm_status wm_pass_rotary(wm_pass_ctx *c) { (void)c; return WM_OK; }
wm_status wm_pass_mha(wm_pass_ctx *c) { (void)c; return WM_OK; }
wm_status wm_pass_gqa(wm_pass_ctx *c) { (void)c; return WM_OK; }
