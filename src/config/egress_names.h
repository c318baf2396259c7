/* Controlled egress, the vocabulary of its keys (egress-allow,
 * egress-resolve, egress-ports): host names, allowlist patterns, pins and
 * the classes of addresses the proxy refuses. The configuration parses its
 * values with these; the proxy (src/egress/) decides with them. */
#ifndef NSBOX_EGRESS_NAMES_H
#define NSBOX_EGRESS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util.h"

/* Where the sandbox's programs find the proxy. */
#define NSBOX_EGRESS_PORT 3128
#define NSBOX_EGRESS_PROXY_URL "http://127.0.0.1:3128"

/* A DNS name: at most 253 bytes, labels of at most 63. */
#define NSBOX_EGRESS_HOST_MAX 253
/* Normalises the host `text` (`len` bytes) into `out`: lower case, without
 * a final dot. NULL when it is a valid DNS name, else why not: an IP
 * address in any disguise (dotted, shortened like 127.1, one number like
 * 2130706433, octal or hex parts like 0x7f.1, a bracketed IPv6 address, a
 * last label of digits) is "an IP address"; anything else that is not
 * letters, digits and hyphens in labels of 1 to 63 is "not a valid host
 * name". */
const char *nsbox_egress_host_normalize (const char *text, size_t len,
                                         char out[NSBOX_EGRESS_HOST_MAX + 1]) NSBOX_INTERNAL;

/* The reason nsbox_egress_host_normalize gives for an IP address (the
 * same pointer every time). */
extern const char nsbox_egress_an_address[] NSBOX_INTERNAL;

/* Whether s[0..n) is one or more decimal digits. */
bool nsbox_egress_all_digits (const char *s, size_t n) NSBOX_INTERNAL;

/* An egress-allow entry normalised into `out`: a host name, or "*." and a
 * host name (every name below it, not the name itself). NULL or why not. */
const char *nsbox_egress_pattern_normalize (const char *text,
                                            char out[NSBOX_EGRESS_HOST_MAX + 3]) NSBOX_INTERNAL;

/* Whether the normalised `host` matches the normalised `pattern`. */
bool nsbox_egress_pattern_match (const char *pattern, const char *host) NSBOX_INTERNAL;

/* An egress-resolve entry "NAME=ADDRESS": the normalised name and the
 * address (IPv4, or IPv6 with or without brackets) as a sockaddr with port
 * 0. NULL or why not. */
const char *nsbox_egress_pin_parse (const char *text, char name[NSBOX_EGRESS_HOST_MAX + 1],
                                    struct sockaddr_storage *address) NSBOX_INTERNAL;

/* `address` (IPv4 or IPv6) as text, "?" when it cannot be written. */
void nsbox_egress_address_text (const struct sockaddr *address, char *out,
                                size_t size) NSBOX_INTERNAL;

/* The ports the proxy connects to when egress-ports is not set. */
#define NSBOX_EGRESS_DEFAULT_PORTS                                                                 \
  {                                                                                                \
    80, 443                                                                                        \
  }

/* Why the proxy may not connect to `address` unless a pin names it, or
 * NULL for a public unicast address: "loopback", "private", "link-local"
 * (169.254.169.254, the cloud metadata service, is one), "carrier-grade
 * NAT", "unique local", "multicast", "NAT64", "reserved" (this network,
 * documentation, benchmarking, broadcast, 6to4, Teredo, ...). An
 * IPv4-mapped IPv6 address is judged by its IPv4 address. */
const char *nsbox_egress_address_refused (const struct sockaddr *address) NSBOX_INTERNAL;

/* `address` as the IPv4 address it stands for when it is IPv4-mapped
 * (::ffff:a.b.c.d reaches a.b.c.d), else as it is; the port is kept for
 * neither. Only AF_INET and AF_INET6 are copied: any other family leaves
 * just ss_family set. */
void nsbox_egress_plain_address (const struct sockaddr *address,
                                 struct sockaddr_storage *out) NSBOX_INTERNAL;

#endif
