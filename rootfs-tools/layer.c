/* The layer applier: tar entries from libarchive (reader only) applied by
 * our own code to a private tree, every path resolved inside it. See
 * layer.h; this file walks the tar stream, layer-entry.c applies each
 * entry, layer-paths.c resolves and counts its paths; the finishing step
 * (ownership.tsv, added-dirs) is finish.c. */
#include "layer-apply-private.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "decompress.h"
#include "pathtab.h"
#include "space.h"

/* Layers ----------------------------------------------------------------- */

static la_ssize_t
read_callback (struct archive *ar, void *data, const void **buf)
{
  struct layer *l = data;
  /* Keep the last 512 bytes before the new chunk. */
  if (l->chunk_len >= sizeof l->tail)
    {
      memcpy (l->tail, l->chunk + l->chunk_len - sizeof l->tail, sizeof l->tail);
      l->tail_len = sizeof l->tail;
    }
  else if (l->chunk_len > 0)
    {
      size_t keep = sizeof l->tail - l->chunk_len;
      if (keep > l->tail_len)
        keep = l->tail_len;
      memmove (l->tail, l->tail + l->tail_len - keep, keep);
      memcpy (l->tail + keep, l->chunk, l->chunk_len);
      l->tail_len = keep + l->chunk_len;
    }
  l->chunk_start += l->chunk_len;
  l->chunk_len = 0;
  ssize_t n = rt_stream_read (l->stream, buf);
  if (n < 0)
    {
      archive_set_error (ar, (int)-n, "%s", rt_stream_error (l->stream));
      return -1;
    }
  l->chunk = *buf;
  l->chunk_len = (size_t)n;
  return n;
}

int
rt_unpack_new (struct nsbox_store *store, int root_fd, struct rt_unpack **out,
               struct nsbox_error **err)
{
  struct rt_unpack *u = calloc (1, sizeof *u);
  if (!u)
    return nsbox_error_oom (err);
  u->store = store;
  u->root_fd = root_fd;
  u->fallback = store->force_resolve_fallback;
  u->copy_buf = malloc (COPY_CHUNK);
  if (!u->copy_buf || rt_pathtab_init (&u->paths) < 0)
    {
      free (u->copy_buf);
      free (u);
      return nsbox_error_oom (err);
    }
  rt_space_init (&u->space, root_fd, (unsigned)store->limits.min_free_percent);
  *out = u;
  return 0;
}

void
rt_unpack_free (struct rt_unpack *u)
{
  if (!u)
    return;
  rt_pathtab_free (&u->paths);
  free (u->metas);
  free (u->copy_buf);
  free (u);
}

static bool
byte_at (const struct layer *l, uint64_t offset, unsigned char *out)
{
  if (offset >= l->chunk_start && offset - l->chunk_start < l->chunk_len)
    {
      *out = l->chunk[offset - l->chunk_start];
      return true;
    }
  if (offset < l->chunk_start && l->chunk_start - offset <= l->tail_len)
    {
      *out = l->tail[l->tail_len - (l->chunk_start - offset)];
      return true;
    }
  return false;
}

/* The header block of the entry just read ends where its data starts; its
 * typeflag must be a type we know (sparse 'S', GNU 'D', 'M', 'V' and
 * unknown letters are errors, not regular files). */
static int
check_typeflag (struct layer *l, const char *name, struct nsbox_error **err)
{
  int64_t data_start = archive_filter_bytes (l->ar, 0);
  if (data_start < 512)
    return nsbox_error_set (err, EIO, "%s: '%s': tar header not found in the stream", l->label,
                            name);
  uint64_t header = (uint64_t)data_start - 512;
  unsigned char type;
  if (!byte_at (l, header + 156, &type))
    return nsbox_error_set (err, EIO, "%s: '%s': tar header not found in the stream", l->label,
                            name);
  if (type == '\0' || (type >= '0' && type <= '7'))
    return 0;
  return nsbox_error_set (err, EBADMSG, "%s: '%s': unsupported tar entry type '%c'", l->label, name,
                          type >= 0x20 && type < 0x7f ? type : '?');
}

static int
apply_entries (struct layer *l, struct nsbox_error **err)
{
  struct rt_limits *lim = &l->u->store->limits;
  for (;;)
    {
      struct archive_entry *entry = NULL;
      int r = archive_read_next_header (l->ar, &entry);
      if (r == ARCHIVE_EOF)
        return 0;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        {
          int code = archive_errno (l->ar);
          if (code != EFBIG && code != EIO && code != ENOMEM)
            code = EBADMSG;
          return nsbox_error_set (err, code, "%s: invalid tar stream: %s", l->label,
                                  archive_error_string (l->ar));
        }
      if (++l->entries > lim->layer_entries)
        return nsbox_error_set (err, E2BIG,
                                "%s: more than %" PRIu64
                                " entries, the limit per layer (set NSBOX_MAX_LAYER_ENTRIES to "
                                "raise it)",
                                l->label, lim->layer_entries);
      int ret = check_typeflag (l, archive_entry_pathname (entry) ?: "?", err);
      if (ret < 0)
        return ret;
      ret = nsbox_layer_apply_entry (l, entry, err);
      if (ret < 0)
        return ret;
    }
}

/* Applies every entry and waits for the queued files. A queued file that
 * failed came before whatever failed here since: its error is the one. */
static int
read_entries (struct layer *l, struct nsbox_error **err)
{
  struct nsbox_error *entry_err = NULL;
  int ret = apply_entries (l, &entry_err);
  int drained = nsbox_layer_queue_drain (l, err);
  if (drained < 0)
    {
      nsbox_error_free (entry_err);
      return drained;
    }
  if (err && !*err)
    *err = entry_err;
  else
    nsbox_error_free (entry_err);
  return ret;
}

int
rt_unpack_layer (struct rt_unpack *u, int blob_fd, const char *digest, const char *diff_id,
                 unsigned index, struct nsbox_error **err)
{
  struct layer l = { .u = u, .index = index, .mark = index + 1, .parent_fd = -1 };
  if (!(l.label = xasprintf ("layer %u (%s)", index, digest)))
    return nsbox_error_oom (err);
  struct rt_limits *lim = &u->store->limits;
  /* Tar headers and padding on top of the file data. */
  uint64_t stream_limit = lim->layer_bytes + lim->layer_bytes / 4 + (64u << 20);
  int ret = rt_stream_new (blob_fd, stream_limit, &l.stream, err);
  if (ret < 0)
    {
      nsbox_error_prefix (err, "%s", l.label);
      goto out;
    }
  l.ar = archive_read_new ();
  if (!l.ar)
    {
      ret = nsbox_error_oom (err);
      goto out;
    }
  archive_read_support_format_tar (l.ar);
  if (archive_read_open (l.ar, &l, NULL, read_callback, NULL) != ARCHIVE_OK)
    {
      ret = nsbox_error_set (err, EBADMSG, "%s: %s", l.label, archive_error_string (l.ar));
      goto out;
    }
  ret = read_entries (&l, err);
  if (ret < 0)
    goto out;
  char computed[RT_DIGEST_LEN + 1];
  ret = rt_stream_finish (l.stream, computed);
  if (ret < 0)
    {
      ret = nsbox_error_set (err, -ret, "%s: %s", l.label, rt_stream_error (l.stream));
      goto out;
    }
  if (strcmp (computed, diff_id) != 0)
    ret = nsbox_error_set (err, EBADMSG,
                           "%s: DiffID mismatch: the config says '%s', the content is '%s'",
                           l.label, diff_id, computed);
out:
  rt_file_queue_stop (&l.files);
  rt_strmap_clear (&l.queued_names, NULL);
  nsbox_layer_forget_parent (&l);
  if (l.ar)
    archive_read_free (l.ar);
  rt_stream_free (l.stream);
  free (l.mark_parent);
  free (l.label);
  return ret;
}
