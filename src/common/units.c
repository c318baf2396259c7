/* The units of the configuration's values: sizes ("64m", powers of 1024),
 * durations ("500ms", "5s", "1m"), CPU counts ("0.5"), counts; parsing and
 * formatting. Parsers check syntax and overflow; the setters of config.c
 * check the range of each key. */
#include "units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "util.h"

/* Parsing of numbers. Parsers check syntax and overflow; the setters check
 * the range of each key. */

struct decimal
{
  uint64_t whole;
  uint64_t fraction; /* digits after the point, trailing zeros removed */
  unsigned fraction_digits;
};

bool
nsbox_is_digit (char c)
{
  return c >= '0' && c <= '9';
}

/* Reads one or more decimal digits: -EINVAL when there is none, -ERANGE on
 * overflow. */
int
nsbox_parse_digits (const char **text, uint64_t *value)
{
  const char *s = *text;
  uint64_t v = 0;
  if (!nsbox_is_digit (*s))
    return -EINVAL;
  for (; nsbox_is_digit (*s); s++)
    if (__builtin_mul_overflow (v, 10, &v) || __builtin_add_overflow (v, (uint64_t)(*s - '0'), &v))
      return -ERANGE;
  *text = s;
  *value = v;
  return 0;
}

/* Reads "12" or "12.50"; a point needs digits on both sides. */
static int
parse_decimal (const char **text, struct decimal *out)
{
  const char *s = *text;
  struct decimal d = { 0, 0, 0 };
  int r = nsbox_parse_digits (&s, &d.whole);
  if (r < 0)
    return r;
  if (*s == '.')
    {
      const char *digits = ++s;
      while (nsbox_is_digit (*s))
        s++;
      const char *end = s;
      while (end > digits && end[-1] == '0')
        end--;
      if (s == digits)
        return -EINVAL;
      /* More significant fractional digits than this can never scale to a
       * whole number of bytes, milliseconds or thousandths. */
      if (end - digits > 18)
        return -EINVAL;
      for (const char *p = digits; p < end; p++)
        d.fraction = d.fraction * 10 + (uint64_t)(*p - '0');
      d.fraction_digits = (unsigned)(end - digits);
    }
  *text = s;
  *out = d;
  return 0;
}

/* d * unit, which must come out whole: "2.5" seconds is 2500 ms, "0.0001"
 * CPUs is not a whole number of thousandths. */
static int
scale_decimal (const struct decimal *d, uint64_t unit, uint64_t *out)
{
  uint64_t power = 1;
  for (unsigned i = 0; i < d->fraction_digits; i++)
    power *= 10;
  unsigned __int128 fraction = (unsigned __int128)d->fraction * unit;
  if (fraction % power != 0)
    return -EINVAL;
  uint64_t whole;
  if (__builtin_mul_overflow (d->whole, unit, &whole)
      || __builtin_add_overflow (whole, (uint64_t)(fraction / power), &whole))
    return -ERANGE;
  *out = whole;
  return 0;
}

/* "", "b", "k", "kb", "ki", "kib", ... "t..."; case-insensitive. */
static int
size_unit (const char *suffix, uint64_t *factor)
{
  static const char letters[] = "kmgt";
  const char *letter = *suffix ? strchr (letters, tolower ((unsigned char)*suffix)) : NULL;
  uint64_t f = 1;
  if (letter)
    {
      f = 1ULL << (10 * (letter - letters + 1));
      suffix++;
      if (tolower ((unsigned char)*suffix) == 'i')
        suffix++;
    }
  if (tolower ((unsigned char)*suffix) == 'b')
    suffix++;
  if (*suffix)
    return -EINVAL;
  *factor = f;
  return 0;
}

/* Like nsbox_parse_size, but zero is a valid size. */
int
nsbox_parse_size_or_zero (const char *text, uint64_t *bytes)
{
  if (!text)
    return -EINVAL;
  struct decimal d;
  uint64_t factor;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  r = size_unit (text, &factor);
  if (r < 0)
    return r;
  return scale_decimal (&d, factor, bytes);
}

int
nsbox_parse_size (const char *text, uint64_t *bytes)
{
  uint64_t parsed;
  int r = nsbox_parse_size_or_zero (text, &parsed);
  if (r < 0)
    return r;
  if (parsed == 0)
    return -EINVAL;
  *bytes = parsed;
  return 0;
}

int
nsbox_parse_duration (const char *text, uint64_t *ms)
{
  static const struct
  {
    const char *suffix;
    uint64_t ms;
  } units[] = {
    { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 }, { "h", 60 * 60 * 1000 },
  };
  if (!text)
    return -EINVAL;
  struct decimal d;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  for (size_t i = 0; i < ARRAY_SIZE (units); i++)
    if (strcmp (text, units[i].suffix) == 0)
      return scale_decimal (&d, units[i].ms, ms);
  return -EINVAL;
}

int
nsbox_parse_cpus (const char *text, uint64_t *milli)
{
  if (!text)
    return -EINVAL;
  struct decimal d;
  int r = parse_decimal (&text, &d);
  if (r < 0)
    return r;
  if (*text)
    return -EINVAL;
  return scale_decimal (&d, 1000, milli);
}

int
nsbox_parse_count (const char *text, uint64_t *value)
{
  uint64_t parsed;
  int r = nsbox_parse_digits (&text, &parsed);
  if (r < 0)
    return r;
  if (*text)
    return -EINVAL;
  *value = parsed;
  return 0;
}

/* Formatting, the inverse of the parsers: what nsbox_config_get returns
 * parses back to the same value. */

char *
nsbox_format_size (uint64_t bytes)
{
  static const char letters[] = "kmgt";
  for (int i = 3; i >= 0; i--)
    {
      uint64_t factor = 1ULL << (10 * (i + 1));
      if (bytes > 0 && bytes % factor == 0)
        return xasprintf ("%" PRIu64 "%c", bytes / factor, letters[i]);
    }
  return xasprintf ("%" PRIu64, bytes);
}

char *
nsbox_format_duration (uint64_t ms)
{
  static const struct
  {
    const char *suffix;
    uint64_t ms;
  } units[] = { { "h", 60 * 60 * 1000 }, { "m", 60 * 1000 }, { "s", 1000 } };
  for (size_t i = 0; i < ARRAY_SIZE (units); i++)
    if (ms > 0 && ms % units[i].ms == 0)
      return xasprintf ("%" PRIu64 "%s", ms / units[i].ms, units[i].suffix);
  return xasprintf ("%" PRIu64 "ms", ms);
}

char *
nsbox_format_cpus (uint64_t milli)
{
  if (milli % 1000 == 0)
    return xasprintf ("%" PRIu64, milli / 1000);
  char *text = xasprintf ("%" PRIu64 ".%03" PRIu64, milli / 1000, milli % 1000);
  if (text)
    {
      size_t len = strlen (text);
      while (text[len - 1] == '0')
        text[--len] = '\0';
    }
  return text;
}

/* A JSON (and YAML flow) array of strings, for the list keys. */
