/* One pthread_atfork registration for every registry of the process. */
#include <pthread.h>
#include <stddef.h>

#include "forksafe.h"

static pthread_mutex_t registries_lock = PTHREAD_MUTEX_INITIALIZER;
/* Newest first: the order prepare walks them in. */
static struct nsbox_fork_registry *registries;
static pthread_once_t registries_once = PTHREAD_ONCE_INIT;

static void
registry_prepare (struct nsbox_fork_registry *r)
{
  pthread_mutex_lock (&r->lock);
  if (r->lock_each)
    for (struct nsbox_fork_node *n = r->head; n; n = n->next)
      r->lock_each (n);
}

static void
fork_prepare (void)
{
  pthread_mutex_lock (&registries_lock);
  for (struct nsbox_fork_registry *r = registries; r; r = r->next_registry)
    registry_prepare (r);
}

/* Oldest first, as pthread_atfork runs parent and child handlers. */
static void
walk_oldest_first (struct nsbox_fork_registry *r, bool child)
{
  if (!r)
    return;
  walk_oldest_first (r->next_registry, child);
  if (child)
    {
      for (struct nsbox_fork_node *n = r->head, *next; n; n = next)
        {
          next = n->next;
          n->prev = n->next = NULL;
          if (r->child_each)
            r->child_each (n);
        }
      r->head = NULL;
    }
  else if (r->unlock_each)
    for (struct nsbox_fork_node *n = r->head; n; n = n->next)
      r->unlock_each (n);
  pthread_mutex_unlock (&r->lock);
}

static void
fork_parent (void)
{
  walk_oldest_first (registries, false);
  pthread_mutex_unlock (&registries_lock);
}

static void
fork_child (void)
{
  walk_oldest_first (registries, true);
  pthread_mutex_unlock (&registries_lock);
}

static void
register_atfork (void)
{
  pthread_atfork (fork_prepare, fork_parent, fork_child);
}

/* Called before the registry's lock is first taken, so a fork that
 * finds it enrolled also finds its lock. */
static void
enroll (struct nsbox_fork_registry *r)
{
  if (__atomic_load_n (&r->enrolled, __ATOMIC_ACQUIRE))
    return;
  pthread_once (&registries_once, register_atfork);
  pthread_mutex_lock (&registries_lock);
  if (!r->enrolled)
    {
      r->next_registry = registries;
      registries = r;
      __atomic_store_n (&r->enrolled, true, __ATOMIC_RELEASE);
    }
  pthread_mutex_unlock (&registries_lock);
}

void
nsbox_fork_lock (struct nsbox_fork_registry *r)
{
  enroll (r);
  pthread_mutex_lock (&r->lock);
}

void
nsbox_fork_unlock (struct nsbox_fork_registry *r)
{
  pthread_mutex_unlock (&r->lock);
}

void
nsbox_fork_add (struct nsbox_fork_registry *r, struct nsbox_fork_node *node)
{
  nsbox_fork_lock (r);
  node->prev = NULL;
  node->next = r->head;
  if (r->head)
    r->head->prev = node;
  r->head = node;
  pthread_mutex_unlock (&r->lock);
}

void
nsbox_fork_remove (struct nsbox_fork_registry *r, struct nsbox_fork_node *node)
{
  pthread_mutex_lock (&r->lock);
  if (node->prev)
    node->prev->next = node->next;
  else if (r->head == node)
    r->head = node->next;
  if (node->next)
    node->next->prev = node->prev;
  node->prev = node->next = NULL;
  pthread_mutex_unlock (&r->lock);
}
