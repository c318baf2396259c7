/* The ground floor under src/ and rootfs-tools/: cleanup attributes,
 * ownership transfer, and the small helpers every module would otherwise
 * write again (util.c). The cleanup helpers of the libraries (jansson,
 * libseccomp, libcap, libarchive, libcurl, libyaml) exist where the
 * library's header was included before util.h: include it after them. */
#ifndef NSBOX_UTIL_H
#define NSBOX_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include "nsbox.h"

/* Every symbol of libnsbox that is not part of include/nsbox.h. */
#define NSBOX_INTERNAL __attribute__ ((visibility ("hidden")))

static inline void
freep (void *p)
{
  free (*(void **)p);
}

static inline void
closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
}

static inline void
fclosep (FILE **f)
{
  if (*f)
    fclose (*f);
}

/* String vectors: a NULL-terminated array of strings, owned with them. */
void nsbox_strv_free (char **strv) NSBOX_INTERNAL;

/* A copy of the first count strings of strv, or NULL when out of memory. */
char **nsbox_strv_dup (const char *const *strv, size_t count) NSBOX_INTERNAL;

/* Appends item to *strv, which holds *count strings, taking item even on
 * failure (it is freed then); a NULL item, such as a failed strdup, is
 * -ENOMEM. 0, or -ENOMEM with *strv and *count unchanged. */
int nsbox_strv_append (char ***strv, size_t *count, char *item) NSBOX_INTERNAL;

static inline void
strvfreep (char ***strv)
{
  nsbox_strv_free (*strv);
}

#define cleanup_free __attribute__ ((cleanup (freep)))
#define cleanup_close __attribute__ ((cleanup (closep)))
#define cleanup_fclose __attribute__ ((cleanup (fclosep)))
#define cleanup_strv __attribute__ ((cleanup (strvfreep)))

#define TAKE_PTR(p)                                                                                \
  ({                                                                                               \
    __typeof__ (p) taken_ = (p);                                                                   \
    (p) = NULL;                                                                                    \
    taken_;                                                                                        \
  })

#define TAKE_FD(fd)                                                                                \
  ({                                                                                               \
    int taken_ = (fd);                                                                             \
    (fd) = -1;                                                                                     \
    taken_;                                                                                        \
  })

/* Closes the fd in *fd, if any, emptying the slot first: a fork in between
 * must not find a number another thread may reuse (the fork handlers close
 * what they find in the child). */
static inline void
nsbox_close_slot (int *fd)
{
  int was = TAKE_FD (*fd);
  if (was >= 0)
    close (was);
}

/* Adds O_NONBLOCK to an open fd's flags; -1 is allowed (nothing done). */
void nsbox_set_nonblocking (int fd) NSBOX_INTERNAL;

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))
/* The structure that holds MEMBER at PTR. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof (type, member)))

/* asprintf that returns the string, or NULL when out of memory. */
char *xasprintf (const char *fmt, ...) __attribute__ ((format (printf, 1, 2))) NSBOX_INTERNAL;
char *vxasprintf (const char *fmt, va_list ap)
    __attribute__ ((format (printf, 1, 0))) NSBOX_INTERNAL;

/* Writes all of data to fd, retrying short writes and EINTR: 0, or -errno
 * (-EIO when the fd takes nothing). */
int nsbox_write_all (int fd, const void *data, size_t len) NSBOX_INTERNAL;

/* One read(2) of a small file (cgroupfs, /proc) into buf, NUL-terminated:
 * the byte count, or -errno. */
int nsbox_read_small (const char *path, char *buf, size_t size) NSBOX_INTERNAL;

/* Fields first..first+n-1 (numbered as in proc(5)) of a /proc/PID/stat
 * file into out; false unless all are there. */
bool nsbox_proc_stat_fields (const char *path, int first, int n, uint64_t *out) NSBOX_INTERNAL;

/* The user and system CPU time of a rusage, in microseconds. Only
 * arithmetic: init calls it between clone and exec. */
static inline uint64_t
nsbox_rusage_cpu_usec (const struct rusage *ru)
{
  return (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000
         + (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec);
}

/* CLOCK_REALTIME in milliseconds (what a log or a state file records). */
uint64_t nsbox_realtime_ms (void) NSBOX_INTERNAL;

/* 128 bits from getrandom as 32 lowercase hex digits and a NUL: an audit
 * record's id, a live sandbox's. 0 or -errno. */
int nsbox_random_id (char id[33]) NSBOX_INTERNAL;

/* CLOCK_MONOTONIC, in milliseconds and in seconds (deadlines, latencies). */
uint64_t nsbox_now_ms (void) NSBOX_INTERNAL;
uint64_t nsbox_now_usec (void) NSBOX_INTERNAL;
/* The monotonic time ms from now, for pthread_cond_timedwait on a
 * condition whose clock is CLOCK_MONOTONIC. */
struct timespec nsbox_monotonic_after (uint64_t ms) NSBOX_INTERNAL;
double nsbox_now_seconds (void) NSBOX_INTERNAL;
/* Initialises a condition whose timed waits take a deadline from
 * nsbox_monotonic_after (its clock is CLOCK_MONOTONIC). */
void nsbox_cond_init_monotonic (pthread_cond_t *cond) NSBOX_INTERNAL;

/* free() that first wipes the whole block (malloc_usable_size): what held a
 * client's code or files, in a process that pooled sandboxes are cloned
 * from. The free function serve and mcp give jansson. */
void nsbox_zeroing_free (void *p) NSBOX_INTERNAL;

/* A program's message on stderr, "PROGRAM: MESSAGE" and a newline, written
 * at once. Only the programs print: never library code. */
void nsbox_vprint_message (const char *program, const char *fmt, va_list ap) NSBOX_INTERNAL
    __attribute__ ((format (printf, 2, 0)));

/* The image store's directory when none is configured: $NSBOX_STORE, else
 * /var/lib/nsbox for root, else ${XDG_CACHE_HOME:-$HOME/.cache}/nsbox;
 * NULL when none can be named or out of memory. */
char *nsbox_default_store (void) NSBOX_INTERNAL;

/* A launcher killed with SIGKILL cannot remove what it made for its run
 * (cgroups, a runsc work dir), named PREFIX<its pid>-...: this calls
 * remove(dirfd, name) for each such entry of dir whose launcher is gone,
 * for the next run to clean up. */
void nsbox_sweep_stale (const char *dir, const char *prefix,
                        void (*remove) (int dir_fd, const char *name)) NSBOX_INTERNAL;

#endif

/* The cleanup helpers of the libraries: outside the include guard, each
 * defined once, by the first inclusion that follows the library's header. */
#if defined(JANSSON_H) && !defined(NSBOX_UTIL_JANSSON)
#define NSBOX_UTIL_JANSSON
/* jansson's own json_decrefp */
#define cleanup_json __attribute__ ((cleanup (json_decrefp)))
#endif

#if defined(_SECCOMP_H) && !defined(NSBOX_UTIL_SECCOMP)
#define NSBOX_UTIL_SECCOMP
static inline void
seccomp_releasep (scmp_filter_ctx *ctx)
{
  if (*ctx)
    seccomp_release (*ctx);
}
#define cleanup_seccomp __attribute__ ((cleanup (seccomp_releasep)))
#endif

#if defined(_SYS_CAPABILITY_H) && !defined(NSBOX_UTIL_CAP)
#define NSBOX_UTIL_CAP
static inline void
cap_freep (cap_t *caps)
{
  if (*caps)
    cap_free (*caps);
}
#define cleanup_cap __attribute__ ((cleanup (cap_freep)))
#endif

#if defined(ARCHIVE_H_INCLUDED) && !defined(NSBOX_UTIL_ARCHIVE)
#define NSBOX_UTIL_ARCHIVE
static inline void
archive_read_freep (struct archive **a)
{
  if (*a)
    archive_read_free (*a);
}
#define cleanup_archive __attribute__ ((cleanup (archive_read_freep)))
#endif

#if defined(CURLINC_CURL_H) && !defined(NSBOX_UTIL_CURL)
#define NSBOX_UTIL_CURL
static inline void
curl_easy_cleanupp (CURL **curl)
{
  if (*curl)
    curl_easy_cleanup (*curl);
}
static inline void
curl_slist_free_allp (struct curl_slist **list)
{
  curl_slist_free_all (*list);
}
#define cleanup_curl __attribute__ ((cleanup (curl_easy_cleanupp)))
#define cleanup_curl_slist __attribute__ ((cleanup (curl_slist_free_allp)))
#endif

#if defined(YAML_H) && !defined(NSBOX_UTIL_YAML)
#define NSBOX_UTIL_YAML
static inline void
yaml_document_deletep (yaml_document_t *doc)
{
  yaml_document_delete (doc);
}
static inline void
yaml_parser_deletep (yaml_parser_t *parser)
{
  yaml_parser_delete (parser);
}
static inline void
yaml_event_deletep (yaml_event_t *event)
{
  yaml_event_delete (event);
}
#define cleanup_yaml_event __attribute__ ((cleanup (yaml_event_deletep)))
#define cleanup_yaml_document __attribute__ ((cleanup (yaml_document_deletep)))
#define cleanup_yaml_parser __attribute__ ((cleanup (yaml_parser_deletep)))
#endif
