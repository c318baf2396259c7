/* Objects of the process that a fork must not copy as they are: a launch's
 * host fds, a pool's refill state, a proxy's connections. Each kind has one
 * registry; a fork takes every registry's lock (and, through lock_each,
 * each member's) and the child hands every member to child_each, then
 * starts with empty registries. The handlers run as pthread_atfork's do:
 * prepare in the reverse order the registries were first used, parent and
 * child in that order. */
#ifndef NSBOX_FORKSAFE_H
#define NSBOX_FORKSAFE_H

#include <pthread.h>
#include <stdbool.h>

#include "util.h"

/* Embedded in each member. */
struct nsbox_fork_node
{
  struct nsbox_fork_node *prev, *next;
};

struct nsbox_fork_registry
{
  /* Each may be NULL. lock_each runs in the parent before the fork (the
   * registry's lock held), unlock_each after it; child_each in the child,
   * where it also releases what lock_each took. */
  void (*lock_each) (struct nsbox_fork_node *node);
  void (*unlock_each) (struct nsbox_fork_node *node);
  void (*child_each) (struct nsbox_fork_node *node);
  /* The rest is the registry's own. */
  pthread_mutex_t lock;
  struct nsbox_fork_node *head;
  struct nsbox_fork_registry *next_registry;
  bool enrolled;
};

#define NSBOX_FORK_REGISTRY(lock_fn, unlock_fn, child_fn)                                          \
  {                                                                                                \
    .lock_each = (lock_fn), .unlock_each = (unlock_fn), .child_each = (child_fn),                  \
    .lock = PTHREAD_MUTEX_INITIALIZER                                                              \
  }

/* Adds or removes a member, under the registry's lock. */
NSBOX_INTERNAL void nsbox_fork_add (struct nsbox_fork_registry *r, struct nsbox_fork_node *node);
NSBOX_INTERNAL void nsbox_fork_remove (struct nsbox_fork_registry *r, struct nsbox_fork_node *node);

/* Holds the registry's lock, for a registry whose state is not a list of
 * members (a table the caller keeps beside it): a fork waits for it and
 * the child finds it released. */
NSBOX_INTERNAL void nsbox_fork_lock (struct nsbox_fork_registry *r);
NSBOX_INTERNAL void nsbox_fork_unlock (struct nsbox_fork_registry *r);

#endif
