/* The value-set and region algebra behind the seccomp policy compiler
 * (seccomp_policy.c): sets of argument values as sorted spans in the
 * "compact space" of a mask, boxes (a set per argument) and their
 * differences, and the blocks of EQ/MASKED_EQ comparisons that select a
 * set exactly. Pure computation: no libseccomp context, no YAML. */
#ifndef NSBOX_SECCOMP_REGIONS_H
#define NSBOX_SECCOMP_REGIONS_H

#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define SYSCALL_ARGS 6
/* Bounds the region algebra itself, before any rule is emitted. */
#define MAX_REGION_BOXES 4096

/* Inclusive range of values in the compact space of an argument's mask. */
struct span
{
  uint64_t lo;
  uint64_t hi;
};

/* Sorted, disjoint and non-adjacent spans; len == 0 is the empty set. */
struct value_set
{
  struct span *spans;
  size_t len;
};

/* A product region: argument k takes its values in args[k]. */
struct box
{
  struct value_set args[SYSCALL_ARGS];
};

struct box_list
{
  struct box *items;
  size_t len;
  size_t cap;
};

/* The mask each argument of one syscall is compared under; an argument that
 * no condition masks uses all 64 bits. */
struct arg_space
{
  uint64_t mask[SYSCALL_ARGS];
  bool fixed[SYSCALL_ARGS];
};

struct cmp_list
{
  struct scmp_arg_cmp *items;
  size_t len;
  size_t cap;
};

/* The largest value of the compact space of `mask`. */
uint64_t mask_max (uint64_t mask) NSBOX_INTERNAL;
/* Gathers the bits of value selected by mask into the low bits (pext). */
uint64_t bits_gather (uint64_t value, uint64_t mask) NSBOX_INTERNAL;

void vset_clear (struct value_set *set) NSBOX_INTERNAL;
int vset_alloc (struct value_set *set, size_t capacity) NSBOX_INTERNAL;
int vset_span (struct value_set *set, uint64_t lo, uint64_t hi) NSBOX_INTERNAL;
int vset_copy (const struct value_set *from, struct value_set *to) NSBOX_INTERNAL;
bool vset_is_full (const struct value_set *set, uint64_t max) NSBOX_INTERNAL;
int vset_complement (const struct value_set *set, uint64_t max,
                     struct value_set *out) NSBOX_INTERNAL;
int vset_intersect (const struct value_set *a, const struct value_set *b,
                    struct value_set *out) NSBOX_INTERNAL;
int vset_subtract (const struct value_set *a, const struct value_set *b, uint64_t max,
                   struct value_set *out) NSBOX_INTERNAL;
int vset_from_points (uint64_t *points, size_t len, struct value_set *out) NSBOX_INTERNAL;
void box_clear (struct box *box) NSBOX_INTERNAL;
bool box_is_empty (const struct box *box) NSBOX_INTERNAL;
int box_copy (const struct box *from, struct box *to) NSBOX_INTERNAL;
int box_full (const struct arg_space *space, struct box *box) NSBOX_INTERNAL;
void box_list_clear (struct box_list *list) NSBOX_INTERNAL;
int box_list_take (struct box_list *list, struct box *box) NSBOX_INTERNAL;
int box_subtract (const struct box *a, const struct box *b, const struct arg_space *space,
                  struct box_list *out) NSBOX_INTERNAL;
int box_list_subtract (struct box_list *list, const struct box *b,
                       const struct arg_space *space) NSBOX_INTERNAL;
void cmp_list_clear (struct cmp_list *list) NSBOX_INTERNAL;
int cmp_list_add (struct cmp_list *list, unsigned arg, enum scmp_compare op, uint64_t datum_a,
                  uint64_t datum_b) NSBOX_INTERNAL;
int span_to_blocks (const struct span *span, unsigned arg, uint64_t mask,
                    struct cmp_list *out) NSBOX_INTERNAL;
int vset_to_cmps (const struct value_set *set, unsigned arg, uint64_t mask,
                  struct cmp_list *out) NSBOX_INTERNAL;

#endif
