/*
 * ep.h - the one table of execution-provider names: the reference's short
 * alias ("qnn"), the ONNX Runtime name ("QNNExecutionProvider") and the
 * vendor ("QC"). Lookups are case-insensitive on either name. Static data:
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

/* "cpu, dml, qnn, ..." - the aliases for messages (static storage). */
const char *wm_ep_alias_list(void);

#endif
