/* Fuzz target: output capture (capture.c) with any cap, mode, chunking and
 * bytes. Whatever comes in: memory stays at the cap plus the marker's room;
 * complete output comes back byte for byte; head mode keeps the first
 * bytes; head-tail gives a prefix of the stream, the marker stating the
 * omitted count, and a suffix, kept + omitted = written, at most three bytes
 * dropped per seam, and valid UTF-8 in gives valid UTF-8 out.
 *
 * Input: two bytes of cap (0 to 4095), one byte of mode (bit 7) and chunk
 * size (low bits, 1 to 64), then the stream. */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "capture.h"
#include "fuzz.h"

static bool
valid_utf8 (const uint8_t *s, size_t len)
{
  json_t *v = json_stringn ((const char *)s, len);
  json_decref (v);
  return v != NULL;
}

/* Whether out is stream[0..head) + the marker + a suffix of the stream. */
static bool
is_head_marker_tail (const struct nsbox_captured *out, const uint8_t *stream, size_t len,
                     size_t head)
{
  if (head > out->len || memcmp (out->buf, stream, head) != 0)
    return false;
  char marker[NSBOX_CAPTURE_MARKER_MAX];
  bool nl = head > 0 && stream[head - 1] != '\n';
  int n = snprintf (marker, sizeof marker, "%s[nsbox: %" PRIu64 " bytes omitted]\n", nl ? "\n" : "",
                    out->omitted);
  size_t mlen = (size_t)n;
  if (head + mlen > out->len || memcmp (out->buf + head, marker, mlen) != 0)
    return false;
  size_t tail = out->len - head - mlen;
  return head + tail + out->omitted == len && tail <= len
         && memcmp (out->buf + head + mlen, stream + len - tail, tail) == 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size < 3)
    return 0;
  uint64_t cap = ((uint64_t)data[0] << 8 | data[1]) & 0xfff;
  enum nsbox_capture_mode mode = data[2] & 0x80 ? NSBOX_CAPTURE_HEAD : NSBOX_CAPTURE_HEAD_TAIL;
  size_t chunk = (size_t)(data[2] & 0x3f) + 1;
  const uint8_t *stream = data + 3;
  size_t len = size - 3;

  struct nsbox_capture c;
  nsbox_capture_init (&c, mode, cap);
  for (size_t off = 0; off < len; off += chunk)
    {
      size_t n = len - off < chunk ? len - off : chunk;
      FUZZ_CHECK (nsbox_capture_add (&c, (const char *)stream + off, n) == 0, "add failed");
      FUZZ_CHECK (c.alloc <= cap + NSBOX_CAPTURE_MARKER_MAX, "%zu bytes held for a cap of %" PRIu64,
                  c.alloc, cap);
    }
  struct nsbox_captured out;
  nsbox_capture_finish (&c, &out);

  FUZZ_CHECK (out.truncated == (len > cap), "truncated is %d for %zu bytes, cap %" PRIu64,
              out.truncated, len, cap);
  if (!out.truncated)
    FUZZ_CHECK (out.len == len && out.omitted == 0 && (len == 0 || !memcmp (out.buf, stream, len)),
                "complete output changed");
  else if (mode == NSBOX_CAPTURE_HEAD)
    FUZZ_CHECK (out.len == cap && out.omitted == len - cap
                    && (cap == 0 || !memcmp (out.buf, stream, cap)),
                "head mode did not keep the first %" PRIu64 " bytes", cap);
  else
    {
      size_t head_cap = (size_t)(cap - cap / 2), tail_cap = (size_t)(cap / 2);
      bool found = false;
      for (size_t h = head_cap >= 3 ? head_cap - 3 : 0; h <= head_cap && !found; h++)
        found = is_head_marker_tail (&out, stream, len, h);
      FUZZ_CHECK (found, "no head within 3 bytes of %zu, marker and tail", head_cap);
      FUZZ_CHECK (out.len + 6 >= head_cap + tail_cap, "more than 3 bytes dropped per seam");
      if (valid_utf8 (stream, len))
        FUZZ_CHECK (valid_utf8 ((const uint8_t *)out.buf, out.len), "a character was split");
    }
  free (out.buf);
  return 0;
}
