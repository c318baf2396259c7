/* Controlled egress, the proxy request head: HTTP CONNECT or
 * absolute-form HTTP, parsed and checked. Pure functions on bytes; see
 * egress.h. */
#include "egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
      if (n == 0 || n > 5 || !nsbox_egress_all_digits (colon + 1, n))
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
  if (why == nsbox_egress_an_address)
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
          if (value_len == 0 || value_len > 15 || !nsbox_egress_all_digits (value, value_len))
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
