/* Head-only and head-and-tail capture of one output stream (capture.h). */
#include "capture.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = {
  [NSBOX_CAPTURE_HEAD_TAIL] = "head-tail",
  [NSBOX_CAPTURE_HEAD] = "head",
};

int
nsbox_capture_mode_parse (const char *text, enum nsbox_capture_mode *mode)
{
  for (size_t i = 0; i < ARRAY_SIZE (mode_names); i++)
    if (strcmp (text, mode_names[i]) == 0)
      {
        *mode = (enum nsbox_capture_mode)i;
        return 0;
      }
  return -EINVAL;
}

const char *
nsbox_capture_mode_name (enum nsbox_capture_mode mode)
{
  return (unsigned)mode < ARRAY_SIZE (mode_names) ? mode_names[mode] : "unknown";
}

void
nsbox_capture_init (struct nsbox_capture *c, enum nsbox_capture_mode mode, uint64_t cap)
{
  /* The configuration allows at most 1g; this only keeps the sums below
   * from overflowing. */
  size_t bounded = cap > SIZE_MAX / 4 ? SIZE_MAX / 4 : (size_t)cap;
  memset (c, 0, sizeof *c);
  c->mode = mode;
  c->tail_cap = mode == NSBOX_CAPTURE_HEAD_TAIL ? bounded / 2 : 0;
  c->head_cap = bounded - c->tail_cap;
}

/* Moves the buffer to a new one of `want` bytes. Not realloc: the old copy
 * is wiped before it is freed (see nsbox_result_free). */
static int
regrow (struct nsbox_capture *c, size_t want)
{
  char *grown = malloc (want);
  if (!grown)
    return -ENOMEM;
  if (c->buf)
    {
      memcpy (grown, c->buf, c->head_len);
      explicit_bzero (c->buf, c->alloc);
      free (c->buf);
    }
  c->buf = grown;
  c->alloc = want;
  return 0;
}

static int
reserve_head (struct nsbox_capture *c, size_t need)
{
  if (need <= c->alloc)
    return 0;
  size_t want = c->alloc ? c->alloc * 2 : 16384;
  while (want < need)
    want *= 2;
  return regrow (c, want > c->head_cap ? c->head_cap : want);
}

static char *
ring (const struct nsbox_capture *c)
{
  return c->buf + c->head_cap + NSBOX_CAPTURE_MARKER_MAX;
}

/* Keeps the last tail_cap bytes seen after the head, overwriting the
 * oldest: the ring's memory is fixed once the head is full. */
static int
ring_add (struct nsbox_capture *c, const char *data, size_t n)
{
  size_t full = c->head_cap + NSBOX_CAPTURE_MARKER_MAX + c->tail_cap;
  if (c->alloc < full && regrow (c, full) < 0)
    return -ENOMEM;
  char *r = ring (c);
  if (n >= c->tail_cap)
    {
      memcpy (r, data + (n - c->tail_cap), c->tail_cap);
      c->ring_next = 0;
      c->ring_len = c->tail_cap;
      return 0;
    }
  size_t first = c->tail_cap - c->ring_next;
  if (first > n)
    first = n;
  memcpy (r + c->ring_next, data, first);
  memcpy (r, data + first, n - first);
  c->ring_next = (c->ring_next + n) % c->tail_cap;
  c->ring_len = c->ring_len + n > c->tail_cap ? c->tail_cap : c->ring_len + n;
  return 0;
}

void
nsbox_capture_observe (struct nsbox_capture *c,
                       void (*observe) (void *data, int stream, const char *bytes, size_t len),
                       void *data, int stream)
{
  c->observe = observe;
  c->observe_data = data;
  c->stream = stream;
}

int
nsbox_capture_add (struct nsbox_capture *c, const char *data, size_t n)
{
  uint64_t cap = (uint64_t)c->head_cap + c->tail_cap;
  if (c->observe && c->total < cap && n > 0)
    c->observe (c->observe_data, c->stream, data,
                cap - c->total < n ? (size_t)(cap - c->total) : n);
  c->total += n;
  size_t take = c->head_cap - c->head_len;
  if (take > n)
    take = n;
  if (take > 0)
    {
      if (reserve_head (c, c->head_len + take) < 0)
        return -ENOMEM;
      memcpy (c->buf + c->head_len, data, take);
      c->head_len += take;
      data += take;
      n -= take;
    }
  if (n == 0 || c->tail_cap == 0)
    return 0;
  return ring_add (c, data, n);
}

static void
reverse (char *s, size_t len)
{
  for (size_t i = 0, j = len; i + 1 < j; i++, j--)
    {
      char t = s[i];
      s[i] = s[j - 1];
      s[j - 1] = t;
    }
}

/* The bytes at the end of s that begin a multi-byte UTF-8 character and
 * lack its last bytes: what cutting the stream there split. */
static size_t
split_character_at_end (const char *s, size_t len)
{
  for (size_t k = 1; k <= 3 && k <= len; k++)
    {
      unsigned char b = (unsigned char)s[len - k];
      if (b < 0x80)
        return 0;
      if (b >= 0xc2 && b <= 0xf4)
        {
          size_t need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
          return need > k ? k : 0;
        }
      if (b >= 0xc0)
        return 0; /* not UTF-8 at all: nothing to keep whole */
    }
  return 0;
}

/* Continuation bytes at the start: the rest of a character whose first
 * bytes were omitted. */
static size_t
split_character_at_start (const char *s, size_t len)
{
  size_t n = 0;
  while (n < 3 && n < len && ((unsigned char)s[n] & 0xc0) == 0x80)
    n++;
  return n;
}

/* head, marker, tail; the ring (if any) is full here: more than the cap
 * came. */
static void
join_head_and_tail (struct nsbox_capture *c, struct nsbox_captured *out)
{
  char *r = c->tail_cap > 0 ? ring (c) : NULL;
  size_t skip = 0, tail_len = 0;
  if (r)
    {
      reverse (r, c->ring_next);
      reverse (r + c->ring_next, c->ring_len - c->ring_next);
      reverse (r, c->ring_len);
      skip = split_character_at_start (r, c->ring_len);
      tail_len = c->ring_len - skip;
    }
  size_t head_len = c->head_len - split_character_at_end (c->buf, c->head_len);
  uint64_t omitted = c->total - head_len - tail_len;
  char marker[NSBOX_CAPTURE_MARKER_MAX];
  bool newline_first = head_len > 0 && c->buf[head_len - 1] != '\n';
  int marker_len = snprintf (marker, sizeof marker, "%s[nsbox: %" PRIu64 " bytes omitted]\n",
                             newline_first ? "\n" : "", omitted);
  memcpy (c->buf + head_len, marker, (size_t)marker_len);
  if (r)
    memmove (c->buf + head_len + (size_t)marker_len, r + skip, tail_len);
  out->len = head_len + (size_t)marker_len + tail_len;
  out->omitted = omitted;
}

void
nsbox_capture_finish (struct nsbox_capture *c, struct nsbox_captured *out)
{
  uint64_t cap = (uint64_t)c->head_cap + c->tail_cap;
  *out = (struct nsbox_captured){ .truncated = c->total > cap };
  if (!out->truncated)
    {
      /* The ring never wrapped: its bytes follow the head in order. */
      if (c->ring_len > 0)
        memmove (c->buf + c->head_len, ring (c), c->ring_len);
      out->len = c->head_len + c->ring_len;
    }
  else if (c->mode == NSBOX_CAPTURE_HEAD)
    {
      out->len = c->head_len;
      out->omitted = c->total - c->head_len;
    }
  else if (c->tail_cap > 0 || regrow (c, c->head_len + NSBOX_CAPTURE_MARKER_MAX) == 0)
    join_head_and_tail (c, out);
  else
    {
      /* No room for the marker: the head alone, still counted. */
      out->len = c->head_len;
      out->omitted = c->total - c->head_len;
    }
  /* What the buffer holds past the text (the ring's old place, the bytes
   * dropped at a seam) is wiped now: nsbox_result_free wipes only the
   * text, and a pooled sandbox's init is a copy of this process. */
  if (c->buf)
    explicit_bzero (c->buf + out->len, c->alloc - out->len);
  out->buf = c->buf;
  c->buf = NULL;
  c->alloc = 0;
}
