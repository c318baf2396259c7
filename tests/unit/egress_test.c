/* The egress policy's pure functions (egress.h): host names, allowlist
 * patterns, pins, refused addresses, the proxy's request head and the TLS
 * ClientHello. Every input is handed over in a heap buffer of exactly its
 * length, so a read past `len` is a read past the allocation (caught by
 * make SANITIZE=1 check). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress.h"

/* ---- helpers ---- */

static void *
copy_exact (const void *data, size_t len)
{
  void *copy = malloc (len ? len : 1);
  cr_assert_not_null (copy);
  if (len)
    memcpy (copy, data, len);
  return copy;
}

/* `len` bytes of `data`, escaped for a message. One buffer: use it once per
 * message. */
static const char *
shown (const void *data, size_t len)
{
  static char buf[1024];
  const unsigned char *bytes = data;
  size_t n = 0;
  for (size_t i = 0; i < len && n + 8 < sizeof buf; i++)
    {
      unsigned char c = bytes[i];
      if (c == '\r')
        n += (size_t)snprintf (buf + n, sizeof buf - n, "\\r");
      else if (c == '\n')
        n += (size_t)snprintf (buf + n, sizeof buf - n, "\\n");
      else if (c < 0x20 || c >= 0x7f || c == '\\')
        n += (size_t)snprintf (buf + n, sizeof buf - n, "\\x%02x", c);
      else
        buf[n++] = (char)c;
    }
  buf[n] = '\0';
  return buf;
}

/* A tiny generator of our own: the same sequence on every libc. */
static uint64_t
next_random (uint64_t *state)
{
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

/* ---- host names ---- */

static const char *
host_normalize (const char *text, size_t len, char out[NSBOX_EGRESS_HOST_MAX + 1])
{
  char *copy = copy_exact (text, len);
  const char *why = nsbox_egress_host_normalize (copy, len, out);
  free (copy);
  return why;
}

static void
expect_host (const char *text, const char *expected)
{
  char out[NSBOX_EGRESS_HOST_MAX + 1];
  const char *why = host_normalize (text, strlen (text), out);
  cr_expect_null (why, "'%s' refused: %s", text, why);
  if (!why)
    cr_expect_str_eq (out, expected, "'%s' normalised to '%s', not '%s'", text, out, expected);
}

static void
expect_host_refused_len (const char *text, size_t len, const char *reason)
{
  char out[NSBOX_EGRESS_HOST_MAX + 1];
  const char *why = host_normalize (text, len, out);
  cr_expect_not_null (why, "'%s' accepted as '%s'", shown (text, len), out);
  if (why && reason)
    cr_expect_str_eq (why, reason, "'%s': '%s', not '%s'", shown (text, len), why, reason);
}

static void
expect_host_refused (const char *text, const char *reason)
{
  expect_host_refused_len (text, strlen (text), reason);
}

#define NOT_A_NAME "not a valid host name"
#define AN_IP "an IP address"

/* A name of `len` bytes: labels of 63 letters (a, b, c, ...) joined by dots,
 * the last one shorter. */
static void
long_name (char *buf, size_t len)
{
  size_t n = 0;
  char letter = 'a';
  while (n < len)
    {
      if (n > 0)
        buf[n++] = '.';
      for (size_t i = 0; i < 63 && n < len; i++)
        buf[n++] = letter;
      letter++;
    }
  buf[n] = '\0';
}

Test (egress, host_is_lower_cased_without_its_final_dot, .timeout = 10)
{
  expect_host ("pypi.org", "pypi.org");
  expect_host ("PyPI.ORG", "pypi.org");
  expect_host ("files.pythonhosted.org.", "files.pythonhosted.org");
  expect_host ("Files.PythonHosted.Org.", "files.pythonhosted.org");
  expect_host ("localhost", "localhost");
  expect_host ("XN--Bcher-KVA.example", "xn--bcher-kva.example");
  expect_host ("xn--80ak6aa92e.com", "xn--80ak6aa92e.com");
  expect_host ("a-b.c--d.example-1.com", "a-b.c--d.example-1.com");
  expect_host ("123.example.com", "123.example.com");
  expect_host ("1e100.net", "1e100.net");
  expect_host ("0x7f.example.com", "0x7f.example.com");
  expect_host ("1.2.3.4.nip.io", "1.2.3.4.nip.io");
  expect_host ("a", "a");
  expect_host ("x1", "x1");
}

Test (egress, host_label_may_not_begin_or_end_with_a_hyphen, .timeout = 10)
{
  expect_host_refused ("-pypi.org", NOT_A_NAME);
  expect_host_refused ("pypi-.org", NOT_A_NAME);
  expect_host_refused ("pypi.-org", NOT_A_NAME);
  expect_host_refused ("pypi.org-", NOT_A_NAME);
  expect_host_refused ("-", NOT_A_NAME);
}

Test (egress, host_of_63_byte_labels_and_253_bytes_is_the_longest, .timeout = 10)
{
  char name[512], expected[512];
  memset (name, 'a', 63);
  strcpy (name + 63, ".com");
  expect_host (name, name);
  memset (name, 'a', 64);
  strcpy (name + 64, ".com");
  expect_host_refused (name, NOT_A_NAME);
  memset (name, 'a', 300);
  name[300] = '\0';
  expect_host_refused (name, NOT_A_NAME);

  long_name (name, 253);
  cr_assert_eq (strlen (name), 253);
  expect_host (name, name);
  /* With its final dot it is still 253 bytes of name. */
  strcpy (expected, name);
  strcat (name, ".");
  expect_host (name, expected);
  long_name (name, 254);
  expect_host_refused (name, NOT_A_NAME);
  strcat (name, ".");
  expect_host_refused (name, NOT_A_NAME);
  long_name (name, 400);
  expect_host_refused (name, NOT_A_NAME);
}

Test (egress, host_with_an_empty_label_is_refused, .timeout = 10)
{
  expect_host_refused ("", NOT_A_NAME);
  expect_host_refused (".", NOT_A_NAME);
  expect_host_refused ("..", NOT_A_NAME);
  expect_host_refused ("a..b", NOT_A_NAME);
  expect_host_refused (".a", NOT_A_NAME);
  expect_host_refused ("a..", NOT_A_NAME);
  expect_host_refused ("pypi.org..", NOT_A_NAME);
}

Test (egress, host_with_other_characters_is_refused, .timeout = 10)
{
  const char *names[] = {
    "py_pi.org",         "pypi%2eorg", "user@pypi.org", "pypi.org ",  " pypi.org",  "py pi.org",
    "pypi.org:443",      "pypi.org/",  "pypi.org\\",    "pypi.org\t", "pypi.org\r", "pypi.org\n",
    "m\xc3\xbcnchen.de", "*.pypi.org", "pypi.org#",     "pypi.org?a", "[pypi.org]",
  };
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    expect_host_refused (names[i], NOT_A_NAME);
  /* A NUL inside the length is a character like any other. */
  expect_host_refused_len ("pypi\0org", 8, NOT_A_NAME);
  expect_host_refused_len ("pypi.org\0", 9, NOT_A_NAME);
  expect_host_refused_len ("\0", 1, NOT_A_NAME);
}

Test (egress, host_is_read_only_within_its_length, .timeout = 10)
{
  char out[NSBOX_EGRESS_HOST_MAX + 1];
  const char *text = "pypi.org:443";
  cr_expect_null (host_normalize (text, 8, out));
  cr_expect_str_eq (out, "pypi.org");
  /* No NUL anywhere in the buffer. */
  static const char unterminated[8] = { 'P', 'y', 'P', 'I', '.', 'o', 'r', 'g' };
  cr_expect_null (nsbox_egress_host_normalize (unterminated, sizeof unterminated, out));
  cr_expect_str_eq (out, "pypi.org");
  text = "127.0.0.1 is not pypi.org";
  const char *why = host_normalize (text, 9, out);
  cr_expect (why && strcmp (why, AN_IP) == 0, "'127.0.0.1' of a longer buffer: %s",
             why ? why : "accepted");
  why = host_normalize ("", 0, out);
  cr_expect (why && strcmp (why, NOT_A_NAME) == 0, "empty: %s", why ? why : "accepted");
}

Test (egress, ip_address_in_every_disguise_is_an_ip_address, .timeout = 10)
{
  const char *addresses[] = {
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f.1",
    "0X7F.0.0.1",
    "0x7f000001",
    "017700000001",
    "0177.0.0.1",
    "127.0.0.1.",
    "1.2.3.4",
    "8.8.8.8",
    "0",
    "4294967295",
    "169.254.169.254",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[fd00:ec2::254]",
    "::1",
    "::ffff:127.0.0.1",
    "fe80::1",
    "foo.123",
    "foo.0x1f",
    "foo.0X1F",
    "a.b.c.4294967296",
    "1.2.3.4.5",
  };
  for (size_t i = 0; i < sizeof addresses / sizeof *addresses; i++)
    expect_host_refused (addresses[i], AN_IP);
  expect_host_refused ("[::1", NULL);
  expect_host_refused ("fe80::1%eth0", NULL);
}

/* ---- patterns ---- */

static void
expect_pattern (const char *text, const char *expected)
{
  char out[NSBOX_EGRESS_HOST_MAX + 3];
  const char *why = nsbox_egress_pattern_normalize (text, out);
  cr_expect_null (why, "pattern '%s' refused: %s", text, why);
  if (!why)
    cr_expect_str_eq (out, expected, "pattern '%s' normalised to '%s', not '%s'", text, out,
                      expected);
}

static void
expect_pattern_refused (const char *text)
{
  char out[NSBOX_EGRESS_HOST_MAX + 3];
  const char *why = nsbox_egress_pattern_normalize (text, out);
  cr_expect_not_null (why, "pattern '%s' accepted as '%s'", shown (text, strlen (text)), out);
}

/* Whether host `host` matches the pattern `pattern`, both normalised first. */
static bool
matches (const char *pattern, const char *host)
{
  char p[NSBOX_EGRESS_HOST_MAX + 3], h[NSBOX_EGRESS_HOST_MAX + 1];
  const char *why = nsbox_egress_pattern_normalize (pattern, p);
  cr_assert_null (why, "pattern '%s': %s", pattern, why);
  why = host_normalize (host, strlen (host), h);
  cr_assert_null (why, "host '%s': %s", host, why);
  return nsbox_egress_pattern_match (p, h);
}

Test (egress, patterns_are_normalised_like_hosts, .timeout = 10)
{
  expect_pattern ("pypi.org", "pypi.org");
  expect_pattern ("PyPI.Org.", "pypi.org");
  expect_pattern ("*.Example.COM", "*.example.com");
  expect_pattern ("*.example.com.", "*.example.com");
  expect_pattern ("*.xn--bcher-kva.example", "*.xn--bcher-kva.example");

  char text[512], expected[512];
  long_name (text + 2, 253);
  text[0] = '*';
  text[1] = '.';
  expect_pattern (text, text);
  long_name (expected, 253);
  expect_pattern (text + 2, expected);
  long_name (text + 2, 254);
  expect_pattern_refused (text);
}

Test (egress, bad_patterns_are_refused, .timeout = 10)
{
  const char *patterns[] = {
    "",         "*",           "*.",        ".",        "*..",     "a.*.com",   "**.a.com",
    "*a.com",   "a*.com",      "*.*.a.com", "a.com*",   "a.com.*", "*.1.2.3.4", "1.2.3.4",
    "127.1",    "*.127.0.0.1", "[::1]",     "*.[::1]",  "::1",     "*.foo.123", "* .a.com",
    "*.-a.com", "*.a_b.com",   "a..com",    "*..a.com", ".a.com",  "*.a.com ",  "*.a.com:443",
  };
  for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++)
    expect_pattern_refused (patterns[i]);
}

Test (egress, exact_pattern_matches_only_its_own_name, .timeout = 10)
{
  cr_expect (matches ("pypi.org", "pypi.org"));
  cr_expect (matches ("pypi.org", "PYPI.org."));
  cr_expect_not (matches ("pypi.org", "evil-pypi.org"));
  cr_expect_not (matches ("pypi.org", "evilpypi.org"));
  cr_expect_not (matches ("pypi.org", "x.pypi.org"));
  cr_expect_not (matches ("pypi.org", "pypi.org.evil.com"));
  cr_expect_not (matches ("pypi.org", "pypi.or"));
  cr_expect_not (matches ("pypi.org", "pypi.orgg"));
  cr_expect_not (matches ("pypi.org", "ypi.org"));
}

Test (egress, wildcard_pattern_matches_every_name_below_not_itself, .timeout = 10)
{
  cr_expect (matches ("*.example.com", "a.example.com"));
  cr_expect (matches ("*.example.com", "a.b.example.com"));
  cr_expect (matches ("*.Example.com", "A.EXAMPLE.COM."));
  cr_expect_not (matches ("*.example.com", "example.com"));
  cr_expect_not (matches ("*.example.com", "badexample.com"));
  cr_expect_not (matches ("*.example.com", "a.badexample.com"));
  cr_expect_not (matches ("*.example.com", "example.com.evil.org"));
  cr_expect_not (matches ("*.example.com", "a.example.co"));
  cr_expect_not (matches ("*.example.com", "com"));
  cr_expect_not (matches ("*.a.example.com", "a.example.com"));
  cr_expect_not (matches ("*.a.example.com", "b.example.com"));
  cr_expect (matches ("*.a.example.com", "b.a.example.com"));
}

/* ---- pins ---- */

static void
expect_pin (const char *text, const char *name, int family, const char *address)
{
  char out[NSBOX_EGRESS_HOST_MAX + 1];
  struct sockaddr_storage ss;
  memset (&ss, 0xa5, sizeof ss);
  const char *why = nsbox_egress_pin_parse (text, out, &ss);
  cr_assert_null (why, "pin '%s' refused: %s", text, why);
  cr_expect_str_eq (out, name, "pin '%s': name '%s'", text, out);
  cr_assert_eq (ss.ss_family, family, "pin '%s': family %d", text, ss.ss_family);
  if (family == AF_INET)
    {
      const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;
      struct in_addr want;
      cr_assert_eq (inet_pton (AF_INET, address, &want), 1);
      cr_expect_eq (sin->sin_addr.s_addr, want.s_addr, "pin '%s': wrong address", text);
      cr_expect_eq (sin->sin_port, 0, "pin '%s': port %d", text, ntohs (sin->sin_port));
    }
  else
    {
      const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;
      struct in6_addr want;
      cr_assert_eq (inet_pton (AF_INET6, address, &want), 1);
      cr_expect (memcmp (&sin6->sin6_addr, &want, sizeof want) == 0, "pin '%s': wrong address",
                 text);
      cr_expect_eq (sin6->sin6_port, 0, "pin '%s': port %d", text, ntohs (sin6->sin6_port));
    }
}

static void
expect_pin_refused (const char *text)
{
  char out[NSBOX_EGRESS_HOST_MAX + 1];
  struct sockaddr_storage ss;
  const char *why = nsbox_egress_pin_parse (text, out, &ss);
  cr_expect_not_null (why, "pin '%s' accepted", shown (text, strlen (text)));
}

Test (egress, pin_names_a_host_and_an_address_without_a_port, .timeout = 10)
{
  expect_pin ("mirror.internal=10.1.2.3", "mirror.internal", AF_INET, "10.1.2.3");
  expect_pin ("Mirror.Internal.=192.168.0.10", "mirror.internal", AF_INET, "192.168.0.10");
  expect_pin ("v6.test=[fd00::1]", "v6.test", AF_INET6, "fd00::1");
  expect_pin ("v6.test=fd00::1", "v6.test", AF_INET6, "fd00::1");
  expect_pin ("pypi.org=151.101.0.223", "pypi.org", AF_INET, "151.101.0.223");
}

Test (egress, bad_pins_are_refused, .timeout = 10)
{
  const char *pins[] = {
    "mirror.internal",
    "mirror.internal10.1.2.3",
    "=10.1.2.3",
    "mirror.internal=",
    "=",
    "10.0.0.1=10.0.0.1",
    "127.1=10.0.0.1",
    "[::1]=10.0.0.1",
    "mirror..internal=10.1.2.3",
    "mirror_internal=10.1.2.3",
    "mirror.internal=10.1.2",
    "mirror.internal=999.1.1.1",
    "mirror.internal=mirror",
    "mirror.internal=0x0a.1.2.3",
    "mirror.internal=167838211",
    "mirror.internal=10.1.2.3x",
    "mirror.internal=10.1.2.3 ",
    "mirror.internal= 10.1.2.3",
    "mirror.internal =10.1.2.3",
    "mirror.internal=10.1.2.3:80",
    "mirror.internal=10.1.2.3=10.1.2.4",
    "mirror.internal=10.1.2.3/32",
    "v6.test=[fd00::1",
    "v6.test=fd00::1]",
    "v6.test=[fd00::1]x",
    "v6.test=[fd00::1]:443",
    "v6.test=[10.1.2.3]",
    "v6.test=fd00:::1",
    "v6.test=[]",
  };
  for (size_t i = 0; i < sizeof pins / sizeof *pins; i++)
    expect_pin_refused (pins[i]);
}

/* ---- addresses ---- */

static const char *
address_refused (const char *text)
{
  struct sockaddr_storage ss;
  memset (&ss, 0, sizeof ss);
  struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton (AF_INET, text, &sin->sin_addr) == 1)
    {
      sin->sin_family = AF_INET;
      sin->sin_port = htons (443);
    }
  else
    {
      cr_assert_eq (inet_pton (AF_INET6, text, &sin6->sin6_addr), 1, "'%s' is no address", text);
      sin6->sin6_family = AF_INET6;
      sin6->sin6_port = htons (443);
    }
  return nsbox_egress_address_refused ((const struct sockaddr *)&ss);
}

Test (egress, public_unicast_addresses_are_not_refused, .timeout = 10)
{
  const char *addresses[] = {
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "151.101.0.223",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.5.5.5",
    "2606:4700::1111",
    "2a00:1450:4001:82b::200e",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8",
  };
  for (size_t i = 0; i < sizeof addresses / sizeof *addresses; i++)
    {
      const char *why = address_refused (addresses[i]);
      cr_expect_null (why, "%s refused: %s", addresses[i], why);
    }
}

Test (egress, special_addresses_are_refused_and_say_why, .timeout = 10)
{
  /* NULL: the header names no one reason for it, any will do. */
  static const struct
  {
    const char *address;
    const char *reason;
  } cases[] = {
    { "0.0.0.0", NULL },
    { "0.1.2.3", NULL },
    { "10.0.0.1", "private" },
    { "10.255.255.255", "private" },
    { "100.64.0.1", "carrier-grade NAT" },
    { "100.127.255.255", "carrier-grade NAT" },
    { "127.0.0.1", "loopback" },
    { "127.255.255.254", "loopback" },
    { "169.254.169.254", "link-local" },
    { "169.254.0.1", "link-local" },
    { "172.16.0.1", "private" },
    { "172.31.255.255", "private" },
    { "192.168.1.1", "private" },
    { "192.0.0.1", NULL },
    { "192.0.2.1", "reserved" },
    { "198.51.100.7", "reserved" },
    { "203.0.113.9", "reserved" },
    { "198.18.0.1", "reserved" },
    { "198.19.255.255", "reserved" },
    { "224.0.0.1", "multicast" },
    { "239.255.255.250", "multicast" },
    { "240.0.0.1", NULL },
    { "255.255.255.255", NULL },
    { "::", NULL },
    { "::1", "loopback" },
    { "::ffff:127.0.0.1", "loopback" },
    { "::ffff:10.0.0.1", "private" },
    { "::ffff:169.254.169.254", "link-local" },
    { "::ffff:0.0.0.0", NULL },
    { "::127.0.0.1", NULL },
    { "64:ff9b::1.2.3.4", "NAT64" },
    { "64:ff9b::127.0.0.1", NULL },
    { "64:ff9b:1::1", NULL },
    { "fc00::1", "unique local" },
    { "fd00:ec2::254", "unique local" },
    { "fdff:ffff::1", "unique local" },
    { "fe80::1", "link-local" },
    { "febf:ffff::1", "link-local" },
    { "fec0::1", NULL },
    { "ff02::1", "multicast" },
    { "ff0e::1", "multicast" },
    { "2001:db8::1", "reserved" },
    { "2002:7f00:1::1", NULL },
    { "2001::1", NULL },
    { "100::1", NULL },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    {
      const char *why = address_refused (cases[i].address);
      cr_expect_not_null (why, "%s not refused", cases[i].address);
      /* The reason may go on with details: "reserved (documentation)". */
      size_t n = cases[i].reason ? strlen (cases[i].reason) : 0;
      if (why && n)
        cr_expect (strncmp (why, cases[i].reason, n) == 0 && (why[n] == '\0' || why[n] == ' '),
                   "%s refused as '%s', not '%s'", cases[i].address, why, cases[i].reason);
    }
}

Test (egress, address_of_another_family_is_refused, .timeout = 10)
{
  struct sockaddr_storage ss;
  memset (&ss, 0, sizeof ss);
  ss.ss_family = AF_UNIX;
  cr_expect_not_null (nsbox_egress_address_refused ((const struct sockaddr *)&ss));
  ss.ss_family = AF_UNSPEC;
  cr_expect_not_null (nsbox_egress_address_refused ((const struct sockaddr *)&ss));
}

/* ---- requests ---- */

static enum nsbox_egress_parse
parse (const char *text, size_t len, struct nsbox_egress_request *req)
{
  char *copy = copy_exact (text, len);
  enum nsbox_egress_parse r = nsbox_egress_parse_request (copy, len, req);
  free (copy);
  return r;
}

static bool
status_is_listed (int status)
{
  static const int listed[] = { 400, 403, 405, 411, 414, 431, 501 };
  for (size_t i = 0; i < sizeof listed / sizeof *listed; i++)
    if (status == listed[i])
      return true;
  return false;
}

/* The whole of `text` is one head: DONE. The caller clears `req`. */
static void
expect_done (const char *text, struct nsbox_egress_request *req)
{
  memset (req, 0, sizeof *req);
  size_t len = strlen (text);
  enum nsbox_egress_parse r = parse (text, len, req);
  cr_assert_eq (r, NSBOX_EGRESS_DONE, "'%s': %d (%d %s)", shown (text, len), r, req->status,
                req->reason ? req->reason : "");
}

/* `len` bytes of `text` are refused: with `status` unless 0, with a reason
 * containing `reason_part` unless NULL. */
static void
expect_bad_len (const char *text, size_t len, int status, const char *reason_part)
{
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  enum nsbox_egress_parse r = parse (text, len, &req);
  cr_expect_eq (r, NSBOX_EGRESS_BAD, "'%s': %d, not BAD", shown (text, len), r);
  if (r == NSBOX_EGRESS_DONE)
    nsbox_egress_request_clear (&req);
  if (r != NSBOX_EGRESS_BAD)
    return;
  cr_expect_not_null (req.reason, "'%s': BAD without a reason", shown (text, len));
  if (status)
    cr_expect_eq (req.status, status, "'%s': status %d (%s), not %d", shown (text, len), req.status,
                  req.reason ? req.reason : "", status);
  else
    cr_expect (status_is_listed (req.status), "'%s': status %d", shown (text, len), req.status);
  if (reason_part && req.reason)
    cr_expect (strcasestr (req.reason, reason_part), "'%s': reason '%s' without '%s'",
               shown (text, len), req.reason, reason_part);
}

static void
expect_bad (const char *text, int status, const char *reason_part)
{
  expect_bad_len (text, strlen (text), status, reason_part);
}

/* How many header lines of `head` are named `name` (any case). */
static int
count_headers (const char *head, const char *name)
{
  int count = 0;
  size_t name_len = strlen (name);
  for (const char *line = strstr (head, "\r\n"); line; line = strstr (line + 2, "\r\n"))
    if (strncasecmp (line + 2, name, name_len) == 0 && line[2 + name_len] == ':')
      count++;
  return count;
}

/* A head to send upstream is one complete head and nothing else. */
static void
expect_one_head (const struct nsbox_egress_request *req)
{
  cr_assert_not_null (req->upstream_head);
  cr_expect_eq (req->upstream_head_len, strlen (req->upstream_head));
  const char *end = strstr (req->upstream_head, "\r\n\r\n");
  cr_expect (end && (size_t)(end + 4 - req->upstream_head) == req->upstream_head_len,
             "upstream head: '%s'", shown (req->upstream_head, req->upstream_head_len));
  for (size_t i = 0; i < req->upstream_head_len; i++)
    {
      char c = req->upstream_head[i];
      bool crlf = c == '\r' ? req->upstream_head[i + 1] == '\n'
                            : c != '\n' || (i > 0 && req->upstream_head[i - 1] == '\r');
      cr_expect (crlf, "bare CR or LF at %zu of '%s'", i,
                 shown (req->upstream_head, req->upstream_head_len));
      /* A line folded onto the one before (obs-fold) is not forwarded. */
      bool folded
          = c == '\n' && (req->upstream_head[i + 1] == ' ' || req->upstream_head[i + 1] == '\t');
      cr_expect_not (folded, "folded line at %zu of '%s'", i,
                     shown (req->upstream_head, req->upstream_head_len));
    }
}

#define CONNECT_PYPI "CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n"
#define GET_EXAMPLE                                                                                \
  "GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nProxy-Connection: keep-alive\r\n"   \
  "User-Agent: x\r\n\r\n"

Test (egress, connect_names_its_host_and_port_and_the_whole_head, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done (CONNECT_PYPI, &req);
  cr_expect (req.connect);
  cr_expect_str_eq (req.host, "pypi.org");
  cr_expect_eq (req.port, 443);
  cr_expect_eq (req.head_len, strlen (CONNECT_PYPI));
  nsbox_egress_request_clear (&req);
}

Test (egress, connect_as_python_http_client_sends_it_is_done, .timeout = 10)
{
  /* What http.client's tunnel (urllib, pip's urllib3) sends: HTTP/1.0 and
   * no Host header. */
  static const char text[] = "CONNECT files.pythonhosted.org:443 HTTP/1.0\r\n\r\n";
  struct nsbox_egress_request req;
  expect_done (text, &req);
  cr_expect (req.connect);
  cr_expect_str_eq (req.host, "files.pythonhosted.org");
  cr_expect_eq (req.port, 443);
  cr_expect_eq (req.head_len, strlen (text));
  nsbox_egress_request_clear (&req);
}

Test (egress, connect_head_ends_at_its_blank_line, .timeout = 10)
{
  /* A client may send its ClientHello right behind the CONNECT. */
  static const char text[] = CONNECT_PYPI "\x16\x03\x01\x02\x00\x01";
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  cr_assert_eq (parse (text, sizeof text - 1, &req), NSBOX_EGRESS_DONE);
  cr_expect_eq (req.head_len, strlen (CONNECT_PYPI));
  cr_expect_str_eq (req.host, "pypi.org");
  nsbox_egress_request_clear (&req);
}

Test (egress, connect_host_is_normalised, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done ("CONNECT PyPI.Org.:8443 HTTP/1.1\r\n\r\n", &req);
  cr_expect_str_eq (req.host, "pypi.org");
  cr_expect_eq (req.port, 8443);
  nsbox_egress_request_clear (&req);
}

/* Every proper prefix of `text` (one complete head, perhaps with a body
 * behind it of `body_len` bytes) is MORE, on the same request as a caller
 * would keep it; the whole is DONE. */
static void
expect_every_prefix_more (const char *text, size_t body_len)
{
  size_t len = strlen (text);
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  for (size_t n = 0; n < len - body_len; n++)
    {
      enum nsbox_egress_parse r = parse (text, n, &req);
      cr_assert_eq (r, NSBOX_EGRESS_MORE, "%zu bytes of '%s': %d (%d %s)", n, shown (text, len), r,
                    req.status, req.reason ? req.reason : "");
    }
  for (size_t n = len - body_len; n <= len; n++)
    {
      enum nsbox_egress_parse r = parse (text, n, &req);
      cr_assert_eq (r, NSBOX_EGRESS_DONE, "%zu bytes of '%s': %d (%d %s)", n, shown (text, len), r,
                    req.status, req.reason ? req.reason : "");
      cr_expect_eq (req.head_len, len - body_len);
      nsbox_egress_request_clear (&req);
      memset (&req, 0, sizeof req);
    }
}

Test (egress, every_prefix_of_a_head_is_more, .timeout = 10)
{
  expect_every_prefix_more (CONNECT_PYPI, 0);
  expect_every_prefix_more ("CONNECT pypi.org:443 HTTP/1.0\r\n\r\n", 0);
  expect_every_prefix_more (GET_EXAMPLE, 0);
  expect_every_prefix_more ("POST http://example.com/x HTTP/1.1\r\nHost: example.com\r\n"
                            "Content-Length: 5\r\n\r\nhello",
                            5);
}

Test (egress, connect_to_an_ip_address_is_forbidden, .timeout = 10)
{
  const char *targets[] = {
    "127.0.0.1:443",
    "[::1]:443",
    "[::ffff:127.0.0.1]:443",
    "2130706433:443",
    "0x7f.1:443",
    "0177.0.0.1:443",
    "127.1:443",
    "169.254.169.254:80",
    "8.8.8.8:443",
    "[2606:4700::1111]:443",
    "foo.123:443",
  };
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
    {
      char text[256];
      snprintf (text, sizeof text, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", targets[i],
                targets[i]);
      expect_bad (text, 403, "IP address");
    }
}

Test (egress, connect_without_a_port_or_with_a_bad_one_is_bad, .timeout = 10)
{
  const char *targets[] = {
    "pypi.org",       "pypi.org:",     "pypi.org:65536",   "pypi.org:65979",      "pypi.org:99999",
    "pypi.org:-1",    "pypi.org:+443", "pypi.org:443x",    "pypi.org:443/",       "pypi.org: 443",
    "pypi.org:0x1bb", ":443",          "pypi.org:443:443", "pypi.org:4294967739",
  };
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
    {
      char text[256];
      snprintf (text, sizeof text, "CONNECT %s HTTP/1.1\r\n\r\n", targets[i]);
      expect_bad (text, 0, NULL);
    }
}

Test (egress, connect_to_a_bad_name_is_bad, .timeout = 10)
{
  const char *targets[] = {
    "evil.com@pypi.org:443", "user:pw@pypi.org:443", "py_pi.org:443",       "a..b:443",
    "pypi.org%00:443",       "-pypi.org:443",        "http://pypi.org:443", "pypi.org/x:443",
  };
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
    {
      char text[256];
      snprintf (text, sizeof text, "CONNECT %s HTTP/1.1\r\n\r\n", targets[i]);
      expect_bad (text, 0, NULL);
    }
}

Test (egress, absolute_form_becomes_origin_form_with_connection_close, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done (GET_EXAMPLE, &req);
  cr_expect_not (req.connect);
  cr_expect_str_eq (req.host, "example.com");
  cr_expect_eq (req.port, 80);
  cr_expect_eq (req.head_len, strlen (GET_EXAMPLE));
  cr_expect_eq (req.content_length, 0);
  expect_one_head (&req);
  const char *up = req.upstream_head;
  cr_expect (strncmp (up, "GET /a?b HTTP/1.1\r\n", 19) == 0, "upstream: '%s'",
             shown (up, strlen (up)));
  cr_expect (strstr (up, "\r\nHost: example.com\r\n"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect (strstr (up, "\r\nUser-Agent: x\r\n"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect (strstr (up, "\r\nConnection: close\r\n"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_eq (count_headers (up, "Connection"), 1, "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_null (strcasestr (up, "Proxy-"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_null (strcasestr (up, "keep-alive"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_null (strstr (up, "http://"), "upstream: '%s'", shown (up, strlen (up)));
  nsbox_egress_request_clear (&req);
}

Test (egress, absolute_form_keeps_its_port, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done ("GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", &req);
  cr_expect_not (req.connect);
  cr_expect_str_eq (req.host, "example.com");
  cr_expect_eq (req.port, 8080);
  expect_one_head (&req);
  cr_expect (strncmp (req.upstream_head, "GET / HTTP/1.1\r\n", 16) == 0, "upstream: '%s'",
             shown (req.upstream_head, req.upstream_head_len));
  cr_expect (strstr (req.upstream_head, "\r\nHost: example.com:8080\r\n"), "upstream: '%s'",
             shown (req.upstream_head, req.upstream_head_len));
  nsbox_egress_request_clear (&req);
}

Test (egress, absolute_form_without_a_path_asks_for_the_root, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done ("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", &req);
  cr_expect_eq (req.port, 80);
  expect_one_head (&req);
  cr_expect (strncmp (req.upstream_head, "GET / HTTP/1.1\r\n", 16) == 0, "upstream: '%s'",
             shown (req.upstream_head, req.upstream_head_len));
  nsbox_egress_request_clear (&req);
}

Test (egress, proxy_and_connection_headers_stay_with_the_proxy, .timeout = 10)
{
  static const char text[] = "GET http://example.com/x HTTP/1.1\r\n"
                             "Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"
                             "Host: example.com\r\n"
                             "Connection: keep-alive, Upgrade\r\n"
                             "Accept: */*\r\n"
                             "proxy-connection: keep-alive\r\n"
                             "CONNECTION: close\r\n"
                             "X-Mine: 1\r\n"
                             "\r\n";
  struct nsbox_egress_request req;
  expect_done (text, &req);
  expect_one_head (&req);
  const char *up = req.upstream_head;
  cr_expect_null (strcasestr (up, "proxy-"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_null (strstr (up, "dXNlcjpwYXNz"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_null (strcasestr (up, "upgrade"), "upstream: '%s'", shown (up, strlen (up)));
  cr_expect_eq (count_headers (up, "connection"), 1, "upstream: '%s'", shown (up, strlen (up)));
  cr_expect (strstr (up, "\r\nConnection: close\r\n"), "upstream: '%s'", shown (up, strlen (up)));
  /* The others in their order. */
  const char *host = strstr (up, "\r\nHost: example.com\r\n");
  const char *accept = strstr (up, "\r\nAccept: */*\r\n");
  const char *mine = strstr (up, "\r\nX-Mine: 1\r\n");
  cr_expect (host && accept && mine && host < accept && accept < mine, "upstream: '%s'",
             shown (up, strlen (up)));
  nsbox_egress_request_clear (&req);
}

Test (egress, python_clients_plain_requests_are_done, .timeout = 10)
{
  /* What urllib.request and pip's requests (Python 3.11) send through a
   * proxy, and the request line that goes upstream. */
  static const struct
  {
    const char *text;
    const char *line;
  } cases[] = {
    { "GET http://example.com/a?b HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: example.com\r\n"
      "User-Agent: Python-urllib/3.11\r\nConnection: close\r\n\r\n",
      "GET /a?b HTTP/1.1\r\n" },
    { "GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nUser-Agent: "
      "python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: "
      "keep-alive\r\n\r\n",
      "GET /a?b HTTP/1.1\r\n" },
    /* urlopen ("http://example.com?a=b"): a query, no path. */
    { "GET http://example.com?a=b HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: example.com\r\n"
      "User-Agent: Python-urllib/3.11\r\nConnection: close\r\n\r\n",
      "GET /?a=b HTTP/1.1\r\n" },
    /* urlopen ("http://Example.COM:80"): the default port said, in the Host
     * header too. */
    { "GET http://Example.COM:80 HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: Example.COM:80\r\n"
      "User-Agent: Python-urllib/3.11\r\nConnection: close\r\n\r\n",
      "GET / HTTP/1.1\r\n" },
    { "GET http://example.com:80/ HTTP/1.1\r\nHost: example.com:80\r\nUser-Agent: "
      "python-requests/2.31.0\r\nAccept-Encoding: gzip, deflate\r\nAccept: */*\r\nConnection: "
      "keep-alive\r\n\r\n",
      "GET / HTTP/1.1\r\n" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    {
      const char *text = cases[i].text;
      struct nsbox_egress_request req;
      memset (&req, 0, sizeof req);
      enum nsbox_egress_parse r = parse (text, strlen (text), &req);
      cr_expect_eq (r, NSBOX_EGRESS_DONE, "'%s': %d (%d %s)", shown (text, strlen (text)), r,
                    req.status, req.reason ? req.reason : "");
      if (r != NSBOX_EGRESS_DONE)
        continue;
      cr_expect_not (req.connect);
      cr_expect_str_eq (req.host, "example.com");
      cr_expect_eq (req.port, 80);
      expect_one_head (&req);
      cr_expect (strncmp (req.upstream_head, cases[i].line, strlen (cases[i].line)) == 0,
                 "upstream: '%s'", shown (req.upstream_head, req.upstream_head_len));
      cr_expect_eq (count_headers (req.upstream_head, "Connection"), 1);
      cr_expect (strstr (req.upstream_head, "\r\nConnection: close\r\n"));
      nsbox_egress_request_clear (&req);
    }
}

Test (egress, post_body_is_sized_by_content_length, .timeout = 10)
{
  static const char head[] = "POST http://example.com/x HTTP/1.1\r\nHost: example.com\r\n"
                             "Content-Length: 5\r\n\r\n";
  static const char text[] = "POST http://example.com/x HTTP/1.1\r\nHost: example.com\r\n"
                             "Content-Length: 5\r\n\r\nhello";
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  cr_assert_eq (parse (text, sizeof text - 1, &req), NSBOX_EGRESS_DONE);
  cr_expect_eq (req.head_len, sizeof head - 1);
  cr_expect_eq (req.content_length, 5);
  expect_one_head (&req);
  cr_expect (strncmp (req.upstream_head, "POST /x HTTP/1.1\r\n", 18) == 0);
  cr_expect (strstr (req.upstream_head, "\r\nContent-Length: 5\r\n"));
  nsbox_egress_request_clear (&req);

  expect_done ("POST http://example.com/x HTTP/1.1\r\nHost: example.com\r\n"
               "content-length: 12345678901\r\n\r\n",
               &req);
  cr_expect_eq (req.content_length, 12345678901ULL);
  nsbox_egress_request_clear (&req);
}

Test (egress, host_header_other_than_the_target_is_bad, .timeout = 10)
{
  const char *hosts[] = {
    "evil.com",
    "www.example.com",
    "example.com.evil.com",
    "xexample.com",
    "example.co",
    "",
    "example.com, evil.com",
    "example.com evil.com",
    "example.com:8080",
    "127.0.0.1",
    "example.com/",
  };
  for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++)
    {
      char text[256];
      snprintf (text, sizeof text, "GET http://example.com/ HTTP/1.1\r\nHost: %s\r\n\r\n",
                hosts[i]);
      expect_bad (text, 0, NULL);
    }
  expect_bad ("GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com:8081\r\n\r\n", 0, NULL);
}

Test (egress, host_header_compares_as_a_name, .timeout = 10)
{
  struct nsbox_egress_request req;
  expect_done ("GET http://example.com/ HTTP/1.1\r\nhost: example.com\r\n\r\n", &req);
  nsbox_egress_request_clear (&req);
  expect_done ("GET http://Example.COM/ HTTP/1.1\r\nHOST: EXAMPLE.com\r\n\r\n", &req);
  cr_expect_str_eq (req.host, "example.com");
  nsbox_egress_request_clear (&req);
}

Test (egress, host_header_missing_or_repeated_is_bad, .timeout = 10)
{
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nUser-Agent: x\r\n\r\n", 0, NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nHost: example.com\r\n\r\n",
              0, NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nhost: evil.com\r\n\r\n", 0,
              NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: evil.com\r\nHost: example.com\r\n\r\n", 0,
              NULL);
}

Test (egress, body_not_sized_by_content_length_is_bad, .timeout = 10)
{
  expect_bad ("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Transfer-Encoding: chunked\r\n\r\n",
              411, NULL);
  expect_bad ("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "transfer-encoding: gzip, chunked\r\n\r\n",
              0, NULL);
  expect_bad ("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
              0, NULL);
  expect_bad ("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Transfer-Encoding: identity\r\n\r\n",
              0, NULL);
}

Test (egress, content_length_conflicting_or_malformed_is_bad, .timeout = 10)
{
  const char *values[] = {
    "5\r\nContent-Length: 6",
    "abc",
    "-1",
    "+5",
    "5 5",
    "5,6",
    "0x10",
    "",
    "5a",
    "99999999999999999999999",
    "18446744073709551616",
  };
  for (size_t i = 0; i < sizeof values / sizeof *values; i++)
    {
      char text[256];
      snprintf (text, sizeof text,
                "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\nContent-Length: "
                "%s\r\n\r\n",
                values[i]);
      expect_bad (text, 0, NULL);
    }
}

Test (egress, origin_form_and_other_schemes_are_bad, .timeout = 10)
{
  expect_bad ("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET /a?b HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("OPTIONS * HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET http:/example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET http:///a HTTP/1.1\r\nHost: example.com\r\n\r\n", 0, NULL);
}

Test (egress, userinfo_in_the_target_is_bad, .timeout = 10)
{
  const char *targets[] = {
    "http://user@example.com/",     "http://user:pw@example.com/",
    "http://example.com@evil.com/", "http://example.com:80@evil.com/",
    "http://@example.com/",
  };
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
    {
      char text[256];
      snprintf (text, sizeof text, "GET %s HTTP/1.1\r\nHost: example.com\r\n\r\n", targets[i]);
      expect_bad (text, 0, NULL);
    }
}

Test (egress, absolute_form_to_an_ip_address_is_forbidden, .timeout = 10)
{
  expect_bad ("GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 403, "IP address");
  expect_bad ("GET http://[::1]:8080/ HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 403, "IP address");
  expect_bad ("GET http://2130706433/ HTTP/1.1\r\nHost: 2130706433\r\n\r\n", 403, "IP address");
  expect_bad ("GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: 169.254.169.254\r\n"
              "\r\n",
              403, "IP address");
}

/* A request whose head is `len` bytes long: a Host header padded by an
 * X-Pad header, terminated unless `open`. */
static char *
padded_head (size_t len, bool open)
{
  static const char start[] = "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Pad: ";
  char *text = malloc (len + 1);
  cr_assert_not_null (text);
  size_t n = sizeof start - 1;
  memcpy (text, start, n);
  size_t tail = open ? 0 : 4;
  memset (text + n, 'a', len - n - tail);
  if (!open)
    memcpy (text + len - 4, "\r\n\r\n", 4);
  text[len] = '\0';
  return text;
}

Test (egress, head_of_the_maximum_length_is_done_one_more_is_431, .timeout = 10)
{
  struct nsbox_egress_request req;
  char *text = padded_head (NSBOX_EGRESS_HEAD_MAX, false);
  expect_done (text, &req);
  cr_expect_eq (req.head_len, NSBOX_EGRESS_HEAD_MAX);
  nsbox_egress_request_clear (&req);
  free (text);

  text = padded_head (NSBOX_EGRESS_HEAD_MAX + 1, false);
  expect_bad (text, 431, NULL);
  free (text);

  text = padded_head (NSBOX_EGRESS_HEAD_MAX + 1, true);
  expect_bad (text, 431, NULL);
  free (text);

  text = padded_head (4 * NSBOX_EGRESS_HEAD_MAX, true);
  expect_bad (text, 431, NULL);
  free (text);
}

Test (egress, request_line_beyond_the_maximum_is_bad, .timeout = 10)
{
  size_t len = NSBOX_EGRESS_HEAD_MAX + 100;
  char *text = malloc (len + 1);
  cr_assert_not_null (text);
  strcpy (text, "GET http://example.com/");
  memset (text + strlen (text), 'a', len - strlen (text));
  text[len] = '\0';
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  enum nsbox_egress_parse r = parse (text, len, &req);
  cr_expect_eq (r, NSBOX_EGRESS_BAD);
  if (r == NSBOX_EGRESS_BAD)
    cr_expect (req.status == 414 || req.status == 431, "status %d", req.status);
  free (text);
}

Test (egress, bytes_that_are_not_http_are_bad, .timeout = 10)
{
  /* The start of a ClientHello, as a client that skipped the CONNECT sends. */
  static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x18\xd0\x3f\xdf\x90";
  expect_bad_len (tls, sizeof tls - 1, 400, NULL);
  expect_bad ("SSH-2.0-OpenSSH_9.6\r\n", 400, NULL);
  expect_bad ("hello world\r\n", 400, NULL);
  expect_bad ("GET\r\n", 400, NULL);
  expect_bad_len ("\0\0\0\0\r\n", 6, 400, NULL);
  expect_bad ("{\"jsonrpc\": \"2.0\"}\r\n\r\n", 400, NULL);
}

Test (egress, bad_request_lines_are_bad, .timeout = 10)
{
  const char *lines[] = {
    "GET http://example.com/ HTTP/1.1 extra",
    "GET http://example.com/ HTTX/1.1",
    "GET http://example.com/",
    "GET http://exa mple.com/ HTTP/1.1",
    "GET http://example.com/a b HTTP/1.1",
    "G\x01T http://example.com/ HTTP/1.1",
    "CONNECT pypi.org:443 HTTP/1.1 x",
    "CONNECT  pypi.org:443 HTTP/1.1",
  };
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    {
      char text[256];
      int n = snprintf (text, sizeof text, "%s\r\nHost: example.com\r\n\r\n", lines[i]);
      expect_bad_len (text, (size_t)n, 0, NULL);
    }
}

Test (egress, header_syntax_errors_are_bad, .timeout = 10)
{
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost : example.com\r\n\r\n", 0, NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nNo colon\r\n\r\n", 0, NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n: empty\r\n\r\n", 0, NULL);
  expect_bad ("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX Y: z\r\n\r\n", 0, NULL);
  static const char nul[] = "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX: a\0b\r\n"
                            "\r\n";
  expect_bad_len (nul, sizeof nul - 1, 0, NULL);
}

/* Parsed and forwarded as one plain request, or refused; never MORE for a
 * complete head, never a bare CR or LF upstream. */
static void
expect_done_plainly_or_bad (const char *text, size_t len)
{
  struct nsbox_egress_request req;
  memset (&req, 0, sizeof req);
  enum nsbox_egress_parse r = parse (text, len, &req);
  cr_expect (r == NSBOX_EGRESS_DONE || r == NSBOX_EGRESS_BAD, "'%s': %d", shown (text, len), r);
  if (r == NSBOX_EGRESS_DONE)
    {
      cr_expect_str_eq (req.host, "example.com", "'%s'", shown (text, len));
      cr_expect_eq (req.port, 80);
      cr_expect_eq (req.head_len, len);
      expect_one_head (&req);
      if (req.upstream_head)
        {
          cr_expect_eq (count_headers (req.upstream_head, "Host"), 1, "'%s'",
                        shown (req.upstream_head, req.upstream_head_len));
          cr_expect (strstr (req.upstream_head, "\r\nHost: example.com\r\n"), "'%s'",
                     shown (req.upstream_head, req.upstream_head_len));
        }
      nsbox_egress_request_clear (&req);
    }
  else if (r == NSBOX_EGRESS_BAD)
    cr_expect (status_is_listed (req.status) && req.reason, "'%s': %d", shown (text, len),
               req.status);
}

Test (egress, lone_line_feeds_and_folding_are_never_misread, .timeout = 10)
{
  const char *texts[] = {
    "GET http://example.com/ HTTP/1.1\nHost: example.com\nUser-Agent: x\n\n",
    "GET http://example.com/ HTTP/1.1\r\nHost: example.com\nUser-Agent: x\r\n\r\n",
    "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-A: a\nHost: evil.com\r\n\r\n",
    "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-A: a\rHost: evil.com\r\n\r\n",
    "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-A: a\r\n Host: evil.com\r\n\r\n",
    "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-A: a\r\n\tb\r\n\r\n",
    "GET http://example.com/ HTTP/1.1\r\n Host: evil.com\r\nHost: example.com\r\n\r\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
    expect_done_plainly_or_bad (texts[i], strlen (texts[i]));
}

/* Mutations of real heads: never a crash, and what is DONE holds together. */
Test (egress, random_mutations_of_a_head_are_parsed_safely, .timeout = 120)
{
  static const char *seeds[] = {
    CONNECT_PYPI,
    GET_EXAMPLE,
    "POST http://example.com:8080/x HTTP/1.1\r\nHost: example.com:8080\r\nContent-Length: 5\r\n"
    "Proxy-Authorization: Basic x\r\n\r\nhello",
  };
  static const char alphabet[] = "\r\n :@[]/.0123456789-aZ\t\0x%";
  uint64_t state = 0x6e73626f78ULL;
  char buf[512];
  for (int i = 0; i < 20000; i++)
    {
      const char *seed = seeds[next_random (&state) % 3];
      size_t len = strlen (seed);
      memcpy (buf, seed, len);
      int mutations = 1 + (int)(next_random (&state) % 4);
      for (int m = 0; m < mutations; m++)
        {
          uint64_t x = next_random (&state);
          size_t at = (size_t)((x >> 8) % (len ? len : 1));
          switch (x % 4)
            {
            case 0:
              buf[at] = (char)(x >> 32);
              break;
            case 1:
              buf[at] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
              break;
            case 2:
              if (len + 1 < sizeof buf)
                {
                  memmove (buf + at + 1, buf + at, len - at);
                  buf[at] = alphabet[(x >> 32) % (sizeof alphabet - 1)];
                  len++;
                }
              break;
            default:
              if (len > 0)
                {
                  memmove (buf + at, buf + at + 1, len - at - 1);
                  len--;
                }
              break;
            }
        }
      struct nsbox_egress_request req;
      memset (&req, 0, sizeof req);
      enum nsbox_egress_parse r = parse (buf, len, &req);
      if (r == NSBOX_EGRESS_DONE)
        {
          cr_assert_leq (req.head_len, len, "'%s'", shown (buf, len));
          cr_assert_geq (req.head_len, 4);
          cr_assert (memcmp (buf + req.head_len - 4, "\r\n\r\n", 4) == 0, "'%s'", shown (buf, len));
          char again[NSBOX_EGRESS_HOST_MAX + 1];
          cr_assert_leq (strlen (req.host), NSBOX_EGRESS_HOST_MAX);
          cr_assert_null (host_normalize (req.host, strlen (req.host), again), "host '%s' of '%s'",
                          req.host, shown (buf, len));
          cr_assert_str_eq (again, req.host);
          if (!req.connect)
            {
              cr_assert_not_null (req.upstream_head);
              cr_assert_eq (strlen (req.upstream_head), req.upstream_head_len);
            }
          nsbox_egress_request_clear (&req);
        }
      else if (r == NSBOX_EGRESS_BAD)
        {
          cr_assert_not_null (req.reason);
          cr_assert (status_is_listed (req.status), "status %d of '%s'", req.status,
                     shown (buf, len));
        }
      else
        cr_assert_eq (r, NSBOX_EGRESS_MORE, "%d", r);
    }
}

/* ---- the ClientHello ---- */

/* Two ClientHellos of CPython 3.11 / OpenSSL 3.0, made by:
 *   ctx = ssl.create_default_context(); ctx.check_hostname = False
 *   ctx.verify_mode = ssl.CERT_NONE
 *   incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
 *   tls = ctx.wrap_bio(incoming, outgoing, server_hostname=NAME)
 *   tls.do_handshake()  # raises SSLWantReadError
 *   outgoing.read().hex()
 * with NAME 'files.pythonhosted.org' and None. Each is 517 bytes in one
 * record; its padding extension (0x0015) ends it, and the bytes after the
 * hex, the padding's body, are zeros. */
static const char hello_sni_hex[]
    = "1603010200010001fc030318d03fdf9086bd91d629495ee16f6c0e7158258c1b2b9c9cb5c4c6a383cff2662053"
      "9827adcc2a09e197860b16bafc6ae0ba7f7b255e033290a66546da3dc151890024130213031301c02cc030c02b"
      "c02fcca9cca8c024c028c023c027009f009e006b006700ff0100018f0000001b001900001666696c65732e7079"
      "74686f6e686f737465642e6f7267000b000403000102000a00160014001d0017001e0019001801000101010201"
      "030104002300000016000000170000000d002a0028040305030603080708080809080a080b0804080508060401"
      "05010601030303010302040205020602002b00050403040303002d00020101003300260024001d0020827eb904"
      "88e8c684d27d5b113fc8110eae27b054c94911e6c9bcf5800821784c001500d7";
static const char hello_no_sni_hex[]
    = "1603010200010001fc030340876805a3189cceca36ab642b270b22cdc428e079d9b11b2481d1057061e3ec20f4"
      "9fc09f916a5255148906996e6e30e8b18bfd59c8f32e9b76a7d1f1b8eb07270024130213031301c02cc030c02b"
      "c02fcca9cca8c024c028c023c027009f009e006b006700ff0100018f000b000403000102000a00160014001d00"
      "17001e0019001801000101010201030104002300000016000000170000000d002a002804030503060308070808"
      "0809080a080b080408050806040105010601030303010302040205020602002b00050403040303002d00020101"
      "003300260024001d00202b1374b5b696f1d1b4bd6082c971519b2bd7207573af29ffefa8a9e91eda703d001500"
      "f6";
#define HELLO_LEN 517
#define HELLO_NAME "files.pythonhosted.org"

static size_t
hello_from_hex (const char *hex, uint8_t out[HELLO_LEN])
{
  size_t n = strlen (hex) / 2;
  cr_assert_leq (n, HELLO_LEN);
  for (size_t i = 0; i < n; i++)
    {
      unsigned int byte;
      cr_assert_eq (sscanf (hex + 2 * i, "%2x", &byte), 1);
      out[i] = (uint8_t)byte;
    }
  memset (out + n, 0, HELLO_LEN - n);
  return HELLO_LEN;
}

static enum nsbox_egress_parse
client_hello (const uint8_t *data, size_t len, char sni[NSBOX_EGRESS_HOST_MAX + 1],
              const char **reason)
{
  uint8_t *copy = copy_exact (data, len);
  *reason = NULL;
  sni[0] = '\0';
  enum nsbox_egress_parse r = nsbox_egress_client_hello (copy, len, sni, reason);
  free (copy);
  return r;
}

static void
expect_hello_done (const uint8_t *data, size_t len, const char *name)
{
  char sni[NSBOX_EGRESS_HOST_MAX + 1];
  const char *reason;
  enum nsbox_egress_parse r = client_hello (data, len, sni, &reason);
  cr_expect_eq (r, NSBOX_EGRESS_DONE, "%zu bytes: %d (%s)", len, r, reason ? reason : "");
  if (r == NSBOX_EGRESS_DONE)
    cr_expect_str_eq (sni, name);
}

static void
expect_hello_bad (const uint8_t *data, size_t len, const char *reason_part, const char *what)
{
  char sni[NSBOX_EGRESS_HOST_MAX + 1];
  const char *reason;
  enum nsbox_egress_parse r = client_hello (data, len, sni, &reason);
  cr_expect_eq (r, NSBOX_EGRESS_BAD, "%s: %d (sni '%s')", what, r,
                r == NSBOX_EGRESS_DONE ? sni : "");
  if (r != NSBOX_EGRESS_BAD)
    return;
  cr_expect_not_null (reason, "%s: no reason", what);
  if (reason && reason_part)
    cr_expect (strcasestr (reason, reason_part), "%s: reason '%s' without '%s'", what, reason,
               reason_part);
}

/* Where the parts of a one-record hello begin. */
struct hello_layout
{
  size_t body;       /* after the handshake header: legacy_version */
  size_t extensions; /* the extensions' 2-byte length */
  size_t end;
};

static struct hello_layout
hello_layout (const uint8_t *h, size_t len)
{
  struct hello_layout l = { .body = 9, .end = len };
  cr_assert_eq (h[0], 0x16);
  cr_assert_eq ((size_t)(h[3] << 8 | h[4]), len - 5);
  cr_assert_eq (h[5], 0x01);
  cr_assert_eq ((size_t)(h[6] << 16 | h[7] << 8 | h[8]), len - 9);
  size_t at = l.body + 2 + 32;
  at += 1 + h[at];
  at += 2 + (size_t)(h[at] << 8 | h[at + 1]);
  at += 1 + h[at];
  l.extensions = at;
  cr_assert_eq ((size_t)(h[at] << 8 | h[at + 1]), len - at - 2);
  return l;
}

static void
put16 (uint8_t *at, size_t value)
{
  at[0] = (uint8_t)(value >> 8);
  at[1] = (uint8_t)value;
}

static void
put24 (uint8_t *at, size_t value)
{
  at[0] = (uint8_t)(value >> 16);
  put16 (at + 1, value);
}

/* The hello `h` with `ext_len` bytes of whole extensions inserted at
 * `at` (an offset in `h` at an extension's start, or its end), its lengths
 * made right. */
static size_t
hello_with (uint8_t *out, const uint8_t *h, size_t len, size_t at, const uint8_t *ext,
            size_t ext_len)
{
  struct hello_layout l = hello_layout (h, len);
  cr_assert (at > l.extensions + 1 && at <= len);
  memcpy (out, h, at);
  memcpy (out + at, ext, ext_len);
  memcpy (out + at + ext_len, h + at, len - at);
  size_t total = len + ext_len;
  put16 (out + 3, total - 5);
  put24 (out + 6, total - 9);
  put16 (out + l.extensions, total - l.extensions - 2);
  return total;
}

/* The handshake of a one-record hello over several records: `first` bytes,
 * then records of `chunk` bytes. */
static size_t
hello_in_records (uint8_t *out, const uint8_t *h, size_t len, size_t first, size_t chunk)
{
  const uint8_t *hs = h + 5;
  size_t hs_len = len - 5, n = 0;
  for (size_t done = 0, size = first; done < hs_len; done += size, size = chunk)
    {
      if (size > hs_len - done)
        size = hs_len - done;
      out[n] = 0x16;
      out[n + 1] = 0x03;
      out[n + 2] = 0x01;
      put16 (out + n + 3, size);
      memcpy (out + n + 5, hs + done, size);
      n += 5 + size;
    }
  return n;
}

/* The offset of the server name extension's type in the SNI hello. */
static size_t
sni_extension (const uint8_t *h, size_t len)
{
  struct hello_layout l = hello_layout (h, len);
  size_t at = l.extensions + 2;
  cr_assert_eq (h[at], 0x00);
  cr_assert_eq (h[at + 1], 0x00);
  return at;
}

Test (egress, client_hello_names_its_server, .timeout = 10)
{
  uint8_t h[HELLO_LEN + 16];
  size_t len = hello_from_hex (hello_sni_hex, h);
  hello_layout (h, len);
  expect_hello_done (h, len, HELLO_NAME);
  /* Whatever follows it is not its business. */
  memcpy (h + len, "\x17\x03\x03\x00\x05hello", 10);
  expect_hello_done (h, len + 10, HELLO_NAME);
}

Test (egress, every_prefix_of_a_client_hello_is_more, .timeout = 10)
{
  uint8_t h[HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  for (size_t n = 0; n < len; n++)
    {
      char sni[NSBOX_EGRESS_HOST_MAX + 1];
      const char *reason;
      enum nsbox_egress_parse r = client_hello (h, n, sni, &reason);
      cr_assert_eq (r, NSBOX_EGRESS_MORE, "%zu of %zu bytes: %d (%s)", n, len, r,
                    reason ? reason : "");
    }
}

Test (egress, client_hello_over_several_records_is_done, .timeout = 30)
{
  uint8_t h[HELLO_LEN], split[8 * HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  const size_t firsts[] = { 1, 2, 3, 4, 5, 40, 100, 512 - 1 };
  for (size_t i = 0; i < sizeof firsts / sizeof *firsts; i++)
    {
      size_t n = hello_in_records (split, h, len, firsts[i], len);
      cr_assert_eq (n, len + 5);
      expect_hello_done (split, n, HELLO_NAME);
    }
  /* Every prefix of two records is MORE. */
  size_t n = hello_in_records (split, h, len, 60, len);
  for (size_t k = 0; k < n; k++)
    {
      char sni[NSBOX_EGRESS_HOST_MAX + 1];
      const char *reason;
      enum nsbox_egress_parse r = client_hello (split, k, sni, &reason);
      cr_assert_eq (r, NSBOX_EGRESS_MORE, "%zu of %zu bytes over two records: %d (%s)", k, n, r,
                    reason ? reason : "");
    }
  /* Some forty records are read; a record per byte is refused (it would
   * cost the proxy a pass over the whole hello per byte). */
  n = hello_in_records (split, h, len, 7, 13);
  expect_hello_done (split, n, HELLO_NAME);
  n = hello_in_records (split, h, len, 1, 1);
  cr_assert_eq (n, 6 * (len - 5));
  expect_hello_bad (split, n, "too many records", "a record per byte");
}

Test (egress, client_hello_without_a_server_name_is_bad, .timeout = 10)
{
  uint8_t h[HELLO_LEN];
  size_t len = hello_from_hex (hello_no_sni_hex, h);
  hello_layout (h, len);
  expect_hello_bad (h, len, NULL, "no server name");
}

Test (egress, client_hello_server_name_is_lower_cased, .timeout = 10)
{
  uint8_t h[HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  size_t name = sni_extension (h, len) + 9;
  cr_assert (memcmp (h + name, HELLO_NAME, strlen (HELLO_NAME)) == 0);
  memcpy (h + name, "FILES.PythonHosted.ORG", strlen (HELLO_NAME));
  expect_hello_done (h, len, HELLO_NAME);
}

Test (egress, what_is_not_a_client_hello_is_bad, .timeout = 10)
{
  expect_hello_bad ((const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18, NULL, "http");
  expect_hello_bad ((const uint8_t *)"SSH-2.0-OpenSSH_9.6\r\n", 21, NULL, "ssh");
  expect_hello_bad ((const uint8_t *)"\x17\x03\x03\x00\x05hello", 10, NULL, "application data");
  expect_hello_bad ((const uint8_t *)"\x15\x03\x03\x00\x02\x02\x28", 7, NULL, "alert");
  expect_hello_bad ((const uint8_t *)"\x80\x2e\x01\x03\x01", 5, NULL, "SSLv2 hello");
  expect_hello_bad ((const uint8_t *)"\x00", 1, NULL, "a zero");

  uint8_t h[HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  h[5] = 0x02; /* a ServerHello */
  expect_hello_bad (h, len, NULL, "server hello");
}

Test (egress, encrypted_client_hello_is_bad, .timeout = 10)
{
  uint8_t h[HELLO_LEN], out[2 * HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  /* An outer encrypted_client_hello: type, HPKE suite, config id, enc,
   * payload. */
  uint8_t ech[4 + 58] = { 0xfe, 0x0d, 0x00, 58, 0x00, 0x00, 0x01, 0x00, 0x01, 0x2a, 0x00, 0x20 };
  memset (ech + 12, 0x5c, 32);
  put16 (ech + 44, 16);
  memset (ech + 46, 0xc5, 16);
  /* At the end, behind the padding, and first, before the server name. */
  size_t n = hello_with (out, h, len, len, ech, sizeof ech);
  hello_layout (out, n);
  expect_hello_bad (out, n, "encrypted", "ECH last");
  n = hello_with (out, h, len, sni_extension (h, len), ech, sizeof ech);
  expect_hello_bad (out, n, "encrypted", "ECH first");
  /* Split over records too. */
  uint8_t split[8 * HELLO_LEN];
  size_t s = hello_in_records (split, out, n, 200, 100);
  expect_hello_bad (split, s, "encrypted", "ECH over records");
}

Test (egress, unknown_extensions_are_passed_over, .timeout = 10)
{
  uint8_t h[HELLO_LEN], out[2 * HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  /* GREASE (RFC 8701): an empty 0x0a0a and a 0xfafa with one byte. */
  static const uint8_t grease[] = { 0x0a, 0x0a, 0x00, 0x00, 0xfa, 0xfa, 0x00, 0x01, 0x00 };
  size_t n = hello_with (out, h, len, sni_extension (h, len), grease, sizeof grease);
  expect_hello_done (out, n, HELLO_NAME);
  n = hello_with (out, h, len, len, grease, sizeof grease);
  expect_hello_done (out, n, HELLO_NAME);
}

Test (egress, several_server_names_are_bad, .timeout = 10)
{
  uint8_t h[HELLO_LEN], out[2 * HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  /* A second server_name extension, for another name, at the end. */
  static const uint8_t second[] = { 0x00, 0x00, 0x00, 0x0d, 0x00, 0x0b, 0x00, 0x00, 0x08,
                                    'e',  'v',  'i',  'l',  '.',  'c',  'o',  'm' };
  size_t n = hello_with (out, h, len, len, second, sizeof second);
  expect_hello_bad (out, n, NULL, "two extensions");

  /* Two names in the one extension's list. */
  size_t at = sni_extension (h, len);
  static const uint8_t entry[] = { 0x00, 0x00, 0x08, 'e', 'v', 'i', 'l', '.', 'c', 'o', 'm' };
  size_t list_end = at + 4 + 0x1b;
  memcpy (out, h, list_end);
  memcpy (out + list_end, entry, sizeof entry);
  memcpy (out + list_end + sizeof entry, h + list_end, len - list_end);
  n = len + sizeof entry;
  struct hello_layout l = hello_layout (h, len);
  put16 (out + 3, n - 5);
  put24 (out + 6, n - 9);
  put16 (out + l.extensions, n - l.extensions - 2);
  put16 (out + at + 2, 0x1b + sizeof entry);
  put16 (out + at + 4, 0x19 + sizeof entry);
  hello_layout (out, n);
  expect_hello_bad (out, n, NULL, "two names in one list");
}

Test (egress, server_name_that_is_no_name_is_bad, .timeout = 10)
{
  uint8_t h[HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  size_t name = sni_extension (h, len) + 9;
  h[name + 5] = '\0';
  expect_hello_bad (h, len, NULL, "a NUL in the name");

  /* An empty name: the extension, list and name lengths shrunk. */
  len = hello_from_hex (hello_sni_hex, h);
  size_t at = sni_extension (h, len);
  uint8_t out[HELLO_LEN];
  size_t cut = strlen (HELLO_NAME);
  memcpy (out, h, at);
  static const uint8_t empty[] = { 0x00, 0x00, 0x00, 0x05, 0x00, 0x03, 0x00, 0x00, 0x00 };
  memcpy (out + at, empty, sizeof empty);
  memcpy (out + at + sizeof empty, h + at + 4 + 0x1b, len - at - 4 - 0x1b);
  size_t n = len - cut;
  struct hello_layout l = hello_layout (h, len);
  put16 (out + 3, n - 5);
  put24 (out + 6, n - 9);
  put16 (out + l.extensions, n - l.extensions - 2);
  hello_layout (out, n);
  expect_hello_bad (out, n, NULL, "an empty name");
}

Test (egress, client_hello_with_lengths_out_of_bounds_is_bad, .timeout = 10)
{
  uint8_t h[HELLO_LEN], bad[HELLO_LEN + 16];
  size_t len = hello_from_hex (hello_sni_hex, h);
  struct hello_layout l = hello_layout (h, len);
  size_t sni = sni_extension (h, len);

  static const struct
  {
    const char *what;
    int field; /* which length */
    size_t value;
  } cases[] = {
    { "server name extension past the end", 0, 0xffff },
    { "server name extension past the list", 0, 0x1b + 300 },
    { "server name list past its extension", 1, 0x19 + 1 },
    { "server name list of 0xffff", 1, 0xffff },
    { "server name past its list", 2, 0x16 + 1 },
    { "server name of 0xffff", 2, 0xffff },
    { "extensions past the handshake", 3, 0x018f + 1 },
    { "extensions of 0xffff", 3, 0xffff },
    { "session id of 255", 4, 0xff },
    { "session id of 33", 4, 33 },
    { "cipher suites past the end", 5, 0xfff0 },
    { "handshake shorter than its hello", 6, 100 },
    { "handshake beyond the largest hello", 6, 0xffffff },
    { "handshake of 0", 6, 0 },
    { "padding past the end", 7, 0xd7 + 1 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    {
      memcpy (bad, h, len);
      size_t v = cases[i].value;
      switch (cases[i].field)
        {
        case 0:
          put16 (bad + sni + 2, v);
          break;
        case 1:
          put16 (bad + sni + 4, v);
          break;
        case 2:
          put16 (bad + sni + 7, v);
          break;
        case 3:
          put16 (bad + l.extensions, v);
          break;
        case 4:
          bad[l.body + 34] = (uint8_t)v;
          break;
        case 5:
          put16 (bad + l.body + 35 + 32, v);
          break;
        case 6:
          put24 (bad + 6, v);
          break;
        default:
          put16 (bad + len - 0xd7 - 2, v);
          break;
        }
      expect_hello_bad (bad, len, NULL, cases[i].what);
    }

  /* A handshake longer than its record, followed by no handshake record. */
  memcpy (bad, h, len);
  put24 (bad + 6, len - 9 + 100);
  memcpy (bad + len, "\x17\x03\x03\x00\x05hello", 10);
  expect_hello_bad (bad, len + 10, NULL, "handshake continued by application data");

  /* An empty handshake record, then the hello's. */
  memcpy (bad, "\x16\x03\x01\x00\x00", 5);
  memcpy (bad + 5, h, len);
  char name[NSBOX_EGRESS_HOST_MAX + 1];
  const char *reason;
  enum nsbox_egress_parse r = client_hello (bad, len + 5, name, &reason);
  cr_expect (r == NSBOX_EGRESS_BAD || strcmp (name, HELLO_NAME) == 0, "empty record: %d", r);
}

Test (egress, random_mutations_of_a_client_hello_are_read_safely, .timeout = 120)
{
  uint8_t h[HELLO_LEN], no_sni[HELLO_LEN], split[4 * HELLO_LEN], buf[4 * HELLO_LEN];
  size_t len = hello_from_hex (hello_sni_hex, h);
  hello_from_hex (hello_no_sni_hex, no_sni);
  size_t split_len = hello_in_records (split, h, len, 80, 150);
  const struct
  {
    const uint8_t *data;
    size_t len;
  } seeds[] = { { h, len }, { no_sni, len }, { split, split_len } };
  uint64_t state = 0x6e73626f78ULL;
  for (int i = 0; i < 20000; i++)
    {
      size_t which = next_random (&state) % 3;
      size_t n = seeds[which].len;
      memcpy (buf, seeds[which].data, n);
      int mutations = 1 + (int)(next_random (&state) % 4);
      for (int m = 0; m < mutations; m++)
        {
          uint64_t x = next_random (&state);
          size_t at = (size_t)((x >> 8) % n);
          /* The first 130 bytes hold every length but the extensions'. */
          if (x & 0x10000000000ULL)
            at %= 130;
          switch (x % 5)
            {
            case 0:
              buf[at] = (uint8_t)(x >> 32);
              break;
            case 1:
              buf[at] ^= (uint8_t)(1u << ((x >> 32) % 8));
              break;
            case 2:
              buf[at] = (x >> 32) & 1 ? 0xff : 0x00;
              break;
            case 3:
              buf[at] = (uint8_t)(buf[at] + ((x >> 32) & 1 ? 1 : -1));
              break;
            default:
              n = at + 1;
              break;
            }
        }
      char sni[NSBOX_EGRESS_HOST_MAX + 1];
      const char *reason;
      enum nsbox_egress_parse r = client_hello (buf, n, sni, &reason);
      if (r == NSBOX_EGRESS_DONE)
        {
          size_t sni_len = strnlen (sni, sizeof sni);
          cr_assert (sni_len > 0 && sni_len <= NSBOX_EGRESS_HOST_MAX, "sni of %zu bytes", sni_len);
          for (size_t k = 0; k < sni_len; k++)
            cr_assert (!isupper ((unsigned char)sni[k]), "sni '%s'", sni);
        }
      else if (r == NSBOX_EGRESS_BAD)
        cr_assert_not_null (reason);
      else
        cr_assert_eq (r, NSBOX_EGRESS_MORE, "%d", r);
    }
}
