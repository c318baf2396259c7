/* Raw HTTP/1.1 exchanges with `nsbox serve` for the overload and hostile
 * client tests (harness.h): no client library's forgiveness. Every byte of
 * a request is written, a failed write is recorded (never retried), and the
 * answer is read and checked whole, so a broken pipe, a reset or an answer
 * cut short shows as what it is. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

int
raw_connect (const struct raw_peer *p)
{
  int fd;
  if (p->unix_path)
    {
      fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      cr_assert (fd >= 0, "socket: %s", strerror (errno));
      struct sockaddr_un addr = { .sun_family = AF_UNIX };
      snprintf (addr.sun_path, sizeof addr.sun_path, "%s", p->unix_path);
      cr_assert (connect (fd, (struct sockaddr *)&addr, sizeof addr) == 0, "connect %s: %s",
                 p->unix_path, strerror (errno));
      return fd;
    }
  fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  cr_assert (fd >= 0, "socket: %s", strerror (errno));
  if (p->source)
    {
      struct sockaddr_in src = { .sin_family = AF_INET };
      cr_assert (inet_pton (AF_INET, p->source, &src.sin_addr) == 1);
      cr_assert (bind (fd, (struct sockaddr *)&src, sizeof src) == 0, "bind %s: %s", p->source,
                 strerror (errno));
    }
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons (p->port) };
  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  cr_assert (connect (fd, (struct sockaddr *)&addr, sizeof addr) == 0, "connect 127.0.0.1:%u: %s",
             (unsigned)p->port, strerror (errno));
  return fd;
}

char *
raw_request_head (const char *method, const char *path, size_t content_length, const char *auth)
{
  char *head = NULL;
  cr_assert (asprintf (&head,
                       "%s %s HTTP/1.1\r\nHost: nsbox\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n%s%s%s\r\n",
                       method, path, content_length, auth ? "Authorization: Bearer " : "",
                       auth ? auth : "", auth ? "\r\n" : "")
             > 0);
  return head;
}

/* The answer's head is in: its status and headers. */
static void
parse_head (struct raw_answer *a, size_t head_len)
{
  a->head = strndup (a->raw, head_len);
  cr_assert_not_null (a->head);
  if (sscanf (a->head, "HTTP/1.%*d %ld", &a->status) != 1)
    a->status = -1;
  for (char *line = strstr (a->head, "\r\n"); line; line = strstr (line, "\r\n"))
    {
      line += 2;
      if (strncasecmp (line, "Retry-After:", 12) == 0)
        a->retry_after = true;
      else if (strncasecmp (line, "Content-Type: application/json", 30) == 0)
        a->json = true;
      else if (strncasecmp (line, "Content-Length:", 15) == 0)
        a->content_length = strtoll (line + 15, NULL, 10);
    }
}

/* What came is taken: true once the answer is whole. */
static bool
took (struct raw_answer *a)
{
  if (!a->head)
    {
      char *end = memmem (a->raw, a->raw_len, "\r\n\r\n", 4);
      if (!end)
        return false;
      parse_head (a, (size_t)(end - a->raw) + 4);
      a->body_at = (size_t)(end - a->raw) + 4;
    }
  if (a->content_length < 0)
    return false;
  a->complete = a->raw_len - a->body_at >= (size_t)a->content_length;
  return a->complete;
}

/* Reads what is there; false at the end of the stream or an error. */
static bool
read_some (int fd, struct raw_answer *a)
{
  if (a->raw_len + 65536 > a->raw_alloc)
    {
      a->raw_alloc = a->raw_alloc ? a->raw_alloc * 2 : 131072;
      a->raw = realloc (a->raw, a->raw_alloc);
      cr_assert_not_null (a->raw);
    }
  ssize_t n = recv (fd, a->raw + a->raw_len, a->raw_alloc - a->raw_len - 1, MSG_DONTWAIT);
  if (n > 0)
    {
      a->raw_len += (size_t)n;
      a->raw[a->raw_len] = '\0';
      return true;
    }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  if (n < 0)
    a->read_errno = errno;
  else
    a->closed = true;
  return false;
}

void
raw_exchange_on (int fd, const char *head, const char *body, size_t body_len, bool stop_early,
                 double timeout, struct raw_answer *a)
{
  memset (a, 0, sizeof *a);
  a->status = -1;
  a->content_length = -1;
  const char *parts[2] = { head, body };
  size_t lens[2] = { head ? strlen (head) : 0, body ? body_len : 0 };
  size_t part = 0, off = 0;
  double until = now_seconds () + timeout;
  bool reading = true;
  while (reading && !a->complete)
    {
      while (part < 2 && off == lens[part])
        part++, off = 0;
      bool sending = part < 2 && !a->write_errno && !(stop_early && a->head);
      struct pollfd pfd = { .fd = fd, .events = (short)(POLLIN | (sending ? POLLOUT : 0)) };
      double left = until - now_seconds ();
      if (left <= 0)
        {
          a->timed_out = true;
          break;
        }
      if (poll (&pfd, 1, (int)(left * 1000) + 1) < 0)
        cr_assert (errno == EINTR, "poll: %s", strerror (errno));
      if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
        {
          reading = read_some (fd, a);
          took (a);
        }
      if (sending && (pfd.revents & POLLOUT))
        {
          size_t want = lens[part] - off;
          ssize_t n = send (fd, parts[part] + off, want > 262144 ? 262144 : want,
                            MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n > 0)
            {
              off += (size_t)n;
              a->sent += (size_t)n;
            }
          else if (n < 0 && errno != EAGAIN && errno != EINTR)
            a->write_errno = errno;
        }
    }
  a->unsent = lens[0] + lens[1] - a->sent;
  if (a->head)
    a->body = a->raw + a->body_at;
}

void
raw_exchange (const struct raw_peer *p, const char *head, const char *body, size_t body_len,
              struct raw_answer *a)
{
  int fd = raw_connect (p);
  raw_exchange_on (fd, head, body, body_len, false, harness_scaled (120), a);
  close (fd);
}

void
raw_answer_free (struct raw_answer *a)
{
  free (a->raw);
  free (a->head);
  memset (a, 0, sizeof *a);
}

bool
raw_closed_within (int fd, double seconds)
{
  double until = now_seconds () + seconds;
  char buf[4096];
  for (;;)
    {
      double left = until - now_seconds ();
      if (left <= 0)
        return false;
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      if (poll (&pfd, 1, (int)(left * 1000) + 1) <= 0)
        continue;
      ssize_t n = recv (fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return true;
    }
}

void
raise_nofile (rlim_t want)
{
  struct rlimit rl;
  cr_assert (getrlimit (RLIMIT_NOFILE, &rl) == 0);
  if (rl.rlim_cur >= want)
    return;
  cr_assert (rl.rlim_max >= want,
             "RLIMIT_NOFILE's hard limit %llu is under the %llu this test needs",
             (unsigned long long)rl.rlim_max, (unsigned long long)want);
  rl.rlim_cur = want;
  cr_assert (setrlimit (RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror (errno));
}

long
proc_status_kib (pid_t pid, const char *field)
{
  char path[64], line[256];
  snprintf (path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen (path, "re");
  cr_assert_not_null (f, "%s: %s", path, strerror (errno));
  size_t n = strlen (field);
  long kib = -1;
  while (fgets (line, sizeof line, f))
    if (strncmp (line, field, n) == 0 && line[n] == ':')
      kib = strtol (line + n + 1, NULL, 10);
  fclose (f);
  cr_assert (kib >= 0, "%s has no %s", path, field);
  return kib;
}

int
proc_socket_count (pid_t pid)
{
  char dir[64], path[320], target[64];
  snprintf (dir, sizeof dir, "/proc/%d/fd", (int)pid);
  DIR *d = opendir (dir);
  cr_assert_not_null (d, "%s: %s", dir, strerror (errno));
  int count = 0;
  for (struct dirent *e; (e = readdir (d));)
    {
      snprintf (path, sizeof path, "%s/%s", dir, e->d_name);
      ssize_t n = readlink (path, target, sizeof target - 1);
      if (n <= 0)
        continue;
      target[n] = '\0';
      count += strncmp (target, "socket:", 7) == 0;
    }
  closedir (d);
  return count;
}
