/* Captured output of one stream within max-output-bytes: the head only, or
 * the head and the tail around a marker saying how much was omitted. The
 * launcher's memory stays bounded by the cap whatever the program writes. */
#ifndef NSBOX_CAPTURE_H
#define NSBOX_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum nsbox_capture_mode
{
  NSBOX_CAPTURE_HEAD_TAIL = 0, /* the default */
  NSBOX_CAPTURE_HEAD,
};

/* The longest marker: "\n[nsbox: " UINT64_MAX " bytes omitted]\n". */
#define NSBOX_CAPTURE_MARKER_MAX 64

struct nsbox_capture
{
  enum nsbox_capture_mode mode;
  size_t head_cap, tail_cap; /* head_cap + tail_cap = the cap */
  char *buf;                 /* the head, then (once it is full) room for
                              * the marker and the tail's ring */
  size_t alloc;
  size_t head_len;
  size_t ring_len, ring_next; /* bytes in the ring; where the next one goes */
  uint64_t total;             /* every byte the program wrote */
  /* Told of the stream's first head_cap + tail_cap bytes as they come. */
  void (*observe) (void *data, int stream, const char *bytes, size_t len);
  void *observe_data;
  int stream;
};

/* "head" or "head-tail" to a mode; -EINVAL for anything else. */
int nsbox_capture_mode_parse (const char *text, enum nsbox_capture_mode *mode) NSBOX_INTERNAL;
const char *nsbox_capture_mode_name (enum nsbox_capture_mode mode) NSBOX_INTERNAL;

void nsbox_capture_init (struct nsbox_capture *c, enum nsbox_capture_mode mode,
                         uint64_t cap) NSBOX_INTERNAL;
/* Tells observe (NULL: nobody) of the stream's bytes within the cap. */
void nsbox_capture_observe (struct nsbox_capture *c,
                            void (*observe) (void *data, int stream, const char *bytes, size_t len),
                            void *data, int stream) NSBOX_INTERNAL;
/* Takes n more bytes of the stream; -ENOMEM when the buffer cannot grow
 * (it never grows beyond the cap plus NSBOX_CAPTURE_MARKER_MAX). */
int nsbox_capture_add (struct nsbox_capture *c, const char *data, size_t n) NSBOX_INTERNAL;

struct nsbox_captured
{
  char *buf; /* malloc'd, or NULL when empty; the caller wipes and frees it */
  size_t len;
  bool truncated;
  uint64_t omitted; /* bytes of the stream not in buf */
};
/* Ends the capture and hands its buffer over: head-tail puts the tail
 * after the head and the marker, with no character cut at either seam
 * (see README.md, "Head and tail"). */
void nsbox_capture_finish (struct nsbox_capture *c, struct nsbox_captured *out) NSBOX_INTERNAL;

#endif
