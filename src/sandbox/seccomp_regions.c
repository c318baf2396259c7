/* The value-set and region algebra: see seccomp_regions.h. */
#include "seccomp_regions.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- Sets of argument values ---------------------------------------------- */

static uint64_t
low_bits (unsigned count)
{
  return count >= 64 ? UINT64_MAX : (UINT64_C (1) << count) - 1;
}

uint64_t
mask_max (uint64_t mask)
{
  return low_bits ((unsigned)__builtin_popcountll (mask));
}

uint64_t
bits_gather (uint64_t value, uint64_t mask)
{
  uint64_t out = 0;
  unsigned shift = 0;
  for (unsigned bit = 0; bit < 64; bit++)
    if (mask & (UINT64_C (1) << bit))
      {
        if (value & (UINT64_C (1) << bit))
          out |= UINT64_C (1) << shift;
        shift++;
      }
  return out;
}

/* The inverse of bits_gather: spreads the low bits over mask (pdep). */
static uint64_t
bits_scatter (uint64_t value, uint64_t mask)
{
  uint64_t out = 0;
  unsigned shift = 0;
  for (unsigned bit = 0; bit < 64; bit++)
    if (mask & (UINT64_C (1) << bit))
      {
        if (value & (UINT64_C (1) << shift))
          out |= UINT64_C (1) << bit;
        shift++;
      }
  return out;
}

void
vset_clear (struct value_set *set)
{
  free (set->spans);
  set->spans = NULL;
  set->len = 0;
}

int
vset_alloc (struct value_set *set, size_t capacity)
{
  set->len = 0;
  set->spans = calloc (capacity ? capacity : 1, sizeof *set->spans);
  return set->spans ? 0 : -ENOMEM;
}

/* [lo, hi]; empty when lo > hi. */
int
vset_span (struct value_set *set, uint64_t lo, uint64_t hi)
{
  if (vset_alloc (set, 1) < 0)
    return -ENOMEM;
  if (lo <= hi)
    set->spans[set->len++] = (struct span){ lo, hi };
  return 0;
}

int
vset_copy (const struct value_set *from, struct value_set *to)
{
  if (vset_alloc (to, from->len) < 0)
    return -ENOMEM;
  if (from->len)
    memcpy (to->spans, from->spans, from->len * sizeof *from->spans);
  to->len = from->len;
  return 0;
}

bool
vset_is_full (const struct value_set *set, uint64_t max)
{
  return set->len == 1 && set->spans[0].lo == 0 && set->spans[0].hi == max;
}

int
vset_complement (const struct value_set *set, uint64_t max, struct value_set *out)
{
  struct value_set result;
  if (vset_alloc (&result, set->len + 1) < 0)
    return -ENOMEM;
  uint64_t next = 0;
  bool reached_max = false;
  for (size_t i = 0; i < set->len && !reached_max; i++)
    {
      if (set->spans[i].lo > next)
        result.spans[result.len++] = (struct span){ next, set->spans[i].lo - 1 };
      if (set->spans[i].hi >= max)
        reached_max = true;
      else
        next = set->spans[i].hi + 1;
    }
  if (!reached_max)
    result.spans[result.len++] = (struct span){ next, max };
  *out = result;
  return 0;
}

int
vset_intersect (const struct value_set *a, const struct value_set *b, struct value_set *out)
{
  struct value_set result;
  if (vset_alloc (&result, a->len + b->len) < 0)
    return -ENOMEM;
  size_t i = 0, j = 0;
  while (i < a->len && j < b->len)
    {
      uint64_t lo = a->spans[i].lo > b->spans[j].lo ? a->spans[i].lo : b->spans[j].lo;
      uint64_t hi = a->spans[i].hi < b->spans[j].hi ? a->spans[i].hi : b->spans[j].hi;
      if (lo <= hi)
        result.spans[result.len++] = (struct span){ lo, hi };
      if (a->spans[i].hi < b->spans[j].hi)
        i++;
      else
        j++;
    }
  *out = result;
  return 0;
}

int
vset_subtract (const struct value_set *a, const struct value_set *b, uint64_t max,
               struct value_set *out)
{
  struct value_set outside_b = { NULL, 0 };
  int rc = vset_complement (b, max, &outside_b);
  if (rc == 0)
    rc = vset_intersect (a, &outside_b, out);
  vset_clear (&outside_b);
  return rc;
}

static int
compare_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorts points in place and merges them into spans. */
int
vset_from_points (uint64_t *points, size_t len, struct value_set *out)
{
  if (vset_alloc (out, len) < 0)
    return -ENOMEM;
  qsort (points, len, sizeof *points, compare_u64);
  for (size_t i = 0; i < len; i++)
    {
      struct span *last = out->len ? &out->spans[out->len - 1] : NULL;
      if (last && points[i] - last->hi <= 1)
        last->hi = points[i];
      else
        out->spans[out->len++] = (struct span){ points[i], points[i] };
    }
  return 0;
}

/* ---- Boxes and regions ---------------------------------------------------- */

void
box_clear (struct box *box)
{
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    vset_clear (&box->args[k]);
}

bool
box_is_empty (const struct box *box)
{
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    if (box->args[k].len == 0)
      return true;
  return false;
}

int
box_copy (const struct box *from, struct box *to)
{
  *to = (struct box){ 0 };
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    if (vset_copy (&from->args[k], &to->args[k]) < 0)
      {
        box_clear (to);
        return -ENOMEM;
      }
  return 0;
}

int
box_full (const struct arg_space *space, struct box *box)
{
  *box = (struct box){ 0 };
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    if (vset_span (&box->args[k], 0, mask_max (space->mask[k])) < 0)
      {
        box_clear (box);
        return -ENOMEM;
      }
  return 0;
}

void
box_list_clear (struct box_list *list)
{
  for (size_t i = 0; i < list->len; i++)
    box_clear (&list->items[i]);
  free (list->items);
  *list = (struct box_list){ 0 };
}

/* Moves *box into the list (empty boxes are dropped); *box is cleared
 * either way. Fails with -E2BIG past MAX_REGION_BOXES. */
int
box_list_take (struct box_list *list, struct box *box)
{
  if (box_is_empty (box) || list->len >= MAX_REGION_BOXES)
    {
      box_clear (box);
      return list->len >= MAX_REGION_BOXES ? -E2BIG : 0;
    }
  if (list->len == list->cap)
    {
      size_t cap = list->cap ? list->cap * 2 : 4;
      struct box *items = reallocarray (list->items, cap, sizeof *items);
      if (!items)
        {
          box_clear (box);
          return -ENOMEM;
        }
      list->items = items;
      list->cap = cap;
    }
  list->items[list->len++] = *box;
  *box = (struct box){ 0 };
  return 0;
}

/* Appends a \ b to out as disjoint boxes: piece k holds the points of a
 * that fall inside b on every argument before k and outside b on
 * argument k, so each point of a \ b lands in exactly one piece. */
int
box_subtract (const struct box *a, const struct box *b, const struct arg_space *space,
              struct box_list *out)
{
  __attribute__ ((cleanup (box_clear))) struct box common = { 0 };
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    {
      if (vset_intersect (&a->args[k], &b->args[k], &common.args[k]) < 0)
        return -ENOMEM;
      if (common.args[k].len == 0)
        {
          struct box whole;
          return box_copy (a, &whole) < 0 ? -ENOMEM : box_list_take (out, &whole);
        }
    }
  for (unsigned k = 0; k < SYSCALL_ARGS; k++)
    {
      struct box piece = { 0 };
      int rc = vset_subtract (&a->args[k], &b->args[k], mask_max (space->mask[k]), &piece.args[k]);
      for (unsigned j = 0; j < SYSCALL_ARGS && rc == 0 && piece.args[k].len; j++)
        if (j != k)
          rc = vset_copy (j < k ? &common.args[j] : &a->args[j], &piece.args[j]);
      if (rc == 0)
        rc = box_list_take (out, &piece);
      box_clear (&piece);
      if (rc < 0)
        return rc;
    }
  return 0;
}

/* Replaces the region `list` by list \ b. */
int
box_list_subtract (struct box_list *list, const struct box *b, const struct arg_space *space)
{
  struct box_list result = { 0 };
  for (size_t i = 0; i < list->len; i++)
    {
      int rc = box_subtract (&list->items[i], b, space, &result);
      if (rc < 0)
        {
          box_list_clear (&result);
          return rc;
        }
    }
  box_list_clear (list);
  *list = result;
  return 0;
}

/* ---- From sets to libseccomp comparisons ---------------------------------- */

void
cmp_list_clear (struct cmp_list *list)
{
  free (list->items);
  *list = (struct cmp_list){ 0 };
}

int
cmp_list_add (struct cmp_list *list, unsigned arg, enum scmp_compare op, uint64_t datum_a,
              uint64_t datum_b)
{
  if (list->len == list->cap)
    {
      size_t cap = list->cap ? list->cap * 2 : 8;
      struct scmp_arg_cmp *items = reallocarray (list->items, cap, sizeof *items);
      if (!items)
        return -ENOMEM;
      list->items = items;
      list->cap = cap;
    }
  list->items[list->len++] = (struct scmp_arg_cmp){ arg, op, datum_a, datum_b };
  return 0;
}

/* Covers a span of the compact space with aligned power-of-two blocks; each
 * block fixes the high bits of the compact value, which is one masked
 * equality on the real argument. */
int
span_to_blocks (const struct span *span, unsigned arg, uint64_t mask, struct cmp_list *out)
{
  uint64_t max = mask_max (mask);
  uint64_t lo = span->lo;
  for (;;)
    {
      unsigned size_bits
          = lo == 0 ? (unsigned)__builtin_popcountll (mask) : (unsigned)__builtin_ctzll (lo);
      while (size_bits > 0 && low_bits (size_bits) > span->hi - lo)
        size_bits--;
      uint64_t block_mask = bits_scatter (max & ~low_bits (size_bits), mask);
      uint64_t block_value = bits_scatter (lo, mask);
      int rc = block_mask == UINT64_MAX
                   ? cmp_list_add (out, arg, SCMP_CMP_EQ, block_value, 0)
                   : cmp_list_add (out, arg, SCMP_CMP_MASKED_EQ, block_mask, block_value);
      if (rc < 0)
        return rc;
      uint64_t last = lo + low_bits (size_bits);
      if (last >= span->hi)
        return 0;
      lo = last + 1;
    }
}

/* Appends comparisons on `arg` whose matches are disjoint and together are
 * exactly `set` (which is neither empty nor full): aligned blocks, each
 * one EQ or MASKED_EQ. libseccomp 2.5 builds NE, LT, LE, GT and GE on
 * 64-bit arguments from several nodes, and merging such rules with others
 * on the same syscall gave wrong decisions or looped forever in 2.5.4
 * (see POLICY.md), so they are never used. */
int
vset_to_cmps (const struct value_set *set, unsigned arg, uint64_t mask, struct cmp_list *out)
{
  for (size_t i = 0; i < set->len; i++)
    {
      int rc = span_to_blocks (&set->spans[i], arg, mask, out);
      if (rc < 0)
        return rc;
    }
  return 0;
}
