/*
 * parquet.h - Apache Parquet files (as the Hugging Face hub ships data sets) read into a wm_table of cells.
 * Footer + FileMetaData (Thrift compact protocol, read by hand), row groups, column chunks, data pages v1 and
 * v2, dictionary pages; encodings PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY, RLE (booleans) and the RLE /
 * bit-packed hybrid of levels (nullable columns); codecs UNCOMPRESSED, SNAPPY, GZIP and ZSTD; physical types
 * BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY.
 * Columns are the schema's leaves, named by their path ("image.bytes", "image.path" of a struct); a list
 * column (one level of repetition, "answers.text" of SQuAD) is a cell holding its elements as a JSON array.
 * Cells: integers in decimal, floats as the shortest text that reads back the same, booleans true / false,
 * byte arrays as their bytes (t->sizes gives the length of a binary cell that holds NUL bytes); a null is a
 * NULL cell. t->lines holds the 1-based row number of each row.
 * Untrusted input: every count, offset, length and decompressed size is checked (a page decompresses to
 * exactly its header's size, all pages of the file together to at most max_bytes), reading stops after
 * max_rows rows (only the row groups they lie in are read). Refused with "FILE: column C: reason" (or
 * "FILE: reason"): a truncated or malformed file, an unsupported codec, encoding or type, nested lists.
 */
#ifndef WM_CORE_PARQUET_H
#define WM_CORE_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "core/table.h"

#define WM_PARQUET_MAX_BYTES ((uint64_t)4 << 30) /* default cap on the decompressed bytes of the pages read */
#define WM_PARQUET_MAX_CELLS ((size_t)1 << 27)   /* default cap on rows x columns of the table */
#define WM_TABLE_MAX_LIST ((size_t)1 << 22)      /* elements of one list cell (Parquet and Arrow lists) */

typedef struct wm_parquet_opts {
    size_t max_rows;    /* rows to read (0: all) */
    uint64_t max_bytes; /* decompressed bytes of all pages read together (0: WM_PARQUET_MAX_BYTES) */
    size_t max_cells;   /* rows x columns (0: WM_PARQUET_MAX_CELLS) */
} wm_parquet_opts;

/* Reads the parquet file path (o may be NULL). t owns everything: wm_table_free; after an error t is empty. */
wm_status wm_parquet_read(const char *path, const wm_parquet_opts *o, wm_table *t, wm_error *err);
/* The same from len bytes in memory (label names it in errors). */
wm_status wm_parquet_parse(const uint8_t *buf, size_t len, const char *label, const wm_parquet_opts *o, wm_table *t,
                           wm_error *err);

#endif
