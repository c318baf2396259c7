/* A call's files (mcp.h): the `files` argument decoded into a private
 * directory and given to the run as inputs (/mnt/in/NAME in the sandbox),
 * and the files the program left in /tmp/out, collected by the library
 * into another private directory, returned as MCP content. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "mcp_files.h"
#include "remove.h"
#include "result.h"
#include "util.h"

/* ---- base64 ---- */

static const char b64_alphabet[]
    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
nsbox_mcp_base64_encode (const void *data, size_t len)
{
  const unsigned char *in = data;
  if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
    return NULL;
  char *out = malloc ((len + 2) / 3 * 4 + 1), *o = out;
  if (!out)
    return NULL;
  size_t i = 0;
  for (; i + 3 <= len; i += 3)
    {
      uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
      *o++ = b64_alphabet[v >> 18];
      *o++ = b64_alphabet[(v >> 12) & 63];
      *o++ = b64_alphabet[(v >> 6) & 63];
      *o++ = b64_alphabet[v & 63];
    }
  if (i < len)
    {
      uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
      *o++ = b64_alphabet[v >> 18];
      *o++ = b64_alphabet[(v >> 12) & 63];
      *o++ = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
      *o++ = '=';
    }
  *o = '\0';
  return out;
}

static int
b64_value (unsigned char c)
{
  const char *p = c ? strchr (b64_alphabet, c) : NULL;
  return p ? (int)(p - b64_alphabet) : -1;
}

int
nsbox_mcp_base64_decode (const char *text, size_t text_len, size_t max, unsigned char **out,
                         size_t *out_len)
{
  if (text_len % 4 != 0)
    return -1;
  size_t pad = 0;
  if (text_len >= 1 && text[text_len - 1] == '=')
    pad++;
  if (text_len >= 2 && text[text_len - 2] == '=')
    pad++;
  size_t len = text_len / 4 * 3 - pad;
  if (len > max)
    return -1;
  unsigned char *buf = malloc (len + 1);
  if (!buf)
    return -1;
  size_t o = 0;
  for (size_t i = 0; i < text_len; i += 4)
    {
      bool last = i + 4 == text_len;
      int v[4];
      for (int k = 0; k < 4; k++)
        {
          bool padding = last && k >= 4 - (int)pad;
          v[k] = padding ? 0 : b64_value ((unsigned char)text[i + k]);
          if (v[k] < 0)
            {
              free (buf);
              return -1;
            }
        }
      uint32_t w
          = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
      unsigned char bytes[3]
          = { (unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w };
      size_t n = last ? 3 - pad : 3;
      memcpy (buf + o, bytes, n);
      o += n;
    }
  *out = buf;
  *out_len = o;
  return 0;
}

/* ---- in ---- */

static char *
private_dir (const char *what)
{
  const char *base = getenv ("TMPDIR");
  if (!base || base[0] != '/')
    base = "/tmp";
  char *path = xasprintf ("%s/nsbox-mcp-%s.XXXXXX", base, what);
  if (path && !mkdtemp (path)) /* 0700 */
    {
      free (path);
      return NULL;
    }
  return path;
}

static int
write_input (int dir_fd, const char *file, const unsigned char *data, size_t len)
{
  cleanup_close int fd
      = openat (dir_fd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return -errno;
  return nsbox_write_all (fd, data, len);
}

/* One {"name", "content"} into dir_fd/<index>, added to the run's inputs. */
static int
add_input (json_t *item, size_t index, int dir_fd, const char *dir, size_t *total,
           nsbox_run_options *options, char *why, size_t size)
{
  const char *name = json_string_value (json_object_get (item, "name"));
  json_t *content = json_object_get (item, "content");
  const char *bad = NULL;
  if (!json_is_object (item) || !name || !json_is_string (content))
    {
      snprintf (why, size,
                "argument 'files': item %zu must be {\"name\": string, \"content\": "
                "base64 string}",
                index);
      return -1;
    }
  if (!nsbox_file_name_valid (name, json_string_length (json_object_get (item, "name")), &bad))
    {
      snprintf (why, size, "argument 'files': name '%.100s': %s", name, bad);
      return -1;
    }
  unsigned char *data = NULL;
  size_t len = 0;
  if (nsbox_mcp_base64_decode (json_string_value (content), json_string_length (content),
                               NSBOX_MCP_MAX_INPUT_BYTES - *total, &data, &len)
      < 0)
    {
      snprintf (why, size,
                "argument 'files': '%.100s': content is not base64 or the files exceed %u MiB",
                name, NSBOX_MCP_MAX_INPUT_BYTES >> 20);
      return -1;
    }
  *total += len;
  char file[32];
  snprintf (file, sizeof file, "%zu", index);
  int r = write_input (dir_fd, file, data, len);
  explicit_bzero (data, len);
  free (data);
  if (r < 0)
    {
      snprintf (why, size, "write input file '%s/%s': %s", dir, file, strerror (-r));
      return -2;
    }
  cleanup_free char *spec = xasprintf ("%s/%s:%s", dir, file, name);
  struct nsbox_error *err = NULL;
  if (!spec || nsbox_run_options_set (options, "inputs", spec, &err) < 0)
    {
      snprintf (why, size, "input '%s': %s", name,
                err ? nsbox_error_message (err) : "out of memory");
      nsbox_error_free (err);
      return -2;
    }
  return 0;
}

int
nsbox_mcp_files_prepare (json_t *files, bool want_output, nsbox_run_options *options,
                         struct nsbox_mcp_files *f, char *why, size_t size)
{
  if (files && (!json_is_array (files) || json_array_size (files) > NSBOX_MCP_MAX_FILES))
    {
      snprintf (why, size, "argument 'files' must be an array of at most %d {name, content}",
                NSBOX_MCP_MAX_FILES);
      return -1;
    }
  if (files && json_array_size (files) > 0)
    {
      /* Two inputs of one name: the second would replace the first. */
      for (size_t i = 0; i < json_array_size (files); i++)
        for (size_t j = 0; j < i; j++)
          {
            json_t *a = json_object_get (json_array_get (files, i), "name");
            if (a && json_equal (a, json_object_get (json_array_get (files, j), "name")))
              {
                snprintf (why, size, "argument 'files': two files named '%.100s'",
                          json_string_value (a) ? json_string_value (a) : "?");
                return -1;
              }
          }
      f->in_path = private_dir ("in");
      cleanup_close int dir_fd
          = f->in_path ? open (f->in_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
      if (dir_fd < 0)
        {
          snprintf (why, size, "make a private input directory: %s", strerror (errno));
          return -2;
        }
      size_t total = 0, i;
      json_t *item;
      json_array_foreach (files, i, item)
      {
        int r = add_input (item, i, dir_fd, f->in_path, &total, options, why, size);
        if (r < 0)
          return r;
      }
    }
  if (want_output)
    {
      struct nsbox_error *err = NULL;
      f->out_path = private_dir ("out");
      if (!f->out_path || nsbox_run_options_set (options, "output-dir", f->out_path, &err) < 0)
        {
          snprintf (why, size, "output directory: %s",
                    err ? nsbox_error_message (err) : strerror (errno));
          nsbox_error_free (err);
          return -2;
        }
    }
  return 0;
}

/* ---- out ---- */

static const char *
image_type (const unsigned char *d, size_t n)
{
  if (n >= 8 && memcmp (d, "\x89PNG\r\n\x1a\n", 8) == 0)
    return "image/png";
  if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff)
    return "image/jpeg";
  if (n >= 6 && (memcmp (d, "GIF87a", 6) == 0 || memcmp (d, "GIF89a", 6) == 0))
    return "image/gif";
  if (n >= 12 && memcmp (d, "RIFF", 4) == 0 && memcmp (d + 8, "WEBP", 4) == 0)
    return "image/webp";
  return NULL;
}

static const char *
text_type (const char *name)
{
  static const struct
  {
    const char *suffix, *type;
  } types[] = { { ".csv", "text/csv" },      { ".json", "application/json" },
                { ".html", "text/html" },    { ".md", "text/markdown" },
                { ".svg", "image/svg+xml" }, { ".xml", "application/xml" },
                { ".py", "text/x-python" } };
  size_t n = strlen (name);
  for (size_t i = 0; i < ARRAY_SIZE (types); i++)
    {
      size_t k = strlen (types[i].suffix);
      if (n > k && strcmp (name + n - k, types[i].suffix) == 0)
        return types[i].type;
    }
  return "text/plain";
}

/* nsbox://out/NAME with NAME percent-encoded past the unreserved set. */
static char *
file_uri (const char *name)
{
  size_t n = strlen (name);
  char *uri = malloc (sizeof "nsbox://out/" + 3 * n), *o = uri;
  if (!uri)
    return NULL;
  o = stpcpy (o, "nsbox://out/");
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')
        || strchr ("-._~", *p))
      *o++ = (char)*p;
    else
      o += sprintf (o, "%%%02X", *p);
  *o = '\0';
  return uri;
}

static bool
valid_utf8 (const unsigned char *data, size_t len)
{
  cleanup_free char *clean = NULL;
  size_t clean_len = 0;
  if (nsbox_utf8_sanitize ((const char *)data, len, &clean, &clean_len) < 0)
    return false;
  return clean_len == len && memcmp (clean, data, len) == 0;
}

/* The whole file dir_fd/name, a regular file not reached through a link. */
static int
read_output (int dir_fd, const char *name, uint64_t max, unsigned char **data, size_t *len)
{
  cleanup_close int fd = openat (dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0)
    return -errno;
  if (!S_ISREG (st.st_mode))
    return -EINVAL;
  if ((uint64_t)st.st_size > max)
    return -EFBIG;
  unsigned char *buf = malloc ((size_t)st.st_size + 1);
  if (!buf)
    return -ENOMEM;
  size_t got = 0;
  while (got < (size_t)st.st_size)
    {
      ssize_t n = read (fd, buf + got, (size_t)st.st_size - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += (size_t)n;
    }
  *data = buf;
  *len = got;
  return 0;
}

static json_t *
file_content (const char *name, const unsigned char *data, size_t len)
{
  const char *image = image_type (data, len);
  if (image)
    {
      cleanup_free char *b64 = nsbox_mcp_base64_encode (data, len);
      return b64 ? json_pack ("{s:s,s:s,s:s}", "type", "image", "data", b64, "mimeType", image)
                 : NULL;
    }
  cleanup_free char *uri = file_uri (name);
  if (!uri)
    return NULL;
  if (valid_utf8 (data, len))
    return json_pack ("{s:s,s:{s:s,s:s,s:s%}}", "type", "resource", "resource", "uri", uri,
                      "mimeType", text_type (name), "text", (const char *)data, len);
  cleanup_free char *b64 = nsbox_mcp_base64_encode (data, len);
  return b64 ? json_pack ("{s:s,s:{s:s,s:s,s:s}}", "type", "resource", "resource", "uri", uri,
                          "mimeType", "application/octet-stream", "blob", b64)
             : NULL;
}

static void
append_line (char **text, const char *line)
{
  char *joined = line ? xasprintf ("%s%s", *text, line) : NULL;
  if (joined)
    {
      free (*text);
      *text = joined;
    }
}

int
nsbox_mcp_files_collect (const struct nsbox_mcp_files *f, const nsbox_result *result,
                         json_t *content, char **text)
{
  size_t n = nsbox_result_file_count (result);
  if (!f->out_path || n == 0)
    return 0;
  cleanup_close int dir_fd = open (f->out_path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0)
    return -errno;
  uint64_t budget = NSBOX_MCP_MAX_OUTPUT_BYTES;
  for (size_t i = 0; i < n; i++)
    {
      const char *name = nsbox_result_file_name (result, i);
      unsigned char *data = NULL;
      size_t len = 0;
      int r = name ? read_output (dir_fd, name, budget, &data, &len) : -EINVAL;
      if (r == -EFBIG)
        {
          cleanup_free char *line
              = xasprintf ("file not returned (over the %u MiB a call returns): /tmp/out/%s\n",
                           NSBOX_MCP_MAX_OUTPUT_BYTES >> 20, name);
          append_line (text, line);
          continue;
        }
      json_t *item = r == 0 ? file_content (name, data, len) : NULL;
      free (data);
      if (!item)
        return r < 0 ? r : -ENOMEM;
      budget -= len;
      json_array_append_new (content, item);
    }
  return 0;
}

void
nsbox_mcp_files_cleanup (struct nsbox_mcp_files *f)
{
  if (f->in_path)
    nsbox_remove_at (AT_FDCWD, f->in_path);
  if (f->out_path)
    nsbox_remove_at (AT_FDCWD, f->out_path);
  free (TAKE_PTR (f->in_path));
  free (TAKE_PTR (f->out_path));
}
