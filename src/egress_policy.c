/* Controlled egress, the decisions: host names, allowlist patterns, pins,
 * address classes, the proxy request head and the TLS ClientHello. Pure
 * functions on bytes, shared by the launcher's proxy (egress.c) and the
 * configuration's checks; see egress.h. */
#include "egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host names ---- */

static const char not_a_name[] = "not a valid host name";
static const char an_address[] = "an IP address";

static bool
all_digits (const char *s, size_t n)
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
  if (all_digits (s, n))
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
            return an_address;
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
      return an_address;
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
      return why == an_address ? "an IP address (list host names; pin an address with "
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

/* ---- the request head ---- */

static enum nsbox_egress_parse
bad (struct nsbox_egress_request *req, int status, const char *reason)
{
  free (req->upstream_head);
  req->upstream_head = NULL;
  req->status = status;
  req->reason = reason;
  return NSBOX_EGRESS_BAD;
}

static bool
is_tchar (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
         || (c && strchr ("!#$%&'*+-.^_`|~", c));
}

static const char host_is_address[] = "the host is an IP address: name a host on the allowlist";

/* "host:port" or "host" (port `dflt`, 0: a port is required). */
static const char *
parse_authority (const char *text, size_t len, uint16_t dflt, char host[NSBOX_EGRESS_HOST_MAX + 1],
                 uint16_t *port)
{
  if (len > 0 && text[0] == '[')
    return host_is_address;
  const char *colon = memrchr (text, ':', len);
  size_t host_len = colon ? (size_t)(colon - text) : len;
  if (colon)
    {
      size_t n = len - host_len - 1;
      if (n == 0 || n > 5 || !all_digits (colon + 1, n))
        return "the port is not a number from 1 to 65535";
      unsigned long p = strtoul (colon + 1, NULL, 10);
      if (p == 0 || p > 65535)
        return "the port is not a number from 1 to 65535";
      *port = (uint16_t)p;
    }
  else if (dflt == 0)
    return "CONNECT needs host:port";
  else
    *port = dflt;
  const char *why = nsbox_egress_host_normalize (text, host_len, host);
  if (why == an_address)
    return host_is_address;
  if (why)
    return "the host is not a valid host name";
  return NULL;
}

static bool
header_is (const char *line, size_t name_len, const char *name)
{
  return strlen (name) == name_len && strncasecmp (line, name, name_len) == 0;
}

static void
trim (const char **value, size_t *len)
{
  while (*len > 0 && (**value == ' ' || **value == '\t'))
    {
      (*value)++;
      (*len)--;
    }
  while (*len > 0 && ((*value)[*len - 1] == ' ' || (*value)[*len - 1] == '\t'))
    (*len)--;
}

static int
append (char **buf, size_t *len, size_t *size, const char *data, size_t n)
{
  if (*len + n + 1 > *size)
    {
      size_t want = (*len + n + 1) * 2;
      char *grown = realloc (*buf, want);
      if (!grown)
        return -1;
      *buf = grown;
      *size = want;
    }
  memcpy (*buf + *len, data, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

/* The request line: METHOD SP TARGET SP HTTP/1.x. */
static enum nsbox_egress_parse
parse_request_line (const char *line, size_t n, struct nsbox_egress_request *req,
                    const char **target, size_t *target_len, size_t *method_len,
                    const char **version)
{
  const char *sp1 = memchr (line, ' ', n);
  if (!sp1 || sp1 == line)
    return bad (req, 400, "not an HTTP proxy request");
  for (const char *p = line; p < sp1; p++)
    if (!is_tchar (*p))
      return bad (req, 400, "not an HTTP proxy request");
  const char *sp2 = memchr (sp1 + 1, ' ', (size_t)(line + n - sp1 - 1));
  if (!sp2 || sp2 == sp1 + 1 || line + n - sp2 - 1 != 8
      || (strncmp (sp2 + 1, "HTTP/1.1", 8) != 0 && strncmp (sp2 + 1, "HTTP/1.0", 8) != 0))
    return bad (req, 400, "not an HTTP/1.x proxy request");
  for (const char *p = sp1 + 1; p < sp2; p++)
    if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
      return bad (req, 400, "the request target has a control character or a space");
  *method_len = (size_t)(sp1 - line);
  *target = sp1 + 1;
  *target_len = (size_t)(sp2 - sp1 - 1);
  *version = sp2 + 1;
  req->connect = *method_len == 7 && memcmp (line, "CONNECT", 7) == 0;
  return NSBOX_EGRESS_DONE;
}

/* Absolute-form: http://host[:port][/path]; the path goes upstream. */
static enum nsbox_egress_parse
parse_absolute (const char *target, size_t len, struct nsbox_egress_request *req, const char **path,
                size_t *path_len)
{
  if (len >= 8 && strncasecmp (target, "https://", 8) == 0)
    return bad (req, 400, "https:// goes through CONNECT, not a plain request");
  if (len < 7 || strncasecmp (target, "http://", 7) != 0)
    return bad (req, 400,
                "the proxy needs an absolute http:// URL (or CONNECT host:port for https)");
  const char *auth = target + 7, *end = target + len;
  const char *stop = auth;
  while (stop < end && *stop != '/' && *stop != '?' && *stop != '#')
    stop++;
  if (memchr (auth, '@', (size_t)(stop - auth)))
    return bad (req, 400, "user names in the URL are not allowed");
  const char *why = parse_authority (auth, (size_t)(stop - auth), 80, req->host, &req->port);
  if (why)
    return bad (req, 403, why);
  *path = stop < end ? stop : "/";
  *path_len = stop < end ? (size_t)(end - stop) : 1;
  if (**path == '#')
    return bad (req, 400, "the URL has a fragment");
  return NSBOX_EGRESS_DONE;
}

enum nsbox_egress_parse
nsbox_egress_parse_request (const char *buf, size_t len, struct nsbox_egress_request *req)
{
  memset (req, 0, sizeof *req);
  if (len == 0)
    return NSBOX_EGRESS_MORE;
  if (!is_tchar (buf[0]))
    return bad (req, 400, "not an HTTP proxy request");
  const char *eol = memchr (buf, '\n', len);
  if (!eol)
    {
      for (size_t i = 0; i < len; i++)
        if (((unsigned char)buf[i] < ' ' && !(buf[i] == '\r' && i == len - 1))
            || (unsigned char)buf[i] >= 0x7f)
          return bad (req, 400, "not an HTTP proxy request");
      return len >= 8192 ? bad (req, 414, "the request line is too long") : NSBOX_EGRESS_MORE;
    }
  if (eol == buf || eol[-1] != '\r')
    return bad (req, 400, "not an HTTP proxy request (lines end in CRLF)");
  const char *target, *version;
  size_t target_len, method_len;
  if (parse_request_line (buf, (size_t)(eol - 1 - buf), req, &target, &target_len, &method_len,
                          &version)
      == NSBOX_EGRESS_BAD)
    return NSBOX_EGRESS_BAD;
  const char *head_end
      = memmem (buf, len < NSBOX_EGRESS_HEAD_MAX ? len : NSBOX_EGRESS_HEAD_MAX, "\r\n\r\n", 4);
  if (!head_end)
    return len >= NSBOX_EGRESS_HEAD_MAX ? bad (req, 431, "the request head is too large")
                                        : NSBOX_EGRESS_MORE;
  req->head_len = (size_t)(head_end + 4 - buf);

  const char *path = NULL;
  size_t path_len = 0;
  if (req->connect)
    {
      const char *why = parse_authority (target, target_len, 0, req->host, &req->port);
      if (why)
        return bad (req, why == host_is_address ? 403 : 400, why);
    }
  else if (parse_absolute (target, target_len, req, &path, &path_len) == NSBOX_EGRESS_BAD)
    return NSBOX_EGRESS_BAD;

  size_t size = 0, out_len = 0;
  char *out = NULL;
  if (!req->connect
      && (append (&out, &out_len, &size, buf, method_len) < 0
          || append (&out, &out_len, &size, " ", 1) < 0
          || (*path == '?' && append (&out, &out_len, &size, "/", 1) < 0)
          || append (&out, &out_len, &size, path, path_len) < 0
          || append (&out, &out_len, &size, " ", 1) < 0
          || append (&out, &out_len, &size, version, 8) < 0
          || append (&out, &out_len, &size, "\r\n", 2) < 0))
    {
      req->upstream_head = out;
      return bad (req, 500, "out of memory");
    }
  req->upstream_head = out;

  int hosts = 0;
  bool have_length = false;
  for (const char *line = eol + 1; line < head_end + 2;)
    {
      const char *end = memmem (line, (size_t)(head_end + 2 - line), "\r\n", 2);
      size_t n = (size_t)(end - line);
      const char *colon = memchr (line, ':', n);
      if (!colon || colon == line)
        return bad (req, 400, "a header line is not NAME: VALUE");
      for (const char *p = line; p < colon; p++)
        if (!is_tchar (*p))
          return bad (req, 400, "a header name is not a token (folded lines are not allowed)");
      for (const char *p = colon + 1; p < end; p++)
        if (((unsigned char)*p < ' ' && *p != '\t') || *p == 0x7f)
          return bad (req, 400, "a header value has a control character");
      size_t name_len = (size_t)(colon - line);
      const char *value = colon + 1;
      size_t value_len = (size_t)(end - value);
      trim (&value, &value_len);
      bool keep = true;
      if (header_is (line, name_len, "Host"))
        {
          char host[NSBOX_EGRESS_HOST_MAX + 1];
          uint16_t port = 0;
          if (++hosts > 1)
            return bad (req, 400, "the request has several Host headers");
          if (!req->connect
              && (parse_authority (value, value_len, 80, host, &port) || strcmp (host, req->host)
                  || port != req->port))
            return bad (req, 403, "the Host header names another host than the URL");
        }
      else if (header_is (line, name_len, "Content-Length"))
        {
          uint64_t cl = 0;
          if (value_len == 0 || value_len > 15 || !all_digits (value, value_len))
            return bad (req, 400, "Content-Length is not a number");
          for (size_t i = 0; i < value_len; i++)
            cl = cl * 10 + (uint64_t)(value[i] - '0');
          if (have_length && cl != req->content_length)
            return bad (req, 400, "the request has different Content-Length headers");
          have_length = true;
          req->content_length = cl;
        }
      else if (header_is (line, name_len, "Transfer-Encoding"))
        return bad (req, 411, "a request body needs a Content-Length (no Transfer-Encoding)");
      else if ((name_len > 6 && strncasecmp (line, "Proxy-", 6) == 0)
               || header_is (line, name_len, "Connection")
               || header_is (line, name_len, "Keep-Alive") || header_is (line, name_len, "Upgrade")
               || header_is (line, name_len, "TE"))
        keep = false;
      if (keep && !req->connect
          && (append (&out, &out_len, &size, line, n) < 0
              || append (&out, &out_len, &size, "\r\n", 2) < 0))
        {
          req->upstream_head = out;
          return bad (req, 500, "out of memory");
        }
      req->upstream_head = out;
      line = end + 2;
    }
  if (req->connect)
    return NSBOX_EGRESS_DONE;
  if (hosts == 0)
    return bad (req, 400, "the request has no Host header");
  if (append (&out, &out_len, &size, "Connection: close\r\n\r\n", 21) < 0)
    {
      req->upstream_head = out;
      return bad (req, 500, "out of memory");
    }
  req->upstream_head = out;
  req->upstream_head_len = out_len;
  return NSBOX_EGRESS_DONE;
}

void
nsbox_egress_request_clear (struct nsbox_egress_request *req)
{
  free (req->upstream_head);
  req->upstream_head = NULL;
  req->upstream_head_len = 0;
}

/* ---- the TLS ClientHello ---- */

#define TLS_HANDSHAKE 0x16
#define TLS_CLIENT_HELLO 1
#define TLS_RECORD_MAX (16384 + 2048)
#define EXT_SERVER_NAME 0x0000
#define EXT_ECH 0xfe0d

static uint32_t
be (const uint8_t *p, int n)
{
  uint32_t v = 0;
  for (int i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

/* The extensions of a whole ClientHello body. */
static enum nsbox_egress_parse
hello_body (const uint8_t *p, size_t n, char sni[NSBOX_EGRESS_HOST_MAX + 1], const char **reason)
{
  static const char malformed[] = "the TLS ClientHello is malformed";
  size_t at = 2 + 32; /* legacy_version, random */
  if (at + 1 > n || at + 1 + p[at] > n || p[at] > 32)
    return (*reason = malformed, NSBOX_EGRESS_BAD);
  at += 1 + p[at];
  if (at + 2 > n)
    return (*reason = malformed, NSBOX_EGRESS_BAD);
  size_t suites = be (p + at, 2);
  if (suites < 2 || suites % 2 || at + 2 + suites > n)
    return (*reason = malformed, NSBOX_EGRESS_BAD);
  at += 2 + suites;
  if (at + 1 > n || p[at] < 1 || at + 1 + p[at] > n)
    return (*reason = malformed, NSBOX_EGRESS_BAD);
  at += 1 + p[at];
  if (at + 2 > n || at + 2 + be (p + at, 2) != n)
    return (*reason = malformed, NSBOX_EGRESS_BAD);
  at += 2;
  bool found = false;
  while (at < n)
    {
      if (at + 4 > n)
        return (*reason = malformed, NSBOX_EGRESS_BAD);
      uint32_t type = be (p + at, 2), len = be (p + at + 2, 2);
      const uint8_t *ext = p + at + 4;
      if (at + 4 + len > n)
        return (*reason = malformed, NSBOX_EGRESS_BAD);
      at += 4 + len;
      if (type == EXT_ECH)
        return (*reason = "an encrypted ClientHello (ECH) hides the server name", NSBOX_EGRESS_BAD);
      if (type != EXT_SERVER_NAME)
        continue;
      if (found)
        return (*reason = "the TLS ClientHello names several servers", NSBOX_EGRESS_BAD);
      if (len < 2 || be (ext, 2) != len - 2)
        return (*reason = malformed, NSBOX_EGRESS_BAD);
      for (size_t e = 2; e < len;)
        {
          if (e + 3 > len || e + 3 + be (ext + e + 1, 2) > len)
            return (*reason = malformed, NSBOX_EGRESS_BAD);
          size_t name_len = be (ext + e + 1, 2);
          if (ext[e] == 0)
            {
              if (found)
                return (*reason = "the TLS ClientHello names several servers", NSBOX_EGRESS_BAD);
              if (nsbox_egress_host_normalize ((const char *)ext + e + 3, name_len, sni))
                return (*reason = "the TLS server name (SNI) is not a host name", NSBOX_EGRESS_BAD);
              found = true;
            }
          e += 3 + name_len;
        }
    }
  if (!found)
    return (*reason = "the TLS ClientHello has no server name (SNI)", NSBOX_EGRESS_BAD);
  return NSBOX_EGRESS_DONE;
}

enum nsbox_egress_parse
nsbox_egress_client_hello (const uint8_t *data, size_t len, char sni[NSBOX_EGRESS_HOST_MAX + 1],
                           const char **reason)
{
  static const char not_tls[] = "not a TLS ClientHello";
  sni[0] = '\0';
  *reason = NULL;
  if (len >= 1 && data[0] != TLS_HANDSHAKE)
    return (*reason = not_tls, NSBOX_EGRESS_BAD);
  /* The handshake bytes of the records so far, gathered. */
  uint8_t *hs = NULL;
  size_t hs_len = 0, at = 0;
  int records = 0;
  enum nsbox_egress_parse ret = NSBOX_EGRESS_MORE;
  while (at + 5 <= len)
    {
      /* Real clients use one record, or a few; a hello dribbled out a byte
       * per record would cost the proxy more than the sender. */
      if (++records > NSBOX_EGRESS_HELLO_RECORDS_MAX)
        {
          *reason = "the TLS ClientHello is split into too many records";
          ret = NSBOX_EGRESS_BAD;
          break;
        }
      const uint8_t *rec = data + at;
      size_t n = be (rec + 3, 2);
      if (rec[0] != TLS_HANDSHAKE || rec[1] != 3 || n == 0 || n > TLS_RECORD_MAX)
        {
          *reason = not_tls;
          ret = NSBOX_EGRESS_BAD;
          break;
        }
      if (at + 5 + n > len)
        break;
      if (hs_len + n > NSBOX_EGRESS_HELLO_MAX + 4)
        {
          *reason = "the TLS ClientHello is too large";
          ret = NSBOX_EGRESS_BAD;
          break;
        }
      uint8_t *grown = realloc (hs, hs_len + n);
      if (!grown)
        {
          *reason = "out of memory";
          ret = NSBOX_EGRESS_BAD;
          break;
        }
      hs = grown;
      memcpy (hs + hs_len, rec + 5, n);
      hs_len += n;
      at += 5 + n;
      if (hs_len >= 4)
        {
          size_t body = be (hs + 1, 3);
          if (hs[0] != TLS_CLIENT_HELLO)
            {
              *reason = not_tls;
              ret = NSBOX_EGRESS_BAD;
              break;
            }
          if (body > NSBOX_EGRESS_HELLO_MAX)
            {
              *reason = "the TLS ClientHello is too large";
              ret = NSBOX_EGRESS_BAD;
              break;
            }
          if (hs_len >= 4 + body)
            {
              ret = hello_body (hs + 4, body, sni, reason);
              break;
            }
        }
    }
  if (ret == NSBOX_EGRESS_MORE && len >= 3 && data[1] != 3)
    {
      *reason = not_tls;
      ret = NSBOX_EGRESS_BAD;
    }
  free (hs);
  if (ret != NSBOX_EGRESS_DONE)
    sni[0] = '\0';
  return ret;
}
