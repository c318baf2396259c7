/* A layer blob as its uncompressed byte stream: the codec is sniffed from
 * the magic (gzip 1f8b, possibly multi-member; zstd 28b52ffd; else plain),
 * and every byte produced is hashed (the DiffID) and counted against a
 * limit. Bytes after the last gzip member are ignored (umoci 0.4.7).
 * A worker thread decodes ahead of the reader (a few MiB at most);
 * rt_stream_free stops and joins it, so no thread outlives the stream. */
#ifndef NSBOX_DECOMPRESS_H
#define NSBOX_DECOMPRESS_H

#include <stdint.h>
#include <sys/types.h>

#include "store-private.h"

struct rt_stream;

NSBOX_INTERNAL int rt_stream_new (int fd, uint64_t limit, struct rt_stream **out,
                                  struct nsbox_error **err);
/* Points *buf at the next decompressed bytes, valid until the next call;
 * returns their count, 0 at the end of the stream, or -errno with
 * rt_stream_error() describing it. */
NSBOX_INTERNAL ssize_t rt_stream_read (struct rt_stream *stream, const void **buf);
NSBOX_INTERNAL const char *rt_stream_error (const struct rt_stream *stream);
NSBOX_INTERNAL const char *rt_stream_codec (const struct rt_stream *stream);
/* Reads (and hashes) the rest, then writes the DiffID. */
NSBOX_INTERNAL int rt_stream_finish (struct rt_stream *stream, char digest[RT_DIGEST_LEN + 1]);
/* The bytes decoded; only once rt_stream_finish has succeeded. */
NSBOX_INTERNAL uint64_t rt_stream_total (const struct rt_stream *stream);
NSBOX_INTERNAL void rt_stream_free (struct rt_stream *stream);

#endif
