/* SipHash-2-4; see siphash.h. */
#include "siphash.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

static uint64_t
rotl (uint64_t x, unsigned b)
{
  return (x << b) | (x >> (64 - b));
}

static uint64_t
load_le64 (const unsigned char *p)
{
  uint64_t v = 0;
  for (unsigned i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

struct state
{
  uint64_t v0, v1, v2, v3;
};

static void
sip_round (struct state *s)
{
  s->v0 += s->v1;
  s->v1 = rotl (s->v1, 13);
  s->v1 ^= s->v0;
  s->v0 = rotl (s->v0, 32);
  s->v2 += s->v3;
  s->v3 = rotl (s->v3, 16);
  s->v3 ^= s->v2;
  s->v0 += s->v3;
  s->v3 = rotl (s->v3, 21);
  s->v3 ^= s->v0;
  s->v2 += s->v1;
  s->v1 = rotl (s->v1, 17);
  s->v1 ^= s->v2;
  s->v2 = rotl (s->v2, 32);
}

static void
compress (struct state *s, uint64_t m)
{
  s->v3 ^= m;
  sip_round (s);
  sip_round (s);
  s->v0 ^= m;
}

uint64_t
rt_siphash (const struct rt_siphash_key *key, const void *data, size_t len)
{
  struct state s = {
    key->k0 ^ 0x736f6d6570736575ull,
    key->k1 ^ 0x646f72616e646f6dull,
    key->k0 ^ 0x6c7967656e657261ull,
    key->k1 ^ 0x7465646279746573ull,
  };
  const unsigned char *p = data;
  size_t whole = len - len % 8;
  for (size_t i = 0; i < whole; i += 8)
    compress (&s, load_le64 (p + i));
  unsigned char last[8] = { 0 };
  memcpy (last, p + whole, len % 8);
  last[7] = (unsigned char)len;
  compress (&s, load_le64 (last));
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; i++)
    sip_round (&s);
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

void
rt_siphash_key_random (struct rt_siphash_key *key)
{
  uint64_t words[2];
  if (getrandom (words, sizeof words, GRND_NONBLOCK) != (ssize_t)sizeof words)
    {
      struct timespec ts;
      clock_gettime (CLOCK_MONOTONIC, &ts);
      words[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)key;
      words[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)&ts;
    }
  key->k0 = words[0];
  key->k1 = words[1];
}
