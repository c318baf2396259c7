/* nsbox_image_hold (image.h) for the nsbox CLI: nsbox_image_tool_hold asks `nsbox-image resolve
 * --pass-lock` over a unix socket, so that the CLI loads neither libcurl
 * nor libarchive (48 shared libraries, several milliseconds) on every run.
 * The tool's answer is one record: 'L' with the store's lock fd
 * (SCM_RIGHTS), then NUL-terminated items: the store root, the rootfs and
 * the image's Env entries; or 'E' and its error message. Its stderr (the
 * pull's progress bar) passes through. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "image_tool.h"
#include "util.h"

/* The longest answer: a rootfs path and an image's Env. */
#define ANSWER_MAX (4u << 20)

/* nsbox-image beside this binary, else the one in PATH. */
static char *
tool_path (void)
{
  char self[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n > 0)
    {
      self[n] = '\0';
      char *slash = strrchr (self, '/');
      char *path = slash ? xasprintf ("%.*s/nsbox-image", (int)(slash - self), self) : NULL;
      if (path && access (path, X_OK) == 0)
        return path;
      free (path);
    }
  return strdup ("nsbox-image");
}

/* One read of the socket: data into buf, a passed fd into *lock_fd (the
 * first one kept, any other closed). */
static ssize_t
receive_some (int sock, char *buf, size_t size, int *lock_fd)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int) * 4)];
    struct cmsghdr align;
  } control;
  struct iovec iov = { buf, size };
  struct msghdr msg = { .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf };
  ssize_t n = recvmsg (sock, &msg, MSG_CMSG_CLOEXEC);
  for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR (&msg) : NULL; cm; cm = CMSG_NXTHDR (&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int); i++)
        {
          int fd;
          memcpy (&fd, CMSG_DATA (cm) + i * sizeof (int), sizeof fd);
          if (*lock_fd < 0)
            *lock_fd = fd;
          else
            close (fd);
        }
  return n;
}

/* Runs the tool with its stdout on a socket; its whole answer (at most
 * ANSWER_MAX bytes) in *answer, the fd it passed in *lock_fd, its wait
 * status in *status. */
static int
run_tool (const char *const *argv, char **answer, size_t *len, int *lock_fd, int *status,
          struct nsbox_error **err)
{
  int fds[2];
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    return nsbox_error_sys (err, errno, "create a socket pair for %s", argv[0]);
  pid_t pid = fork ();
  if (pid < 0)
    {
      int e = errno;
      close (fds[0]);
      close (fds[1]);
      return nsbox_error_sys (err, e, "fork to run %s", argv[0]);
    }
  if (pid == 0)
    {
      dup2 (fds[1], STDOUT_FILENO);
      execvp (argv[0], (char *const *)argv);
      char message[512];
      int n = snprintf (message, sizeof message, "E cannot run '%s' to resolve the image: %s",
                        argv[0], strerror (errno));
      if (n > 0)
        nsbox_write_all (STDOUT_FILENO, message, strlen (message) + 1);
      _exit (127);
    }
  close (fds[1]);
  size_t alloc = 65536, used = 0;
  cleanup_free char *buf = malloc (alloc);
  ssize_t n = 0;
  int e = 0;
  while (buf && (n = receive_some (fds[0], buf + used, alloc - used - 1, lock_fd)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          e = errno;
          break;
        }
      used += (size_t)n;
      if (used == alloc - 1 && alloc >= ANSWER_MAX)
        {
          e = EFBIG;
          break;
        }
      char *grown = used == alloc - 1 ? realloc (buf, alloc *= 2) : buf;
      if (!grown)
        break;
      buf = grown;
    }
  close (fds[0]);
  while (waitpid (pid, status, 0) < 0 && errno == EINTR)
    ;
  if (!buf || (n != 0 && e == 0))
    return nsbox_error_oom (err);
  if (e)
    return nsbox_error_sys (err, e, "read the answer of '%s'", argv[0]);
  buf[used] = '\0';
  *answer = TAKE_PTR (buf);
  *len = used;
  return 0;
}

int
nsbox_image_tool_hold (const char *store, const char *ref, enum nsbox_pull_policy policy,
                       struct nsbox_image *image, struct nsbox_error **err)
{
  *image = (struct nsbox_image){ .lock_fd = -1 };
  cleanup_free char *tool = tool_path ();
  if (!tool)
    return nsbox_error_oom (err);
  const char *argv[9];
  int argc = 0;
  argv[argc++] = tool;
  if (store)
    {
      argv[argc++] = "--store";
      argv[argc++] = store;
    }
  argv[argc++] = "resolve";
  argv[argc++] = "--pass-lock";
  argv[argc++] = "--pull";
  argv[argc++] = nsbox_pull_policy_name (policy);
  argv[argc++] = ref;
  argv[argc] = NULL;
  cleanup_free char *answer = NULL;
  size_t len = 0;
  int status = 0;
  int ret = run_tool (argv, &answer, &len, &image->lock_fd, &status, err);
  if (ret < 0)
    {
      nsbox_image_release (image);
      return ret;
    }
  if (len > 2 && answer[0] == 'E')
    {
      /* "E ERRNO MESSAGE": the tool's errno (ENOENT: not in the store). */
      char *end = NULL;
      long e = strtol (answer + 2, &end, 10);
      bool numbered = end && end != answer + 2 && *end == ' ' && e > 0 && e < 4096;
      ret = nsbox_error_set (err, numbered ? (int)e : EIO, "%s", numbered ? end + 1 : answer + 2);
    }
  else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    ret = nsbox_error_set (err, EIO, "'%s resolve %s' failed (wait status %d)", tool, ref, status);
  else if (image->lock_fd < 0 || len < 1 || answer[0] != 'L')
    ret = nsbox_error_set (err, EPROTO, "'%s resolve %s' did not pass the store's lock", tool, ref);
  else if (answer[len - 1] != '\0')
    ret = nsbox_error_set (err, EPROTO, "'%s resolve %s' gave a truncated answer", tool, ref);
  /* The lock's byte, the store root, the rootfs, the manifest digest, then
   * the Env entries. */
  const char *item = answer + 1;
  const char *end = answer + len;
  size_t env_len = 0;
  for (int i = 0; ret == 0 && item < end; i++, item += strlen (item) + 1)
    if (i == 1 && !(image->rootfs = strdup (item)))
      ret = nsbox_error_oom (err);
    else if (i == 2 && !(image->digest = strdup (item)))
      ret = nsbox_error_oom (err);
    else if (i >= 3 && nsbox_strv_append (&image->env, &env_len, strdup (item)) < 0)
      ret = nsbox_error_oom (err);
  /* A digest is "sha256:" and 64 lowercase hex digits (an nsbox-image
   * older than this nsbox would put an Env entry there). */
  bool digest_ok = image->digest && strlen (image->digest) == 71
                   && strncmp (image->digest, "sha256:", 7) == 0
                   && strspn (image->digest + 7, "0123456789abcdef") == 64;
  if (ret == 0 && image->digest && !digest_ok)
    ret = nsbox_error_set (err, EPROTO,
                           "'%s resolve %s' gave no manifest digest: is it the nsbox-image of "
                           "this nsbox?",
                           tool, ref);
  if (ret == 0 && (!image->rootfs || !image->digest))
    ret = nsbox_error_set (err, EPROTO, "'%s resolve %s' gave no rootfs or no digest", tool, ref);
  if (ret == 0 && !image->env && !(image->env = calloc (1, sizeof *image->env)))
    ret = nsbox_error_oom (err);
  if (ret < 0)
    nsbox_image_release (image);
  return ret;
}
