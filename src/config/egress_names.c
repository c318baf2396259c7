/* Controlled egress, the vocabulary: host names, allowlist patterns, pins
 * and address classes. Pure functions on bytes, shared by the
 * configuration's checks and the launcher's proxy; see egress_names.h. */
#include "egress_names.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host names ---- */

static const char not_a_name[] = "not a valid host name";
const char nsbox_egress_an_address[] = "an IP address";

bool
nsbox_egress_all_digits (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return n > 0;
}

/* A last label that is a number (decimal, or 0x and hex) makes the whole
 * name an IPv4 address to inet_aton and to URL parsers (127.1,
 * 2130706433, 0x7f.1): never a name. */
static bool
is_number_label (const char *s, size_t n)
{
  if (nsbox_egress_all_digits (s, n))
    return true;
  if (n >= 2 && s[0] == '0' && s[1] == 'x')
    {
      for (size_t i = 2; i < n; i++)
        if (!isxdigit ((unsigned char)s[i]))
          return false;
      return true;
    }
  return false;
}

static const char *
host_normalize (const char *text, size_t len, char out[NSBOX_EGRESS_HOST_MAX + 1])
{
  if (len == 0)
    return not_a_name;
  if (text[0] == '[' || memchr (text, ':', len))
    {
      /* An IPv6 address, bracketed or not; anything else with these
       * characters is no name either. */
      char v6[INET6_ADDRSTRLEN + 2];
      struct in6_addr a;
      bool br = len >= 2 && text[0] == '[' && text[len - 1] == ']';
      size_t n = br ? len - 2 : len;
      if (n < sizeof v6)
        {
          memcpy (v6, text + br, n);
          v6[n] = '\0';
          if (inet_pton (AF_INET6, v6, &a) == 1)
            return nsbox_egress_an_address;
        }
      return not_a_name;
    }
  if (text[len - 1] == '.')
    len--;
  if (len == 0 || len > NSBOX_EGRESS_HOST_MAX)
    return not_a_name;
  for (size_t i = 0; i < len; i++)
    {
      char ch = text[i];
      if (ch >= 'A' && ch <= 'Z')
        ch = (char)(ch - 'A' + 'a');
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
        return not_a_name;
      out[i] = ch;
    }
  out[len] = '\0';
  const char *last = memrchr (out, '.', len);
  last = last ? last + 1 : out;
  if (is_number_label (last, (size_t)(out + len - last)))
    {
      out[0] = '\0';
      return nsbox_egress_an_address;
    }
  for (const char *label = out; label < out + len;)
    {
      const char *end = memchr (label, '.', (size_t)(out + len - label));
      size_t n = end ? (size_t)(end - label) : (size_t)(out + len - label);
      if (n == 0 || n > 63 || label[0] == '-' || label[n - 1] == '-')
        {
          out[0] = '\0';
          return not_a_name;
        }
      if (!end)
        break;
      label = end + 1;
      if (label == out + len)
        {
          out[0] = '\0';
          return not_a_name;
        }
    }
  return NULL;
}

/* Nothing is left in `out` when the text is refused: a record never names
 * a host that was not one. */
const char *
nsbox_egress_host_normalize (const char *text, size_t len, char out[NSBOX_EGRESS_HOST_MAX + 1])
{
  const char *why = host_normalize (text, len, out);
  if (why)
    out[0] = '\0';
  return why;
}

const char *
nsbox_egress_pattern_normalize (const char *text, char out[NSBOX_EGRESS_HOST_MAX + 3])
{
  out[0] = '\0';
  bool wildcard = strncmp (text, "*.", 2) == 0;
  const char *name = wildcard ? text + 2 : text;
  const char *why = nsbox_egress_host_normalize (name, strlen (name), out + (wildcard ? 2 : 0));
  if (why)
    {
      out[0] = '\0';
      return why == nsbox_egress_an_address ? "an IP address (list host names; pin an address with "
                                              "egress-resolve)"
                                            : "not a host name or *. and a host name";
    }
  if (wildcard)
    memcpy (out, "*.", 2);
  return NULL;
}

bool
nsbox_egress_pattern_match (const char *pattern, const char *host)
{
  if (strncmp (pattern, "*.", 2) != 0)
    return strcmp (pattern, host) == 0;
  size_t pl = strlen (pattern) - 1, hl = strlen (host); /* ".suffix" */
  return hl > pl && strcmp (host + hl - pl, pattern + 1) == 0;
}

/* An address literal: IPv4 dotted quad, or IPv6 with or without brackets. */
static bool
parse_address (const char *text, size_t len, struct sockaddr_storage *address)
{
  char buf[INET6_ADDRSTRLEN + 2];
  bool bracketed = len >= 2 && text[0] == '[' && text[len - 1] == ']';
  if (bracketed)
    {
      text++;
      len -= 2;
    }
  if (len == 0 || len >= sizeof buf)
    return false;
  memcpy (buf, text, len);
  buf[len] = '\0';
  memset (address, 0, sizeof *address);
  struct sockaddr_in *in = (struct sockaddr_in *)address;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)address;
  if (!bracketed && inet_pton (AF_INET, buf, &in->sin_addr) == 1)
    {
      in->sin_family = AF_INET;
      return true;
    }
  if (inet_pton (AF_INET6, buf, &in6->sin6_addr) == 1)
    {
      in6->sin6_family = AF_INET6;
      return true;
    }
  return false;
}

const char *
nsbox_egress_pin_parse (const char *text, char name[NSBOX_EGRESS_HOST_MAX + 1],
                        struct sockaddr_storage *address)
{
  const char *eq = strchr (text, '=');
  if (!eq)
    return "not NAME=ADDRESS";
  if (nsbox_egress_host_normalize (text, (size_t)(eq - text), name))
    return "its NAME is not a host name";
  if (!parse_address (eq + 1, strlen (eq + 1), address))
    return "its ADDRESS is not an IPv4 or IPv6 address";
  return NULL;
}

void
nsbox_egress_address_text (const struct sockaddr *sa, char *out, size_t size)
{
  const void *raw = sa->sa_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (!inet_ntop (sa->sa_family, raw, out, (socklen_t)size))
    snprintf (out, size, "?");
}

/* ---- address classes ---- */

struct net4
{
  uint32_t prefix;
  unsigned bits;
  const char *why;
};

static const struct net4 refused4[] = {
  { 0x00000000, 8, "reserved (this network)" },
  { 0x0a000000, 8, "private" },
  { 0x64400000, 10, "carrier-grade NAT" },
  { 0x7f000000, 8, "loopback" },
  { 0xa9fe0000, 16, "link-local (the cloud metadata service lives here)" },
  { 0xac100000, 12, "private" },
  { 0xc0000000, 24, "reserved (IETF protocol assignments)" },
  { 0xc0000200, 24, "reserved (documentation)" },
  { 0xc0586300, 24, "reserved (6to4 relay)" },
  { 0xc0a80000, 16, "private" },
  { 0xc6120000, 15, "reserved (benchmarking)" },
  { 0xc6336400, 24, "reserved (documentation)" },
  { 0xcb007100, 24, "reserved (documentation)" },
  { 0xe0000000, 4, "multicast" },
  { 0xf0000000, 4, "reserved (future use and broadcast)" },
};

static const char *
refused_v4 (uint32_t a)
{
  for (size_t i = 0; i < ARRAY_SIZE (refused4); i++)
    if ((a >> (32 - refused4[i].bits)) == (refused4[i].prefix >> (32 - refused4[i].bits)))
      return refused4[i].why;
  return NULL;
}

struct net6
{
  uint8_t prefix[16];
  unsigned bits;
  const char *why;
};

static const struct net6 refused6[] = {
  { { 0 }, 128, "reserved (unspecified)" },
  { { [15] = 1 }, 128, "loopback" },
  { { 0x00, 0x64, 0xff, 0x9b }, 96, "NAT64" },
  { { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "NAT64" },
  { { 0 }, 96, "reserved (IPv4-compatible)" },
  { { 0x01 }, 64, "reserved (discard)" },
  { { 0x20, 0x01, 0x0d, 0xb8 }, 32, "reserved (documentation)" },
  { { 0x20, 0x01 }, 23, "reserved (IETF protocol assignments, Teredo)" },
  { { 0x20, 0x02 }, 16, "reserved (6to4)" },
  { { 0x3f, 0xff }, 20, "reserved (documentation)" },
  { { 0xfc }, 7, "unique local" },
  { { 0xfe, 0x80 }, 10, "link-local" },
  { { 0xfe, 0xc0 }, 10, "reserved (site-local)" },
  { { 0xff }, 8, "multicast" },
};

static bool
in_net6 (const uint8_t *a, const struct net6 *n)
{
  unsigned full = n->bits / 8, rest = n->bits % 8;
  if (memcmp (a, n->prefix, full) != 0)
    return false;
  if (rest == 0)
    return true;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a[full] & mask) == (n->prefix[full] & mask);
}

static const char *
refused_v6 (const uint8_t *a)
{
  for (size_t i = 0; i < ARRAY_SIZE (refused6); i++)
    if (in_net6 (a, &refused6[i]))
      return refused6[i].why;
  /* Global unicast is 2000::/3; nothing else is assigned. */
  if ((a[0] & 0xe0) != 0x20)
    return "reserved (not global unicast)";
  return NULL;
}

void
nsbox_egress_plain_address (const struct sockaddr *address, struct sockaddr_storage *out)
{
  memset (out, 0, sizeof *out);
  out->ss_family = address->sa_family;
  if (address->sa_family == AF_INET)
    ((struct sockaddr_in *)out)->sin_addr = ((const struct sockaddr_in *)address)->sin_addr;
  else if (address->sa_family == AF_INET6)
    {
      const struct in6_addr *a = &((const struct sockaddr_in6 *)address)->sin6_addr;
      if (IN6_IS_ADDR_V4MAPPED (a))
        {
          out->ss_family = AF_INET;
          memcpy (&((struct sockaddr_in *)out)->sin_addr, &a->s6_addr[12], 4);
        }
      else
        ((struct sockaddr_in6 *)out)->sin6_addr = *a;
    }
}

const char *
nsbox_egress_address_refused (const struct sockaddr *address)
{
  struct sockaddr_storage plain;
  nsbox_egress_plain_address (address, &plain);
  if (plain.ss_family == AF_INET)
    return refused_v4 (ntohl (((const struct sockaddr_in *)&plain)->sin_addr.s_addr));
  if (plain.ss_family == AF_INET6)
    return refused_v6 (((const struct sockaddr_in6 *)&plain)->sin6_addr.s6_addr);
  return "not an internet address";
}
