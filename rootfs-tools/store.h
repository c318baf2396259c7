/* The content-addressed image store (itself an OCI image layout), shared by
 * `nsbox-image` and `nsbox run --image`.
 *
 *   ROOT/oci-layout, ROOT/index.json    refs: org.opencontainers.image.ref.name
 *   ROOT/blobs/sha256/<hex>             verified only, mode 0444
 *   ROOT/ingest/<hex>.partial           resumable downloads
 *   ROOT/tmp/<rand>/                    locked work dirs
 *   ROOT/rootfs/<chainid>.<ver>/{rootfs/,config.json,ownership.tsv,.complete}
 *   ROOT/locks/                         flock files
 *
 * ROOT: --store DIR, else $NSBOX_STORE, else /var/lib/nsbox for root, else
 * ${XDG_CACHE_HOME:-$HOME/.cache}/nsbox. All functions return >= 0 on
 * success, -errno on failure with *err filled (error.h). */
#ifndef NSBOX_STORE_H
#define NSBOX_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"

struct nsbox_store;
struct nsbox_ingest;

/* Opens (creating when missing, mode 0700) the store at `root`, or the
 * default location when root is NULL. */
int nsbox_store_open (const char *root, struct nsbox_store **out, struct nsbox_error **err);
void nsbox_store_close (struct nsbox_store *store);
/* The fd holding the store's shared lock (taken by nsbox_store_open, so
 * `gc` cannot remove anything while the store is open). Handed to another
 * process (SCM_RIGHTS), it keeps the lock held after this one closes the
 * store: the lock belongs to the open file, not to the process. */
int nsbox_store_lock_fd (const struct nsbox_store *store);
const char *nsbox_store_root (const struct nsbox_store *store);

/* "sha256:<64 lowercase hex>" only. */
bool nsbox_digest_valid (const char *digest);

bool nsbox_store_has_blob (struct nsbox_store *store, const char *digest);
/* Opens a verified blob read-only (O_CLOEXEC). */
int nsbox_store_open_blob (struct nsbox_store *store, const char *digest, int *fd,
                           struct nsbox_error **err);
/* Reads a whole verified blob of at most max_size bytes (JSON documents). */
int nsbox_store_read_blob (struct nsbox_store *store, const char *digest, size_t max_size,
                           char **data, size_t *len, struct nsbox_error **err);

/* Streams a blob in: bytes go to ingest/<hex>.partial while being hashed;
 * commit checks size and digest, fsyncs, makes it 0444 and renames it into
 * blobs/ (nothing unverified ever appears there). begin takes the per-blob
 * lock, re-checks for the blob (then *already = true and *out is NULL) and
 * reports in *resume_offset how many bytes of a previous partial download
 * were kept (re-hashed), so the caller can ask for a Range. expected_size
 * may be -1 when unknown. */
int nsbox_store_ingest_begin (struct nsbox_store *store, const char *digest, int64_t expected_size,
                              struct nsbox_ingest **out, bool *already, uint64_t *resume_offset,
                              struct nsbox_error **err);
/* Discards the partial data (the server answered 200 to a Range request). */
int nsbox_ingest_restart (struct nsbox_ingest *ingest, struct nsbox_error **err);
int nsbox_ingest_write (struct nsbox_ingest *ingest, const void *buf, size_t len,
                        struct nsbox_error **err);
uint64_t nsbox_ingest_offset (const struct nsbox_ingest *ingest);
int nsbox_ingest_commit (struct nsbox_ingest *ingest, struct nsbox_error **err);
/* keep_partial: leave ingest/<hex>.partial for a later resume. */
void nsbox_ingest_abort (struct nsbox_ingest *ingest, bool keep_partial);

/* Small in-memory blobs (manifests, configs, indexes), verified against
 * `digest` when it is non-NULL; the computed digest is returned in
 * *digest_out when non-NULL (caller frees). */
int nsbox_store_put_blob (struct nsbox_store *store, const char *digest, const void *data,
                          size_t len, char **digest_out, struct nsbox_error **err);

/* index.json: records REF (normalised, e.g. docker.io/library/python:3.12-slim)
 * -> manifest digest (the image manifest, not an index) with its platform
 * ("linux/amd64"), under the store lock, written by temp file + rename. */
int nsbox_store_tag (struct nsbox_store *store, const char *ref, const char *manifest_digest,
                     const char *platform, struct nsbox_error **err);
/* Looks REF up in index.json: -ENOENT when absent. */
int nsbox_store_resolve (struct nsbox_store *store, const char *ref, char **manifest_digest,
                         struct nsbox_error **err);

/* The unpacked rootfs of an image manifest already in the store: verifies
 * config and diff_ids, applies the layers into tmp/ and renames the tree to
 * rootfs/<chainid>.<ver> when missing. Returns the path of its rootfs/
 * directory and the image config's Env (NULL-terminated, caller frees with
 * nsbox_strv_free) when env is non-NULL. */
int nsbox_store_unpack (struct nsbox_store *store, const char *manifest_digest, char **rootfs,
                        char ***env, struct nsbox_error **err);

/* Additions by the store implementation (compatible with the above). */

/* Warnings of the library (skipped device nodes, dropped xattrs, ...) go to
 * this callback; without one they are dropped. */
typedef void (*nsbox_store_log_fn) (void *data, const char *message);
void nsbox_store_set_log (struct nsbox_store *store, nsbox_store_log_fn log, void *data);

/* Removes REF from index.json (-ENOENT when absent); blobs stay until gc. */
int nsbox_store_untag (struct nsbox_store *store, const char *ref, struct nsbox_error **err);

struct nsbox_store_image
{
  char *ref;
  char *manifest_digest;
  char *platform; /* "" when unknown */
  char *rootfs;   /* path of the unpacked rootfs/ directory, or NULL */
};
/* The images of index.json; free with nsbox_store_images_free. */
int nsbox_store_list (struct nsbox_store *store, struct nsbox_store_image **images, size_t *count,
                      struct nsbox_error **err);
void nsbox_store_images_free (struct nsbox_store_image *images, size_t count);

struct nsbox_store_gc_stats
{
  size_t blobs_removed, trees_removed, ingest_removed, tmp_removed;
  uint64_t bytes_freed;
};
/* Removes blobs and trees not reachable from index.json, ingest files older
 * than 24 hours and unlocked tmp/ directories. Needs the store to itself:
 * -EBUSY while another process has it open. */
int nsbox_store_gc (struct nsbox_store *store, struct nsbox_store_gc_stats *stats,
                    struct nsbox_error **err);

/* Imports an offline image: "docker-archive:FILE[:REF]", "oci:DIR[:TAG]" or
 * "oci-archive:FILE[:TAG]". Every blob is verified; the image manifest is
 * tagged as *ref_out (the REF given, the archive's own tag, or for OCI
 * layouts "localhost/import/<name>:<tag>"). Both outputs optional. */
int nsbox_store_import (struct nsbox_store *store, const char *source, char **ref_out,
                        char **manifest_digest, struct nsbox_error **err);

/* Looks REF up trying it verbatim, then normalised (python ->
 * docker.io/library/python:latest). */
int nsbox_store_lookup (struct nsbox_store *store, const char *ref, char **manifest_digest,
                        struct nsbox_error **err);

#endif
