/* The layer applier's file thread: creates and fills regular files in the
 * order they are queued while the applier reads on (creating inodes is
 * most of the cost of an unpack on some filesystems). The applier keeps
 * the order of the tree's changes: whatever could see or disturb a queued
 * file waits for rt_file_queue_drain first (see layer-entry.c). */
#ifndef NSBOX_FILEQUEUE_H
#define NSBOX_FILEQUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

/* A directory fd shared by the queued jobs that create files in it (and
 * the applier while it is its current parent): one fd per directory, not
 * per file, so a long queue stays far below RLIMIT_NOFILE. The last
 * holder closes it. */
struct rt_dir_ref
{
  atomic_uint refs;
  int fd;
};

/* A new reference (count 1) to a duplicate of `fd`; NULL with errno set. */
NSBOX_INTERNAL struct rt_dir_ref *rt_dir_ref_new (int fd);
NSBOX_INTERNAL struct rt_dir_ref *rt_dir_ref_get (struct rt_dir_ref *ref);
/* Drops a reference (NULL is fine). */
NSBOX_INTERNAL void rt_dir_ref_put (struct rt_dir_ref *ref);

/* One regular file to create as `base` in dir->fd (O_CREAT|O_EXCL), write
 * `data` to, then fchmod to `mode` and set `times` on. */
struct rt_file_job
{
  struct rt_file_job *next;
  struct rt_dir_ref *dir; /* a reference of its own; NULL until set */
  char *path;             /* owned, lexical, for messages; base points into it */
  const char *base;
  mode_t mode;
  struct timespec times[2];
  size_t len;
  unsigned char *data; /* owned */
};

/* Zero-initialised before use. Everything from `lock` on is shared with
 * the thread. */
struct rt_file_queue
{
  bool started, unavailable;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  struct rt_file_job *head, *tail;
  size_t jobs, bytes; /* queued or being written */
  bool stop;
  int error; /* the first failure: errno, step and path */
  const char *error_step;
  char *error_path;
};

/* Frees a job that was not queued. */
NSBOX_INTERNAL void rt_file_job_free (struct rt_file_job *job);
static inline void
rt_file_job_freep (struct rt_file_job **job)
{
  rt_file_job_free (*job);
}
#define cleanup_file_job __attribute__ ((cleanup (rt_file_job_freep)))

/* Starts the thread on first use; false when it cannot run (the caller
 * then writes its files itself). */
NSBOX_INTERNAL bool rt_file_queue_start (struct rt_file_queue *queue);
/* Queues a job, taking it, after waiting for room (at most max_jobs and,
 * beyond one job, max_bytes of data queued); false when a queued file has
 * already failed. */
NSBOX_INTERNAL bool rt_file_queue_push (struct rt_file_queue *queue, struct rt_file_job *job,
                                        size_t max_jobs, size_t max_bytes);
/* Waits until every queued file is written; returns 0, or the errno of the
 * first failure with *path and *step (the queue's) saying where. Once a
 * file failed, later jobs are dropped unwritten. */
NSBOX_INTERNAL int rt_file_queue_drain (struct rt_file_queue *queue, const char **path,
                                        const char **step);
/* How many jobs, and bytes of data, are queued or being written now. */
NSBOX_INTERNAL void rt_file_queue_pending (struct rt_file_queue *queue, size_t *jobs,
                                           size_t *bytes);
/* Drains the queue and stops the thread; the queue can start again. */
NSBOX_INTERNAL void rt_file_queue_stop (struct rt_file_queue *queue);

#endif
