/* The names of files in and out of a sandbox, and the value of the inputs
 * key ("PATH[:NAME]"), checked where the configuration is read. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "file_names.h"

/* Length of the UTF-8 sequence at s (of at most len bytes), 0 if invalid. */
static size_t
utf8_sequence (const unsigned char *s, size_t len)
{
  unsigned char c = s[0];
  size_t n;
  uint32_t min, cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, min = 0x80, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, min = 0x800, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, min = 0x10000, cp = c & 0x07;
  else
    return 0;
  if (n > len)
    return 0;
  for (size_t i = 1; i < n; i++)
    {
      if ((s[i] & 0xc0) != 0x80)
        return 0;
      cp = (cp << 6) | (s[i] & 0x3f);
    }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

bool
nsbox_file_name_valid (const char *name, size_t len, const char **why)
{
  const char *w = NULL;
  if (len == 0)
    w = "it is empty";
  else if (len > 255)
    w = "it is longer than 255 bytes";
  else if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
    w = "it is '.' or '..'";
  for (size_t i = 0; !w && i < len;)
    {
      unsigned char c = (unsigned char)name[i];
      size_t n = utf8_sequence ((const unsigned char *)name + i, len - i);
      if (c == '/' || c == ':')
        w = "it holds a '/' or ':'";
      else if (c < 0x20 || c == 0x7f
               || (c == 0xc2 && i + 1 < len && (unsigned char)name[i + 1] <= 0x9f))
        w = "it holds a control character";
      else if (n == 0)
        w = "it is not valid UTF-8";
      i += n ? n : 1;
    }
  if (why)
    *why = w;
  return w == NULL;
}

int
nsbox_input_spec_parse (const char *spec, char **path, char **name, struct nsbox_error **err)
{
  const char *colon = strrchr (spec, ':');
  size_t path_len = colon ? (size_t)(colon - spec) : strlen (spec);
  const char *n;
  if (colon)
    n = colon + 1;
  else
    {
      const char *slash = strrchr (spec, '/');
      n = slash ? slash + 1 : spec;
    }
  if (path_len == 0)
    return nsbox_error_set (err, EINVAL, "input '%s': no path before the name", spec);
  const char *why = NULL;
  if (!nsbox_file_name_valid (n, strlen (n), &why))
    return nsbox_error_set (err, EINVAL,
                            "input '%s': name '%s' is not allowed in /mnt/in: %s (give one "
                            "as PATH:NAME)",
                            spec, n, why);
  *path = strndup (spec, path_len);
  *name = strdup (n);
  if (!*path || !*name)
    {
      free (TAKE_PTR (*path));
      free (TAKE_PTR (*name));
      return nsbox_error_oom (err);
    }
  return 0;
}
