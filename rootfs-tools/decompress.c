/* Layer decompression and DiffID hashing; see decompress.h. */
#include "decompress.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define IN_SIZE (128u << 10)
#define OUT_SIZE (256u << 10)

enum codec
{
  CODEC_PLAIN,
  CODEC_GZIP,
  CODEC_ZSTD,
};

struct rt_stream
{
  int fd;
  enum codec codec;
  unsigned char *in, *out;
  size_t in_pos, in_len;
  bool in_eof, done;
  z_stream z;
  bool z_ready;
  ZSTD_DStream *zstd;
  size_t zstd_last; /* last ZSTD_decompressStream result: 0 = frame complete */
  struct rt_sha256 hash;
  uint64_t total, limit;
  char error[256];
};

static ssize_t __attribute__ ((format (printf, 3, 4)))
fail (struct rt_stream *s, int code, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (s->error, sizeof s->error, fmt, ap);
  va_end (ap);
  return -code;
}

/* Makes input available; returns bytes buffered, 0 at EOF, -errno. */
static ssize_t
fill (struct rt_stream *s)
{
  if (s->in_pos < s->in_len)
    return (ssize_t)(s->in_len - s->in_pos);
  if (s->in_eof)
    return 0;
  for (;;)
    {
      ssize_t n = read (s->fd, s->in, IN_SIZE);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return fail (s, errno, "read layer blob: %s", strerror (errno));
      s->in_pos = 0;
      s->in_len = (size_t)n;
      if (n == 0)
        s->in_eof = true;
      return n;
    }
}

int
rt_stream_new (int fd, uint64_t limit, struct rt_stream **out, struct nsbox_error **err)
{
  struct rt_stream *s = calloc (1, sizeof *s);
  if (!s)
    return nsbox_error_set (err, ENOMEM, "out of memory");
  s->fd = fd;
  s->limit = limit;
  s->in = malloc (IN_SIZE);
  s->out = malloc (OUT_SIZE);
  if (!s->in || !s->out || rt_sha256_init (&s->hash) < 0)
    {
      rt_stream_free (s);
      return nsbox_error_set (err, ENOMEM, "out of memory");
    }
  /* Sniff: gather up to 4 bytes (fill may return fewer). */
  while (s->in_len < 4 && !s->in_eof)
    {
      ssize_t n = read (fd, s->in + s->in_len, IN_SIZE - s->in_len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int saved = errno;
          rt_stream_free (s);
          return nsbox_error_sys (err, saved, "read layer blob");
        }
      if (n == 0)
        s->in_eof = true;
      s->in_len += (size_t)n;
    }
  if (s->in_len >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b)
    {
      s->codec = CODEC_GZIP;
      if (inflateInit2 (&s->z, 16 + MAX_WBITS) != Z_OK)
        {
          rt_stream_free (s);
          return nsbox_error_set (err, ENOMEM, "zlib: inflateInit2 failed");
        }
      s->z_ready = true;
    }
  else if (s->in_len >= 4 && s->in[0] == 0x28 && s->in[1] == 0xb5 && s->in[2] == 0x2f
           && s->in[3] == 0xfd)
    {
      s->codec = CODEC_ZSTD;
      s->zstd = ZSTD_createDStream ();
      if (!s->zstd)
        {
          rt_stream_free (s);
          return nsbox_error_set (err, ENOMEM, "zstd: cannot create a decompression stream");
        }
      ZSTD_initDStream (s->zstd);
    }
  *out = s;
  return 0;
}

static ssize_t
read_plain (struct rt_stream *s, size_t *produced)
{
  ssize_t n = fill (s);
  if (n <= 0)
    return n;
  size_t take = (size_t)n < OUT_SIZE ? (size_t)n : OUT_SIZE;
  memcpy (s->out, s->in + s->in_pos, take);
  s->in_pos += take;
  *produced = take;
  return 1;
}

/* Buffers at least `want` bytes when the file has them; returns how many
 * are buffered. */
static ssize_t
ensure (struct rt_stream *s, size_t want)
{
  size_t have = s->in_len - s->in_pos;
  if (have >= want || s->in_eof)
    return (ssize_t)have;
  memmove (s->in, s->in + s->in_pos, have);
  s->in_pos = 0;
  s->in_len = have;
  while (s->in_len < want && !s->in_eof)
    {
      ssize_t n = read (s->fd, s->in + s->in_len, IN_SIZE - s->in_len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return fail (s, errno, "read layer blob: %s", strerror (errno));
      if (n == 0)
        s->in_eof = true;
      s->in_len += (size_t)n;
    }
  return (ssize_t)s->in_len;
}

static ssize_t
read_gzip (struct rt_stream *s, size_t *produced)
{
  s->z.next_out = s->out;
  s->z.avail_out = OUT_SIZE;
  while (s->z.avail_out == OUT_SIZE)
    {
      ssize_t n = fill (s);
      if (n < 0)
        return n;
      s->z.next_in = s->in + s->in_pos;
      s->z.avail_in = (uInt)n;
      int zr = inflate (&s->z, Z_NO_FLUSH);
      s->in_pos += (size_t)n - s->z.avail_in;
      if (zr == Z_STREAM_END)
        {
          /* Another member follows, or trailing bytes we ignore. */
          n = ensure (s, 2);
          if (n < 0)
            return n;
          if (n >= 2 && s->in[s->in_pos] == 0x1f && s->in[s->in_pos + 1] == 0x8b)
            inflateReset (&s->z);
          else
            {
              s->done = true;
              break;
            }
        }
      else if (zr == Z_BUF_ERROR && n == 0 && s->z.avail_out == OUT_SIZE)
        return fail (s, EBADMSG, "%s", "truncated gzip stream");
      else if (zr != Z_OK && zr != Z_BUF_ERROR)
        return fail (s, EBADMSG, "gzip: %s", s->z.msg ? s->z.msg : "invalid data");
    }
  *produced = OUT_SIZE - s->z.avail_out;
  return *produced > 0 || !s->done;
}

static ssize_t
read_zstd (struct rt_stream *s, size_t *produced)
{
  ZSTD_outBuffer out = { s->out, OUT_SIZE, 0 };
  for (;;)
    {
      ssize_t n = fill (s);
      if (n < 0)
        return n;
      if (n == 0 && s->zstd_last == 0)
        {
          s->done = true;
          break;
        }
      ZSTD_inBuffer in = { s->in + s->in_pos, (size_t)n, 0 };
      size_t r = ZSTD_decompressStream (s->zstd, &out, &in);
      s->in_pos += in.pos;
      if (ZSTD_isError (r))
        return fail (s, EBADMSG, "zstd: %s", ZSTD_getErrorName (r));
      s->zstd_last = r;
      if (out.pos > 0)
        break;
      if (n == 0)
        return fail (s, EBADMSG, "%s", "truncated zstd stream");
    }
  *produced = out.pos;
  return out.pos > 0;
}

ssize_t
rt_stream_read (struct rt_stream *s, const void **buf)
{
  for (;;)
    {
      if (s->done)
        return 0;
      size_t produced = 0;
      ssize_t r;
      switch (s->codec)
        {
        case CODEC_GZIP:
          r = read_gzip (s, &produced);
          break;
        case CODEC_ZSTD:
          r = read_zstd (s, &produced);
          break;
        case CODEC_PLAIN:
        default:
          r = read_plain (s, &produced);
          if (r == 0)
            s->done = true;
          break;
        }
      if (r < 0)
        return r;
      if (produced == 0)
        continue;
      if (s->total + produced > s->limit)
        {
          char limit[32];
          snprintf (limit, sizeof limit, "%llu", (unsigned long long)s->limit);
          return fail (s, EFBIG, "uncompressed layer exceeds the limit of %s bytes", limit);
        }
      s->total += produced;
      rt_sha256_update (&s->hash, s->out, produced);
      *buf = s->out;
      return (ssize_t)produced;
    }
}

const char *
rt_stream_error (const struct rt_stream *s)
{
  return s->error[0] ? s->error : "read error";
}

const char *
rt_stream_codec (const struct rt_stream *s)
{
  switch (s->codec)
    {
    case CODEC_GZIP:
      return "gzip";
    case CODEC_ZSTD:
      return "zstd";
    case CODEC_PLAIN:
    default:
      return "plain";
    }
}

int
rt_stream_finish (struct rt_stream *s, char digest[RT_DIGEST_LEN + 1])
{
  const void *buf;
  ssize_t n;
  while ((n = rt_stream_read (s, &buf)) > 0)
    ;
  if (n < 0)
    return (int)n;
  rt_sha256_final (&s->hash, digest);
  return 0;
}

uint64_t
rt_stream_total (const struct rt_stream *s)
{
  return s->total;
}

void
rt_stream_free (struct rt_stream *s)
{
  if (!s)
    return;
  if (s->z_ready)
    inflateEnd (&s->z);
  if (s->zstd)
    ZSTD_freeDStream (s->zstd);
  rt_sha256_free (&s->hash);
  free (s->in);
  free (s->out);
  free (s);
}
