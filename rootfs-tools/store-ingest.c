/* The image store's ingest: blobs streamed into ingest/, verified, then
 * renamed into blobs/. See store.h. */
#include "store-private.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

struct nsbox_ingest
{
  struct nsbox_store *store;
  char digest[RT_DIGEST_LEN + 1]; /* "" for anonymous ingests */
  char name[96];                  /* below ingest/ */
  int64_t expected_size;
  int fd;
  int lock_fd;
  uint64_t offset;
  struct rt_sha256 hash;
};

/* ingest ----------------------------------------------------------------- */

static void
ingest_free (struct nsbox_ingest *ingest)
{
  if (ingest->fd >= 0)
    close (ingest->fd);
  if (ingest->lock_fd >= 0)
    close (ingest->lock_fd);
  rt_sha256_free (&ingest->hash);
  free (ingest);
}

/* Re-hashes the bytes already in the partial file, keeping them. */
static int
ingest_rehash (struct nsbox_ingest *ingest, struct nsbox_error **err)
{
  char buf[1 << 16];
  ingest->offset = 0;
  if (lseek (ingest->fd, 0, SEEK_SET) < 0)
    return nsbox_error_sys (err, errno, "seek '%s'", ingest->name);
  for (;;)
    {
      ssize_t n = read (ingest->fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nsbox_error_sys (err, errno, "read '%s'", ingest->name);
      if (n == 0)
        break;
      rt_sha256_update (&ingest->hash, buf, (size_t)n);
      ingest->offset += (uint64_t)n;
    }
  return 0;
}

static int
ingest_new (struct nsbox_store *store, const char *digest, int64_t expected_size,
            struct nsbox_ingest **out, struct nsbox_error **err)
{
  struct nsbox_ingest *ingest = calloc (1, sizeof *ingest);
  if (!ingest)
    return nsbox_error_oom (err);
  ingest->store = store;
  ingest->fd = ingest->lock_fd = -1;
  ingest->expected_size = expected_size;
  if (digest)
    snprintf (ingest->digest, sizeof ingest->digest, "%s", digest);
  if (rt_sha256_init (&ingest->hash) < 0)
    {
      free (ingest);
      return nsbox_error_oom (err);
    }
  *out = ingest;
  return 0;
}

int
nsbox_store_ingest_begin (struct nsbox_store *store, const char *digest, int64_t expected_size,
                          struct nsbox_ingest **out, bool *already, uint64_t *resume_offset,
                          struct nsbox_error **err)
{
  if (!nsbox_digest_valid (digest))
    return nsbox_error_set (err, EINVAL, "invalid digest '%s'", digest ? digest : "");
  char lock_name[96];
  snprintf (lock_name, sizeof lock_name, "%s.lock", digest + 7);
  int lock_fd = rt_store_lock (store, lock_name, LOCK_EX, err);
  if (lock_fd < 0)
    return lock_fd;
  if (nsbox_store_has_blob (store, digest))
    {
      close (lock_fd);
      *out = NULL;
      *already = true;
      if (resume_offset)
        *resume_offset = 0;
      return 0;
    }
  struct nsbox_ingest *ingest = NULL;
  int ret = ingest_new (store, digest, expected_size, &ingest, err);
  if (ret < 0)
    {
      close (lock_fd);
      return ret;
    }
  ingest->lock_fd = lock_fd;
  snprintf (ingest->name, sizeof ingest->name, "ingest/%s.partial", digest + 7);
  ingest->fd
      = openat (store->root_fd, ingest->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (ingest->fd < 0)
    {
      ret = nsbox_error_sys (err, errno, "open '%s/%s'", store->root, ingest->name);
      ingest_free (ingest);
      return ret;
    }
  struct stat st;
  if (fstat (ingest->fd, &st) == 0 && expected_size >= 0 && st.st_size > expected_size)
    {
      if (ftruncate (ingest->fd, 0) < 0)
        {
          ret = nsbox_error_sys (err, errno, "truncate '%s'", ingest->name);
          ingest_free (ingest);
          return ret;
        }
    }
  ret = ingest_rehash (ingest, err);
  if (ret < 0)
    {
      ingest_free (ingest);
      return ret;
    }
  *out = ingest;
  *already = false;
  if (resume_offset)
    *resume_offset = ingest->offset;
  return 0;
}

int
rt_ingest_begin_anon (struct nsbox_store *store, struct nsbox_ingest **out,
                      struct nsbox_error **err)
{
  struct nsbox_ingest *ingest = NULL;
  int ret = ingest_new (store, NULL, -1, &ingest, err);
  if (ret < 0)
    return ret;
  snprintf (ingest->name, sizeof ingest->name, "ingest/anon-%016" PRIx64 ".partial",
            nsbox_store_random_u64 ());
  ingest->fd = openat (store->root_fd, ingest->name,
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (ingest->fd < 0)
    {
      ret = nsbox_error_sys (err, errno, "create '%s/%s'", store->root, ingest->name);
      ingest_free (ingest);
      return ret;
    }
  *out = ingest;
  return 0;
}

int
nsbox_ingest_restart (struct nsbox_ingest *ingest, struct nsbox_error **err)
{
  if (ftruncate (ingest->fd, 0) < 0 || lseek (ingest->fd, 0, SEEK_SET) < 0)
    return nsbox_error_sys (err, errno, "truncate '%s'", ingest->name);
  rt_sha256_free (&ingest->hash);
  if (rt_sha256_init (&ingest->hash) < 0)
    return nsbox_error_oom (err);
  ingest->offset = 0;
  return 0;
}

int
nsbox_ingest_write (struct nsbox_ingest *ingest, const void *buf, size_t len,
                    struct nsbox_error **err)
{
  if (ingest->expected_size >= 0 && ingest->offset + len > (uint64_t)ingest->expected_size)
    return nsbox_error_set (err, EBADMSG,
                            "blob '%s' is larger than its descriptor's %" PRId64 " bytes",
                            ingest->digest, ingest->expected_size);
  int r = nsbox_write_all (ingest->fd, buf, len);
  if (r < 0)
    return nsbox_error_sys (err, -r, "write '%s/%s'", ingest->store->root, ingest->name);
  rt_sha256_update (&ingest->hash, buf, len);
  ingest->offset += len;
  return 0;
}

uint64_t
nsbox_ingest_offset (const struct nsbox_ingest *ingest)
{
  return ingest->offset;
}

/* fsync, 0444, rename into blobs/ under the computed digest. */
static int
ingest_finish (struct nsbox_ingest *ingest, const char *computed, struct nsbox_error **err)
{
  struct nsbox_store *store = ingest->store;
  char path[96];
  nsbox_store_blob_path (computed, path);
  if (fsync (ingest->fd) < 0)
    return nsbox_error_sys (err, errno, "fsync '%s/%s'", store->root, ingest->name);
  if (fchmod (ingest->fd, 0444) < 0)
    return nsbox_error_sys (err, errno, "chmod '%s/%s'", store->root, ingest->name);
  if (renameat (store->root_fd, ingest->name, store->root_fd, path) < 0)
    return nsbox_error_sys (err, errno, "rename '%s' into '%s/%s'", ingest->name, store->root,
                            path);
  int dir_fd = openat (store->root_fd, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0)
    {
      fsync (dir_fd);
      close (dir_fd);
    }
  return 0;
}

int
nsbox_ingest_commit (struct nsbox_ingest *ingest, struct nsbox_error **err)
{
  int ret;
  char computed[RT_DIGEST_LEN + 1];
  if (ingest->expected_size >= 0 && ingest->offset != (uint64_t)ingest->expected_size)
    {
      ret = nsbox_error_set (err, EBADMSG, "blob '%s': size %" PRIu64 " instead of %" PRId64,
                             ingest->digest, ingest->offset, ingest->expected_size);
      goto discard;
    }
  rt_sha256_final (&ingest->hash, computed);
  if (strcmp (computed, ingest->digest) != 0)
    {
      ret = nsbox_error_set (err, EBADMSG, "blob '%s': digest mismatch (got '%s')", ingest->digest,
                             computed);
      goto discard;
    }
  ret = ingest_finish (ingest, computed, err);
  if (ret < 0)
    goto discard;
  ingest_free (ingest);
  return 0;
discard:
  unlinkat (ingest->store->root_fd, ingest->name, 0);
  ingest_free (ingest);
  return ret;
}

int
rt_ingest_commit_anon (struct nsbox_ingest *ingest, const char *expected,
                       char digest[RT_DIGEST_LEN + 1], struct nsbox_error **err)
{
  struct nsbox_store *store = ingest->store;
  char computed[RT_DIGEST_LEN + 1];
  int ret = 0;
  rt_sha256_final (&ingest->hash, computed);
  if (expected && strcmp (expected, computed) != 0)
    {
      ret = nsbox_error_set (err, EBADMSG, "blob '%s': digest mismatch (got '%s')", expected,
                             computed);
      goto out;
    }
  char lock_name[96];
  snprintf (lock_name, sizeof lock_name, "%s.lock", computed + 7);
  int lock_fd = rt_store_lock (store, lock_name, LOCK_EX, err);
  if (lock_fd < 0)
    {
      ret = lock_fd;
      goto out;
    }
  if (!nsbox_store_has_blob (store, computed))
    ret = ingest_finish (ingest, computed, err);
  close (lock_fd);
  if (ret == 0)
    memcpy (digest, computed, RT_DIGEST_LEN + 1);
out:
  unlinkat (store->root_fd, ingest->name, 0);
  ingest_free (ingest);
  return ret;
}

void
nsbox_ingest_abort (struct nsbox_ingest *ingest, bool keep_partial)
{
  if (!ingest)
    return;
  if (!keep_partial || !ingest->digest[0])
    unlinkat (ingest->store->root_fd, ingest->name, 0);
  else if (ingest->fd >= 0)
    fsync (ingest->fd);
  ingest_free (ingest);
}

int
nsbox_store_put_blob (struct nsbox_store *store, const char *digest, const void *data, size_t len,
                      char **digest_out, struct nsbox_error **err)
{
  char computed[RT_DIGEST_LEN + 1];
  if (rt_sha256_buffer (data, len, computed) < 0)
    return nsbox_error_oom (err);
  if (digest && strcmp (digest, computed) != 0)
    return nsbox_error_set (err, EBADMSG, "blob '%s': digest mismatch (got '%s')", digest,
                            computed);
  struct nsbox_ingest *ingest = NULL;
  bool already = false;
  int ret = nsbox_store_ingest_begin (store, computed, (int64_t)len, &ingest, &already, NULL, err);
  if (ret < 0)
    return ret;
  if (!already)
    {
      ret = nsbox_ingest_restart (ingest, err);
      if (ret >= 0)
        ret = nsbox_ingest_write (ingest, data, len, err);
      if (ret < 0)
        {
          nsbox_ingest_abort (ingest, false);
          return ret;
        }
      ret = nsbox_ingest_commit (ingest, err);
      if (ret < 0)
        return ret;
    }
  if (digest_out)
    {
      *digest_out = strdup (computed);
      if (!*digest_out)
        return nsbox_error_oom (err);
    }
  return 0;
}
