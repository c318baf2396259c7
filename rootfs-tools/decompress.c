/* Layer decompression and DiffID hashing; see decompress.h. */
#include "decompress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define IN_SIZE (128u << 10)
/* The worker decodes ahead of the reader by up to SLOTS chunks. */
#define SLOT_SIZE (256u << 10)
#define SLOTS 8

enum codec
{
  CODEC_PLAIN,
  CODEC_GZIP,
  CODEC_ZSTD,
};

struct rt_stream
{
  /* The decoder, used by the worker thread alone while it runs. */
  int fd;
  enum codec codec;
  unsigned char *in;
  size_t in_pos, in_len;
  bool in_eof, done;
  z_stream z;
  bool z_ready;
  ZSTD_DStream *zstd;
  size_t zstd_last; /* last ZSTD_decompressStream result: 0 = frame complete */
  uint64_t total, limit;
  char error[256];

  /* The DiffID, hashed by the reader as it takes each chunk (the decoder
   * has the longer share of the work). */
  struct rt_sha256 hash;

  /* The decoded chunks between the decoder and the reader: slots head to
   * head + count - 1 (mod SLOTS) are filled, the first of them is the
   * reader's while `holding`. status: 0 while decoding, 1 at the end of
   * the stream, -errno after a failure (error[] says what). All of it
   * under `lock` when threaded. */
  unsigned char *slot[SLOTS];
  size_t slot_len[SLOTS];
  unsigned head, count;
  bool holding;
  int status;
  bool threaded, stop;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t filled, emptied;
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

/* Sniffs the codec from the first bytes (read here, in the caller's
 * thread, so that a blob that cannot be read fails at once). */
static int
sniff (struct rt_stream *s, struct nsbox_error **err)
{
  while (s->in_len < 4 && !s->in_eof)
    {
      ssize_t n = read (s->fd, s->in + s->in_len, IN_SIZE - s->in_len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nsbox_error_sys (err, errno, "read layer blob");
      if (n == 0)
        s->in_eof = true;
      s->in_len += (size_t)n;
    }
  if (s->in_len >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b)
    {
      s->codec = CODEC_GZIP;
      if (inflateInit2 (&s->z, 16 + MAX_WBITS) != Z_OK)
        return nsbox_error_set (err, ENOMEM, "zlib: inflateInit2 failed");
      s->z_ready = true;
    }
  else if (s->in_len >= 4 && s->in[0] == 0x28 && s->in[1] == 0xb5 && s->in[2] == 0x2f
           && s->in[3] == 0xfd)
    {
      s->codec = CODEC_ZSTD;
      s->zstd = ZSTD_createDStream ();
      if (!s->zstd)
        return nsbox_error_set (err, ENOMEM, "zstd: cannot create a decompression stream");
      ZSTD_initDStream (s->zstd);
    }
  return 0;
}

static ssize_t
read_plain (struct rt_stream *s, unsigned char *out, size_t *produced)
{
  ssize_t n = fill (s);
  if (n <= 0)
    return n;
  size_t take = (size_t)n < SLOT_SIZE ? (size_t)n : SLOT_SIZE;
  memcpy (out, s->in + s->in_pos, take);
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
read_gzip (struct rt_stream *s, unsigned char *out, size_t *produced)
{
  s->z.next_out = out;
  s->z.avail_out = SLOT_SIZE;
  while (s->z.avail_out == SLOT_SIZE)
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
      else if (zr == Z_BUF_ERROR && n == 0 && s->z.avail_out == SLOT_SIZE)
        return fail (s, EBADMSG, "%s", "truncated gzip stream");
      else if (zr != Z_OK && zr != Z_BUF_ERROR)
        return fail (s, EBADMSG, "gzip: %s", s->z.msg ? s->z.msg : "invalid data");
    }
  *produced = SLOT_SIZE - s->z.avail_out;
  return *produced > 0 || !s->done;
}

static ssize_t
read_zstd (struct rt_stream *s, unsigned char *out_buf, size_t *produced)
{
  ZSTD_outBuffer out = { out_buf, SLOT_SIZE, 0 };
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

/* Decodes the next chunk into out, counting it; returns its length, 0 at
 * the end of the stream, -errno. */
static ssize_t
decode (struct rt_stream *s, unsigned char *out)
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
          r = read_gzip (s, out, &produced);
          break;
        case CODEC_ZSTD:
          r = read_zstd (s, out, &produced);
          break;
        case CODEC_PLAIN:
        default:
          r = read_plain (s, out, &produced);
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
          return fail (s, EFBIG,
                       "uncompressed layer exceeds the limit of %s bytes (NSBOX_MAX_LAYER_BYTES, "
                       "a quarter more for tar headers, and 64 MiB; set it to raise the limit)",
                       limit);
        }
      s->total += produced;
      return (ssize_t)produced;
    }
}

/* The worker: decodes into free slots until the end, a failure, or the
 * reader's stop. */
static void *
worker (void *data)
{
  struct rt_stream *s = data;
  for (;;)
    {
      pthread_mutex_lock (&s->lock);
      while (s->count == SLOTS && !s->stop)
        pthread_cond_wait (&s->emptied, &s->lock);
      bool stop = s->stop;
      unsigned idx = (s->head + s->count) % SLOTS;
      pthread_mutex_unlock (&s->lock);
      if (stop)
        return NULL;
      ssize_t n = decode (s, s->slot[idx]);
      pthread_mutex_lock (&s->lock);
      if (n > 0)
        {
          s->slot_len[idx] = (size_t)n;
          s->count++;
        }
      else
        s->status = n < 0 ? (int)n : 1;
      pthread_cond_signal (&s->filled);
      pthread_mutex_unlock (&s->lock);
      if (n <= 0)
        return NULL;
    }
}

/* Starts the worker with every signal blocked (signals are the caller's
 * threads' business). Without it the reader decodes in its own thread. */
static void
start_worker (struct rt_stream *s)
{
  if (pthread_mutex_init (&s->lock, NULL) != 0)
    return;
  if (pthread_cond_init (&s->filled, NULL) != 0)
    goto no_filled;
  if (pthread_cond_init (&s->emptied, NULL) != 0)
    goto no_emptied;
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  int r = pthread_create (&s->thread, NULL, worker, s);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (r == 0)
    {
      s->threaded = true;
      return;
    }
  pthread_cond_destroy (&s->emptied);
no_emptied:
  pthread_cond_destroy (&s->filled);
no_filled:
  pthread_mutex_destroy (&s->lock);
}

int
rt_stream_new (int fd, uint64_t limit, struct rt_stream **out, struct nsbox_error **err)
{
  struct rt_stream *s = calloc (1, sizeof *s);
  if (!s)
    return nsbox_error_oom (err);
  s->fd = fd;
  s->limit = limit;
  s->in = malloc (IN_SIZE);
  bool ok = s->in && rt_sha256_init (&s->hash) == 0;
  for (unsigned i = 0; ok && i < SLOTS; i++)
    ok = (s->slot[i] = malloc (SLOT_SIZE)) != NULL;
  if (!ok)
    {
      rt_stream_free (s);
      return nsbox_error_oom (err);
    }
  int ret = sniff (s, err);
  if (ret < 0)
    {
      rt_stream_free (s);
      return ret;
    }
  start_worker (s);
  *out = s;
  return 0;
}

static ssize_t
read_unthreaded (struct rt_stream *s, const void **buf)
{
  if (s->status != 0)
    return s->status < 0 ? s->status : 0;
  ssize_t n = decode (s, s->slot[0]);
  if (n <= 0)
    {
      s->status = n < 0 ? (int)n : 1;
      return n;
    }
  *buf = s->slot[0];
  return n;
}

static ssize_t
read_threaded (struct rt_stream *s, const void **buf)
{
  pthread_mutex_lock (&s->lock);
  if (s->holding)
    {
      s->head = (s->head + 1) % SLOTS;
      s->count--;
      s->holding = false;
      pthread_cond_signal (&s->emptied);
    }
  while (s->count == 0 && s->status == 0)
    pthread_cond_wait (&s->filled, &s->lock);
  ssize_t n;
  if (s->count > 0)
    {
      s->holding = true;
      *buf = s->slot[s->head];
      n = (ssize_t)s->slot_len[s->head];
    }
  else
    n = s->status < 0 ? s->status : 0;
  pthread_mutex_unlock (&s->lock);
  return n;
}

ssize_t
rt_stream_read (struct rt_stream *s, const void **buf)
{
  ssize_t n = s->threaded ? read_threaded (s, buf) : read_unthreaded (s, buf);
  if (n > 0)
    rt_sha256_update (&s->hash, *buf, (size_t)n);
  return n;
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
  if (s->threaded)
    {
      pthread_mutex_lock (&s->lock);
      s->stop = true;
      pthread_cond_signal (&s->emptied);
      pthread_mutex_unlock (&s->lock);
      pthread_join (s->thread, NULL);
      pthread_cond_destroy (&s->emptied);
      pthread_cond_destroy (&s->filled);
      pthread_mutex_destroy (&s->lock);
    }
  if (s->z_ready)
    inflateEnd (&s->z);
  if (s->zstd)
    ZSTD_freeDStream (s->zstd);
  rt_sha256_free (&s->hash);
  free (s->in);
  for (unsigned i = 0; i < SLOTS; i++)
    free (s->slot[i]);
  free (s);
}
