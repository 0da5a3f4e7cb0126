/*
 * ep.h - the one table of execution-provider names: the reference's short
 * alias ("qnn"), the ONNX Runtime name ("QNNExecutionProvider"), the
 * vendor ("QC") and the devices it drives. Lookups are case-insensitive on either name. Static data:
 * nothing here allocates.
 */
#ifndef WM_CORE_EP_H
#define WM_CORE_EP_H

#include <stddef.h>

/* The number of EPs in the table and the alias of the i-th (catalog order: cpu first); NULL past the end. */
size_t wm_ep_count(void);
const char *wm_ep_alias_at(size_t i);

/* The full ONNX Runtime name and vendor of an EP given by either name, any case ("qnn" -> "QNNExecutionProvider",
 * "QC"); an EP not in the table keeps its name, vendor "Unknown". */
void wm_ep_identity(const char *ep, const char **full, const char **ihv);

/* The alias of an EP given by alias or full name, any case ("QNNExecutionProvider" -> "qnn"); a name not in the
 * table is returned as it is. */
const char *wm_ep_alias(const char *ep);

/* The alias of ep when it is in the table (any case, either name), else NULL. */
const char *wm_ep_find(const char *ep);

/* The devices an EP drives, its default first ("npu,gpu" for qnn; static storage), NULL when ep is not in the table;
 * the default device alone ("npu"); whether it drives device (cpu|gpu|npu, any case): 1 or 0. The EP rule files of
 * data/ep_rules list the same devices (test_reference_flags checks they agree). */
const char *wm_ep_devices(const char *ep);
const char *wm_ep_default_device(const char *ep);
int wm_ep_drives(const char *ep, const char *device);

/* "cpu, dml, qnn, ..." - the aliases for messages (static storage). */
const char *wm_ep_alias_list(void);

#endif
