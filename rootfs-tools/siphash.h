/* SipHash-2-4 (Aumasson and Bernstein, 2012) with a random key per table:
 * the hash tables of the layer applier are keyed by names an image
 * chooses, and with an unkeyed hash an image could pick names that all
 * land in one slot and make every insert walk them. */
#ifndef NSBOX_SIPHASH_H
#define NSBOX_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct rt_siphash_key
{
  uint64_t k0, k1;
};

/* A fresh key from getrandom (a weaker clock-and-address mix without it). */
NSBOX_INTERNAL void rt_siphash_key_random (struct rt_siphash_key *key);
NSBOX_INTERNAL uint64_t rt_siphash (const struct rt_siphash_key *key, const void *data, size_t len);

#endif
