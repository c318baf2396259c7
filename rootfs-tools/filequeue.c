/* The layer applier's file thread; see filequeue.h. */
#include "filequeue.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

struct rt_dir_ref *
rt_dir_ref_new (int fd)
{
  struct rt_dir_ref *ref = malloc (sizeof *ref);
  if (!ref)
    return NULL;
  ref->fd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (ref->fd < 0)
    {
      int saved = errno;
      free (ref);
      errno = saved;
      return NULL;
    }
  atomic_init (&ref->refs, 1);
  return ref;
}

struct rt_dir_ref *
rt_dir_ref_get (struct rt_dir_ref *ref)
{
  atomic_fetch_add_explicit (&ref->refs, 1, memory_order_relaxed);
  return ref;
}

void
rt_dir_ref_put (struct rt_dir_ref *ref)
{
  if (!ref || atomic_fetch_sub_explicit (&ref->refs, 1, memory_order_acq_rel) != 1)
    return;
  close (ref->fd);
  free (ref);
}

void
rt_file_job_free (struct rt_file_job *job)
{
  if (!job)
    return;
  rt_dir_ref_put (job->dir);
  free (job->path);
  free (job->data);
  free (job);
}

/* Creates and fills one file; 0 or an errno, *step saying what failed. */
static int
job_run (const struct rt_file_job *job, const char **step)
{
  cleanup_close int fd = openat (job->dir->fd, job->base,
                                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    {
      *step = "create";
      return errno;
    }
  int r = nsbox_write_all (fd, job->data, job->len);
  if (r < 0)
    {
      *step = "write";
      return -r;
    }
  if (fchmod (fd, job->mode) < 0)
    {
      *step = "chmod";
      return errno;
    }
  if (futimens (fd, job->times) < 0)
    {
      *step = "set times";
      return errno;
    }
  return 0;
}

static void *
file_thread (void *data)
{
  struct rt_file_queue *q = data;
  pthread_mutex_lock (&q->lock);
  for (;;)
    {
      while (!q->head && !q->stop)
        pthread_cond_wait (&q->wake, &q->lock);
      struct rt_file_job *job = q->head;
      if (!job)
        break;
      q->head = job->next;
      if (!q->head)
        q->tail = NULL;
      bool skip = q->error != 0;
      pthread_mutex_unlock (&q->lock);
      const char *step = NULL;
      int failure = skip ? 0 : job_run (job, &step);
      size_t len = job->len;
      char *path = failure ? TAKE_PTR (job->path) : NULL;
      rt_file_job_free (job);
      pthread_mutex_lock (&q->lock);
      if (failure && !q->error)
        {
          q->error = failure;
          q->error_step = step;
          q->error_path = TAKE_PTR (path);
        }
      free (path);
      q->jobs--;
      q->bytes -= len;
      pthread_cond_signal (&q->done);
    }
  pthread_mutex_unlock (&q->lock);
  return NULL;
}

bool
rt_file_queue_start (struct rt_file_queue *q)
{
  if (q->started)
    return true;
  if (q->unavailable)
    return false;
  q->unavailable = true;
  if (pthread_mutex_init (&q->lock, NULL) != 0)
    return false;
  if (pthread_cond_init (&q->wake, NULL) != 0)
    goto no_wake;
  if (pthread_cond_init (&q->done, NULL) != 0)
    goto no_done;
  q->stop = false;
  /* Signals are for the caller's threads. */
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  int r = pthread_create (&q->thread, NULL, file_thread, q);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (r == 0)
    {
      q->started = true;
      q->unavailable = false;
      return true;
    }
  pthread_cond_destroy (&q->done);
no_done:
  pthread_cond_destroy (&q->wake);
no_wake:
  pthread_mutex_destroy (&q->lock);
  return false;
}

bool
rt_file_queue_push (struct rt_file_queue *q, struct rt_file_job *job, size_t max_jobs,
                    size_t max_bytes)
{
  pthread_mutex_lock (&q->lock);
  while (q->jobs >= max_jobs || (q->jobs > 0 && q->bytes + job->len > max_bytes))
    pthread_cond_wait (&q->done, &q->lock);
  job->next = NULL;
  if (q->tail)
    q->tail->next = job;
  else
    q->head = job;
  q->tail = job;
  q->jobs++;
  q->bytes += job->len;
  bool ok = q->error == 0;
  pthread_cond_signal (&q->wake);
  pthread_mutex_unlock (&q->lock);
  return ok;
}

int
rt_file_queue_drain (struct rt_file_queue *q, const char **path, const char **step)
{
  if (!q->started)
    return 0;
  pthread_mutex_lock (&q->lock);
  while (q->jobs > 0)
    pthread_cond_wait (&q->done, &q->lock);
  int failure = q->error;
  pthread_mutex_unlock (&q->lock);
  if (failure)
    {
      *path = q->error_path ? q->error_path : "?";
      *step = q->error_step;
    }
  return failure;
}

void
rt_file_queue_pending (struct rt_file_queue *q, size_t *jobs, size_t *bytes)
{
  if (!q->started)
    {
      *jobs = *bytes = 0;
      return;
    }
  pthread_mutex_lock (&q->lock);
  *jobs = q->jobs;
  *bytes = q->bytes;
  pthread_mutex_unlock (&q->lock);
}

void
rt_file_queue_stop (struct rt_file_queue *q)
{
  if (!q->started)
    return;
  pthread_mutex_lock (&q->lock);
  q->stop = true;
  pthread_cond_signal (&q->wake);
  pthread_mutex_unlock (&q->lock);
  pthread_join (q->thread, NULL);
  pthread_cond_destroy (&q->done);
  pthread_cond_destroy (&q->wake);
  pthread_mutex_destroy (&q->lock);
  free (q->error_path);
  q->error_path = NULL;
  q->error = 0;
  q->started = false;
}
