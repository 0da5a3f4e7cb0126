/*
 * arrow_ipc.h - Apache Arrow IPC files (the stream format the `datasets` library caches as .arrow; the file format,
 * "ARROW1" around the same stream, too) read into a wm_table of cells. The Schema and RecordBatch flatbuffers are
 * read by hand, every offset checked against its buffer. Types: Int (8-64 bits, signed or not), FloatingPoint
 * (single, double), Bool, Utf8, LargeUtf8, Binary, LargeBinary, FixedSizeBinary, Null; Struct fields are columns of
 * their own ("image.bytes", "image.path"), a List / LargeList of those a cell holding a JSON array (as
 * core/parquet.h). Cells as there: decimal integers, the shortest float text, true / false, bytes (t->sizes);
 * a null is a NULL cell; t->lines the 1-based row number. Refused with "FILE: column C: reason" (or "FILE: reason"):
 * a truncated or malformed file, compressed bodies, dictionary-encoded fields, other types, nested lists.
 */
#ifndef WM_CORE_ARROW_IPC_H
#define WM_CORE_ARROW_IPC_H

#include <stddef.h>
#include <stdint.h>

#include "core/parquet.h"

/* Reads the Arrow IPC file path (o as parquet's: max_rows, max_bytes read, max_cells; may be NULL). t owns
   everything: wm_table_free; after an error t is empty. */
wm_status wm_arrow_read(const char *path, const wm_parquet_opts *o, wm_table *t, wm_error *err);
/* The same from len bytes in memory (label names it in errors). */
wm_status wm_arrow_parse(const uint8_t *buf, size_t len, const char *label, const wm_parquet_opts *o, wm_table *t,
                         wm_error *err);

#endif
