/* Applying image layers to a private rootfs tree, with the OCI image
 * spec's layer semantics (whiteouts, opaque directories): own
 * decompression (gzip, zstd, plain), DiffID verification, libarchive as
 * the tar reader, and an applier that resolves every path inside the tree
 * and bounds what a layer may create (store-private.h: the limits). */
#ifndef NSBOX_LAYER_H
#define NSBOX_LAYER_H

#include <stdio.h>

#include "store-private.h"

struct rt_unpack;

/* An applier writing into the directory root_fd (kept open by the caller;
 * an O_RDONLY|O_DIRECTORY fd of an empty directory the caller owns). */
NSBOX_INTERNAL int rt_unpack_new (struct nsbox_store *store, int root_fd, struct rt_unpack **out,
                                  struct nsbox_error **err);
/* Applies one layer blob (compressed or not: the format is sniffed) and
 * checks the sha256 of its whole uncompressed stream against diff_id.
 * digest (the blob's) and index name the layer in messages. Everything it
 * creates is counted against the store's limits for the whole image (see
 * rt_limits) and taken from the filesystem's free space (space.h) before
 * it is created. */
NSBOX_INTERNAL int rt_unpack_layer (struct rt_unpack *unpack, int blob_fd, const char *digest,
                                    const char *diff_id, unsigned index, struct nsbox_error **err);
/* Creates /proc, /dev and /tmp when missing (names written to `added`),
 * applies directory modes and mtimes deepest-first, and writes the
 * original owners and modes as ownership.tsv lines to `ownership`. */
NSBOX_INTERNAL int rt_unpack_finish (struct rt_unpack *unpack, FILE *ownership, FILE *added,
                                     struct nsbox_error **err);
NSBOX_INTERNAL void rt_unpack_free (struct rt_unpack *unpack);

#endif
