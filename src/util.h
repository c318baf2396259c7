/* Small helpers shared by every module: cleanup attributes and ownership
 * transfer. */
#ifndef NSBOX_UTIL_H
#define NSBOX_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

#define cleanup_free __attribute__ ((cleanup (freep)))
#define cleanup_close __attribute__ ((cleanup (closep)))
#define cleanup_fclose __attribute__ ((cleanup (fclosep)))

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

#define ARRAY_SIZE(a) (sizeof (a) / sizeof ((a)[0]))

#endif
