/* Internals of the image store shared by store.c, store-ingest.c,
 * layer*.c, unpack.c, import.c and gc.c. */
#ifndef NSBOX_STORE_PRIVATE_H
#define NSBOX_STORE_PRIVATE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "digest.h"
#include "error.h"
#include "store.h"
#include "util.h"

#define RT_DIGEST_LEN 71 /* "sha256:" + 64 hex */
#define RT_MAX_JSON_BYTES (4u << 20)
/* Bumped whenever the unpacker would produce a different tree. */
#define RT_UNPACK_VERSION "v1"

#define MEDIA_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MEDIA_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MEDIA_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MEDIA_OCI_LAYER "application/vnd.oci.image.layer.v1.tar"
#define MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MEDIA_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

/* Limits against decompression and archive bombs, each
 * from its environment variable (store.c: limit_vars, which has the
 * defaults and the accepted ranges; tests use small values). A value that
 * is not a whole number in range is an error, never a silent default.
 * "Bytes" are file data, extended attribute values and RT_INODE_CHARGE for
 * every other inode or link an entry makes. */
struct rt_limits
{
  uint64_t layer_bytes;      /* NSBOX_MAX_LAYER_BYTES: bytes per layer */
  uint64_t image_bytes;      /* NSBOX_MAX_IMAGE_BYTES: bytes per image */
  uint64_t layer_entries;    /* NSBOX_MAX_LAYER_ENTRIES: tar entries per layer */
  uint64_t image_inodes;     /* NSBOX_MAX_IMAGE_INODES: inodes and links created per
                              * image, implicit parent directories included; also
                              * the distinct paths the unpack remembers */
  uint64_t layers;           /* NSBOX_MAX_LAYERS: layers per image */
  uint64_t path_depth;       /* NSBOX_MAX_PATH_DEPTH: components per path */
  uint64_t min_free_percent; /* NSBOX_MIN_FREE_PERCENT: of the store filesystem's
                              * blocks and inodes, kept free while unpacking */
};

/* What a directory, symlink, FIFO or hardlink costs in bytes: one
 * filesystem block, what a directory or a long symlink takes on ext4 or
 * xfs (generous for the others, which take an inode or a name). */
#define RT_INODE_CHARGE 4096u

/* Reads every limit from the environment; -EINVAL naming the variable and
 * its value when one is not a whole number in its range. */
NSBOX_INTERNAL int rt_limits_from_env (struct rt_limits *limits, struct nsbox_error **err);

struct nsbox_store
{
  char *root;
  int root_fd;
  int lock_fd; /* locks/store.lock, held LOCK_SH while the store is open */
  struct rt_limits limits;
  bool force_resolve_fallback; /* NSBOX_RESOLVE_FALLBACK=1: test the walker */
  nsbox_store_log_fn log;
  void *log_data;
};

/* sha256 over a stream. */
struct rt_sha256
{
  struct nsbox_sha256 digest;
  bool failed; /* an update failed: the digest matches nothing */
};
NSBOX_INTERNAL int rt_sha256_init (struct rt_sha256 *h);
NSBOX_INTERNAL void rt_sha256_update (struct rt_sha256 *h, const void *data, size_t len);
/* Writes "sha256:<hex>" (RT_DIGEST_LEN + 1 bytes) and frees the context. */
NSBOX_INTERNAL void rt_sha256_final (struct rt_sha256 *h, char out[RT_DIGEST_LEN + 1]);
NSBOX_INTERNAL void rt_sha256_free (struct rt_sha256 *h);
NSBOX_INTERNAL int rt_sha256_buffer (const void *data, size_t len, char out[RT_DIGEST_LEN + 1]);

/* "blobs/sha256/<hex>" of a valid digest, below the store's root. */
NSBOX_INTERNAL void nsbox_store_blob_path (const char *digest, char out[96]);
/* 64 random bits (from the clock and pid when getrandom fails), for
 * names of temporary files. */
NSBOX_INTERNAL uint64_t nsbox_store_random_u64 (void);

NSBOX_INTERNAL void rt_store_warn (struct nsbox_store *store, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* A fresh, locked directory tmp/<random> (mode 0700). *lock_fd holds the
 * flock (on the directory itself); gc removes only unlocked ones. */
NSBOX_INTERNAL int rt_store_make_tmp (struct nsbox_store *store, char name[64], int *dir_fd,
                                      struct nsbox_error **err);

/* Streams data of unknown digest into the store (legacy docker-archive
 * layers): begin, write, then commit verifying against expected (NULL: any)
 * and returning the digest. */
NSBOX_INTERNAL int rt_ingest_begin_anon (struct nsbox_store *store, struct nsbox_ingest **out,
                                         struct nsbox_error **err);
NSBOX_INTERNAL int rt_ingest_commit_anon (struct nsbox_ingest *ingest, const char *expected,
                                          char digest[RT_DIGEST_LEN + 1], struct nsbox_error **err);

/* Parses a JSON blob from the store (at most RT_MAX_JSON_BYTES). */
NSBOX_INTERNAL int rt_store_read_json (struct nsbox_store *store, const char *digest, json_t **out,
                                       struct nsbox_error **err);
/* Parses index.json (an empty index when missing) into *out; *manifests
 * (when not NULL) is its "manifests" array, borrowed from *out. */
NSBOX_INTERNAL int rt_store_load_index (struct nsbox_store *store, json_t **out, json_t **manifests,
                                        struct nsbox_error **err);
/* Locks locks/<name> (created 0600) with flock `op`; returns the fd. */
NSBOX_INTERNAL int rt_store_lock (struct nsbox_store *store, const char *name, int op,
                                  struct nsbox_error **err);

/* -E2BIG when the manifest's layers array holds more than the limit of
 * layers per image; image names it in the message. */
NSBOX_INTERNAL int rt_check_layer_count (struct nsbox_store *store, json_t *layers,
                                         const char *image, struct nsbox_error **err);

/* Whether a layer descriptor's media type is one the unpack applies (OCI
 * and Docker layers, plain, gzip or zstd; no foreign layers). */
NSBOX_INTERNAL bool rt_layer_media_type_ok (const char *media);

/* ChainID of a list of DiffIDs (the OCI image spec's definition). */
NSBOX_INTERNAL int rt_chain_id (json_t *diff_ids, char out[RT_DIGEST_LEN + 1],
                                struct nsbox_error **err);

/* Reference normalisation used for lookups: "python" ->
 * "docker.io/library/python:latest". Returns NULL when ref is unusable. */
NSBOX_INTERNAL char *rt_normalize_ref (const char *ref);

#endif
