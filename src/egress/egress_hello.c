/* Controlled egress, the TLS ClientHello of a CONNECT: its server name,
 * read without decrypting anything. Pure functions on bytes; see egress.h. */
#include "egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
