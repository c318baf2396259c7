/* The layer applier's path table (rootfs-tools/pathtab.c) and its keyed
 * hash: paths come back as they went in, the order is strcmp's on the
 * whole paths (ownership.tsv is written in it), and memory grows with the
 * new components of a path, not with its ancestors. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathtab.h"
#include "siphash.h"

Test (pathtab, siphash_matches_the_reference_vectors)
{
  /* From the SipHash paper (appendix A) and its reference vectors: key
   * 00..0f, messages 00..(n-1). */
  struct rt_siphash_key key = { 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull };
  unsigned char msg[64];
  for (unsigned i = 0; i < sizeof msg; i++)
    msg[i] = (unsigned char)i;
  cr_assert_eq (rt_siphash (&key, msg, 0), 0x726fdb47dd0e0e31ull);
  cr_assert_eq (rt_siphash (&key, msg, 15), 0xa129ca6149be45e5ull);
}

static char *
random_path (unsigned *seed)
{
  /* Bytes below and above '/' make one name a prefix of a sibling's. */
  static const char alphabet[] = "ab-._!~Z";
  unsigned depth = 1 + (unsigned)rand_r (seed) % 5;
  char *path = calloc (1, 64);
  cr_assert_not_null (path);
  size_t len = 0;
  for (unsigned d = 0; d < depth; d++)
    {
      if (d)
        path[len++] = '/';
      unsigned n = 1 + (unsigned)rand_r (seed) % 3;
      for (unsigned i = 0; i < n; i++)
        path[len++] = alphabet[(unsigned)rand_r (seed) % (sizeof alphabet - 1)];
    }
  return path;
}

static int
sign (int x)
{
  return (x > 0) - (x < 0);
}

Test (pathtab, paths_round_trip_and_sort_as_strcmp_sorts_them)
{
  struct rt_pathtab t;
  cr_assert_eq (rt_pathtab_init (&t), 0);
  enum
  {
    N = 3000
  };
  char **paths = calloc (N, sizeof *paths);
  uint32_t *nodes = calloc (N, sizeof *nodes);
  cr_assert (paths && nodes);
  unsigned seed = 42;
  for (size_t i = 0; i < N; i++)
    {
      paths[i] = random_path (&seed);
      cr_assert_eq (rt_pathtab_walk (&t, RT_PATH_ROOT, paths[i], true, &nodes[i], NULL), 0);
    }
  char buf[64];
  for (size_t i = 0; i < N; i++)
    {
      cr_assert_geq (rt_pathtab_path (&t, nodes[i], buf, sizeof buf), 0);
      cr_assert_str_eq (buf, paths[i]);
      uint32_t found;
      cr_assert_eq (rt_pathtab_walk (&t, RT_PATH_ROOT, paths[i], false, &found, NULL), 0);
      cr_assert_eq (found, nodes[i]);
    }
  for (size_t i = 0; i < N; i++)
    for (size_t j = 0; j < N; j += 7)
      cr_assert_eq (sign (rt_pathtab_compare (&t, nodes[i], nodes[j])),
                    sign (strcmp (paths[i], paths[j])), "'%s' vs '%s'", paths[i], paths[j]);
  uint32_t missing;
  cr_assert_eq (rt_pathtab_walk (&t, RT_PATH_ROOT, "no/such/path", false, &missing, NULL), 0);
  cr_assert_eq (missing, RT_PATH_NONE);
  for (size_t i = 0; i < N; i++)
    free (paths[i]);
  free (paths);
  free (nodes);
  rt_pathtab_free (&t);
}

Test (pathtab, a_deep_path_costs_its_new_components_only)
{
  /* 1,000 paths of 2,048 one-letter components that part at the second:
   * an ancestor copy per component would take 4 GB; the table holds one
   * node per new component. */
  struct rt_pathtab t;
  cr_assert_eq (rt_pathtab_init (&t), 0);
  char *path = malloc (4096);
  cr_assert_not_null (path);
  size_t total_added = 0;
  for (unsigned i = 0; i < 1000; i++)
    {
      for (unsigned c = 0; c < 2048; c++)
        {
          path[2 * c] = c == 1 ? (char)('A' + i % 52) : 'a';
          path[2 * c + 1] = '/';
        }
      path[0] = (char)('a' + i / 52);
      path[4095] = '\0';
      size_t added = 0;
      uint32_t node;
      cr_assert_eq (rt_pathtab_walk (&t, RT_PATH_ROOT, path, true, &node, &added), 0);
      cr_assert_eq (rt_pathtab_node (&t, node)->depth, 2048);
      total_added += added;
    }
  cr_assert_leq (total_added, 1000 * 2048);
  cr_assert_eq (t.count, total_added + 1);
  size_t bytes = t.cap * sizeof *t.nodes + t.names_cap + (t.slot_mask + 1) * sizeof *t.slots;
  cr_assert_lt (bytes, 128u << 20, "%zu bytes for %zu nodes", bytes, t.count);
  free (path);
  rt_pathtab_free (&t);
}
