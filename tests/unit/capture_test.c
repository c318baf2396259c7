/* The arithmetic of output capture (capture.c): head only, head and tail
 * around the omitted-bytes marker, UTF-8 seams, bounded memory. */
#include <criterion/criterion.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "result.h"

struct captured_text
{
  struct nsbox_captured c;
  size_t alloc_peak;
};

/* Feeds `in` in chunks of `chunk` bytes (0: all at once). */
static struct captured_text
capture (enum nsbox_capture_mode mode, uint64_t cap, const char *in, size_t len, size_t chunk)
{
  struct nsbox_capture c;
  nsbox_capture_init (&c, mode, cap);
  struct captured_text out = { 0 };
  for (size_t off = 0; off < len;)
    {
      size_t n = chunk == 0 || len - off < chunk ? len - off : chunk;
      cr_assert_eq (nsbox_capture_add (&c, in + off, n), 0);
      off += n;
      if (c.alloc > out.alloc_peak)
        out.alloc_peak = c.alloc;
    }
  nsbox_capture_finish (&c, &out.c);
  return out;
}

static void
expect_bytes (const struct captured_text *t, const char *expected)
{
  size_t n = strlen (expected);
  cr_assert_eq (t->c.len, n, "length %zu, expected %zu: '%.*s'", t->c.len, n, (int)t->c.len,
                t->c.buf ? t->c.buf : "");
  cr_assert (n == 0 || memcmp (t->c.buf, expected, n) == 0, "got '%.*s', expected '%s'",
             (int)t->c.len, t->c.buf, expected);
}

static bool
valid_utf8 (const char *s, size_t len)
{
  char *fixed = NULL;
  size_t fixed_len = 0;
  cr_assert_eq (nsbox_utf8_sanitize (s, len, &fixed, &fixed_len), 0);
  bool same = fixed_len == len && memcmp (fixed, s, len) == 0;
  free (fixed);
  return same;
}

Test (capture, head_mode_keeps_the_first_bytes_and_counts_the_rest, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD, 10, "abcdefghijklmnop", 16, 3);
  expect_bytes (&t, "abcdefghij");
  cr_assert (t.c.truncated);
  cr_assert_eq (t.c.omitted, 6);
  free (t.c.buf);
}

Test (capture, head_mode_does_not_mend_a_split_character, .timeout = 5)
{
  /* Unchanged from before head-tail: the cut is at the byte; the JSON
   * form shows the piece as U+FFFD. */
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD, 3, "ab\xc3\xa9", 4, 0);
  cr_assert_eq (t.c.len, 3);
  cr_assert_eq (t.c.omitted, 1);
  free (t.c.buf);
}

Test (capture, output_within_the_cap_is_complete_in_every_chunking, .timeout = 5)
{
  const char *in = "0123456789";
  for (size_t len = 0; len <= 10; len++)
    for (size_t chunk = 0; chunk <= 4; chunk++)
      {
        struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 10, in, len, chunk);
        cr_assert_eq (t.c.len, len, "len %zu chunk %zu", len, chunk);
        cr_assert (len == 0 || memcmp (t.c.buf, in, len) == 0, "len %zu chunk %zu", len, chunk);
        cr_assert (!t.c.truncated);
        cr_assert_eq (t.c.omitted, 0);
        free (t.c.buf);
      }
}

Test (capture, one_byte_over_the_cap_is_omitted_and_marked, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 10, "0123456789A", 11, 0);
  expect_bytes (&t, "01234\n[nsbox: 1 bytes omitted]\n6789A");
  cr_assert (t.c.truncated);
  cr_assert_eq (t.c.omitted, 1);
  free (t.c.buf);
}

Test (capture, head_and_tail_keep_half_the_cap_each_whatever_the_chunks, .timeout = 5)
{
  const char *in = "0123456789ABCDEFGHIJ";
  for (size_t chunk = 0; chunk <= 21; chunk++)
    {
      struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 10, in, 20, chunk);
      expect_bytes (&t, "01234\n[nsbox: 10 bytes omitted]\nFGHIJ");
      cr_assert_eq (t.c.omitted, 10);
      free (t.c.buf);
    }
}

Test (capture, an_odd_cap_gives_the_head_the_extra_byte, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 5, "abcdefgh", 8, 2);
  expect_bytes (&t, "abc\n[nsbox: 3 bytes omitted]\ngh");
  free (t.c.buf);
}

Test (capture, a_head_ending_a_line_gets_no_extra_newline, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 8, "abc\nXXXXXXXX\nxyz", 16, 0);
  expect_bytes (&t, "abc\n[nsbox: 8 bytes omitted]\n\nxyz");
  free (t.c.buf);
}

Test (capture, cap_zero_keeps_only_the_marker, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 0, "hello", 5, 0);
  expect_bytes (&t, "[nsbox: 5 bytes omitted]\n");
  cr_assert_eq (t.c.omitted, 5);
  free (t.c.buf);
  t = capture (NSBOX_CAPTURE_HEAD, 0, "hello", 5, 0);
  cr_assert_eq (t.c.len, 0);
  cr_assert_eq (t.c.omitted, 5);
  free (t.c.buf);
}

Test (capture, cap_one_keeps_one_byte_of_head_and_no_tail, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 1, "hello", 5, 1);
  expect_bytes (&t, "h\n[nsbox: 4 bytes omitted]\n");
  free (t.c.buf);
}

Test (capture, nothing_written_is_empty_and_complete, .timeout = 5)
{
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 100, "", 0, 0);
  cr_assert_eq (t.c.len, 0);
  cr_assert (!t.c.truncated);
  free (t.c.buf);
}

/* A character of each width cut at each of its bytes by the head's end and
 * by the tail's start: never split, and what was dropped is counted. */
Test (capture, multibyte_characters_are_never_split_at_either_seam, .timeout = 10)
{
  static const char *const chars[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80" };
  for (size_t w = 0; w < 3; w++)
    for (size_t shift = 0; shift < 4; shift++)
      {
        /* shift ASCII bytes, then characters of width w+2, then ASCII. */
        char in[256];
        size_t len = 0;
        for (size_t i = 0; i < shift; i++)
          in[len++] = 'a';
        for (size_t i = 0; i < 30; i++)
          {
            memcpy (in + len, chars[w], w + 2);
            len += w + 2;
          }
        for (size_t i = 0; i < shift; i++)
          in[len++] = 'z';
        for (uint64_t cap = 2; cap < 24; cap++)
          {
            struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, cap, in, len, 7);
            cr_assert (valid_utf8 (t.c.buf, t.c.len), "width %zu shift %zu cap %" PRIu64, w + 2,
                       shift, cap);
            const char *marker = memmem (t.c.buf, t.c.len, "[nsbox: ", 8);
            cr_assert_not_null (marker);
            size_t head = (size_t)(marker - t.c.buf);
            if (head > 0 && t.c.buf[head - 1] == '\n' && in[head - 1] != '\n')
              head--;
            const char *end = memchr (marker, '\n', t.c.len - (size_t)(marker - t.c.buf));
            size_t tail = t.c.len - (size_t)(end + 1 - t.c.buf);
            cr_assert_eq (memcmp (t.c.buf, in, head), 0, "the head is the stream's start");
            cr_assert_eq (memcmp (end + 1, in + len - tail, tail), 0, "the tail is its end");
            cr_assert_eq (head + tail + t.c.omitted, len, "kept plus omitted is everything");
            cr_assert_geq (head + 3, cap - cap / 2, "at most a character less in the head");
            cr_assert_geq (tail + 3, cap / 2, "at most a character less in the tail");
            char expect_marker[64];
            snprintf (expect_marker, sizeof expect_marker, "[nsbox: %" PRIu64 " bytes omitted]",
                      t.c.omitted);
            cr_assert_eq (memcmp (marker, expect_marker, strlen (expect_marker)), 0);
            free (t.c.buf);
          }
      }
}

Test (capture, bytes_that_are_not_utf8_are_kept_except_at_most_three_per_seam, .timeout = 5)
{
  char in[64];
  memset (in, 0xff, sizeof in);
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 20, in, sizeof in, 0);
  cr_assert_eq (t.c.omitted, 44, "0xff is no character's start: nothing more is dropped");
  free (t.c.buf);
  memset (in, 0x80, sizeof in);
  t = capture (NSBOX_CAPTURE_HEAD_TAIL, 20, in, sizeof in, 0);
  cr_assert_eq (t.c.omitted, 47, "at most three continuation bytes leave the tail");
  free (t.c.buf);
}

Test (capture, memory_stays_at_the_cap_whatever_the_flood, .timeout = 10)
{
  size_t big = 10u << 20;
  char *flood = malloc (big);
  cr_assert_not_null (flood);
  for (size_t i = 0; i < big; i++)
    flood[i] = (char)('a' + i % 26);
  struct captured_text t = capture (NSBOX_CAPTURE_HEAD_TAIL, 1000, flood, big, 65536);
  cr_assert_leq (t.alloc_peak, 1000 + NSBOX_CAPTURE_MARKER_MAX);
  cr_assert_eq (t.c.omitted, big - 1000);
  cr_assert_eq (memcmp (t.c.buf + t.c.len - 500, flood + big - 500, 500), 0);
  free (t.c.buf);
  t = capture (NSBOX_CAPTURE_HEAD, 1000, flood, big, 65536);
  cr_assert_leq (t.alloc_peak, 1000);
  free (t.c.buf);
  free (flood);
}

Test (capture, mode_names_parse_and_print, .timeout = 5)
{
  enum nsbox_capture_mode m = NSBOX_CAPTURE_HEAD;
  cr_assert_eq (nsbox_capture_mode_parse ("head-tail", &m), 0);
  cr_assert_eq (m, NSBOX_CAPTURE_HEAD_TAIL);
  cr_assert_eq (nsbox_capture_mode_parse ("head", &m), 0);
  cr_assert_eq (m, NSBOX_CAPTURE_HEAD);
  cr_assert_lt (nsbox_capture_mode_parse ("tail", &m), 0);
  cr_assert_str_eq (nsbox_capture_mode_name (NSBOX_CAPTURE_HEAD_TAIL), "head-tail");
}
