/* Reference grammar (distribution/reference reference.go, normalize.go):
 *
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [domain "/"] component ("/" component)*   (<= 255 bytes)
 *   component  := [a-z0-9]+ (([._]|__|-+) [a-z0-9]+)*
 *   tag        := [\w][\w.-]{0,127}
 *
 * The first component is a domain iff it holds '.' or ':', is "localhost" or
 * has an uppercase letter; otherwise the domain is docker.io, where
 * one-component names live under library/. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "util.h"

#define NAME_MAX_LEN 255
#define TAG_MAX_LEN 128

static bool
is_lower_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool
is_word (char c)
{
  return is_lower_alnum (c) || (c >= 'A' && c <= 'Z') || c == '_';
}

/* One path component of length len. */
static bool
component_valid (const char *s, size_t len)
{
  size_t i = 0;
  if (len == 0 || !is_lower_alnum (s[0]) || !is_lower_alnum (s[len - 1]))
    return false;
  while (i < len)
    {
      if (is_lower_alnum (s[i]))
        {
          i++;
          continue;
        }
      /* A separator: ".", "_", "__" or one or more "-", between alnums. */
      size_t start = i;
      if (s[i] == '.')
        i++;
      else if (s[i] == '_')
        i += (i + 1 < len && s[i + 1] == '_') ? 2 : 1;
      else if (s[i] == '-')
        while (i < len && s[i] == '-')
          i++;
      else
        return false;
      if (i == start || i >= len || !is_lower_alnum (s[i]))
        return false;
    }
  return true;
}

/* host[:port] with DNS-like labels, or a bracketed IPv6 literal. */
static bool
domain_valid (const char *s, size_t len)
{
  size_t i = 0;
  if (len == 0)
    return false;
  if (s[0] == '[')
    {
      const char *close = memchr (s, ']', len);
      if (!close || close == s + 1)
        return false;
      for (const char *p = s + 1; p < close; p++)
        if (!strchr ("0123456789abcdefABCDEF:.", *p))
          return false;
      i = (size_t)(close - s) + 1;
    }
  else
    {
      bool label_start = true;
      for (; i < len && s[i] != ':'; i++)
        {
          char c = s[i];
          bool alnum = is_lower_alnum (c) || (c >= 'A' && c <= 'Z');
          if (c == '.')
            {
              if (label_start || s[i - 1] == '-')
                return false;
              label_start = true;
              continue;
            }
          if (!alnum && c != '-')
            return false;
          if (label_start && c == '-')
            return false;
          label_start = false;
        }
      if (label_start || s[i - 1] == '-')
        return false;
    }
  if (i == len)
    return true;
  if (s[i] != ':' || i + 1 == len || len - i - 1 > 5)
    return false;
  for (i++; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

static bool
tag_valid (const char *s)
{
  size_t len = strlen (s);
  if (len == 0 || len > TAG_MAX_LEN || !is_word (s[0]))
    return false;
  for (size_t i = 1; i < len; i++)
    if (!is_word (s[i]) && s[i] != '.' && s[i] != '-')
      return false;
  return true;
}

bool
nsbox_reference_digest_valid (const char *digest)
{
  if (!digest || strncmp (digest, "sha256:", 7) != 0 || strlen (digest) != 7 + 64)
    return false;
  for (const char *p = digest + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

void
nsbox_reference_free (struct nsbox_reference *ref)
{
  if (!ref)
    return;
  free (ref->domain);
  free (ref->path);
  free (ref->tag);
  free (ref->digest);
  free (ref);
}

static void
reference_freep (struct nsbox_reference **ref)
{
  nsbox_reference_free (*ref);
}

static bool
has_upper (const char *s, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if (s[i] >= 'A' && s[i] <= 'Z')
      return true;
  return false;
}

/* Splits "name[:tag][@digest]" in place. */
static int
split_reference (const char *text, char *name, char **tag, char **digest, struct nsbox_error **err)
{
  char *at = strchr (name, '@');
  if (at)
    {
      *at = '\0';
      *digest = at + 1;
      if (!nsbox_reference_digest_valid (*digest))
        return nsbox_error_set (err, EINVAL,
                                "invalid reference '%s': bad digest '%s' (want sha256:<64 hex>)",
                                text, *digest);
    }
  char *slash = strrchr (name, '/');
  char *colon = strrchr (slash ? slash : name, ':');
  if (colon)
    {
      *colon = '\0';
      *tag = colon + 1;
      if (!tag_valid (*tag))
        return nsbox_error_set (err, EINVAL,
                                "invalid reference '%s': bad tag '%s' (letters, digits, '_', "
                                "'.', '-'; at most 128, not starting with '.' or '-')",
                                text, *tag);
    }
  return 0;
}

static int
check_path (const char *text, const char *path, struct nsbox_error **err)
{
  if (has_upper (path, strlen (path)))
    return nsbox_error_set (
        err, EINVAL, "invalid reference '%s': repository name '%s' must be lowercase", text, path);
  const char *p = path;
  for (;;)
    {
      const char *end = strchrnul (p, '/');
      if (!component_valid (p, (size_t)(end - p)))
        return nsbox_error_set (err, EINVAL,
                                "invalid reference '%s': bad repository name component '%.*s'",
                                text, (int)(end - p), p);
      if (!*end)
        break;
      p = end + 1;
    }
  size_t len = strlen (path);
  if (len == 64 && strspn (path, "0123456789abcdef") == 64)
    return nsbox_error_set (err, EINVAL,
                            "invalid reference '%s': a 64-digit hexadecimal string is not a "
                            "repository name",
                            text);
  return 0;
}

int
nsbox_reference_parse (const char *text, struct nsbox_reference **out, struct nsbox_error **err)
{
  if (!text || !*text)
    return nsbox_error_set (err, EINVAL, "invalid reference '': empty");
  cleanup_free char *name = strdup (text);
  __attribute__ ((cleanup (reference_freep))) struct nsbox_reference *ref = calloc (1, sizeof *ref);
  if (!name || !ref)
    return nsbox_error_oom (err);
  char *tag = NULL, *digest = NULL;
  int r = split_reference (text, name, &tag, &digest, err);
  if (r < 0)
    return r;

  const char *domain = "docker.io";
  const char *rest = name;
  char *slash = strchr (name, '/');
  if (slash
      && (memchr (name, '.', (size_t)(slash - name)) || memchr (name, ':', (size_t)(slash - name))
          || (slash - name == 9 && strncmp (name, "localhost", 9) == 0)
          || has_upper (name, (size_t)(slash - name))))
    {
      *slash = '\0';
      domain = name;
      rest = slash + 1;
      if (!domain_valid (domain, strlen (domain)))
        return nsbox_error_set (err, EINVAL, "invalid reference '%s': bad registry '%s'", text,
                                domain);
    }
  if (strcmp (domain, "index.docker.io") == 0)
    domain = "docker.io";
  if (strlen (domain) + 1 + strlen (rest) > NAME_MAX_LEN)
    return nsbox_error_set (err, EINVAL, "invalid reference '%s': name longer than %d characters",
                            text, NAME_MAX_LEN);
  r = check_path (text, rest, err);
  if (r < 0)
    return r;

  bool library = strcmp (domain, "docker.io") == 0 && !strchr (rest, '/');
  ref->domain = strdup (domain);
  if (!(ref->path = xasprintf ("%s%s", library ? "library/" : "", rest)))
    ref->path = NULL;
  if (digest)
    ref->digest = strdup (digest);
  else
    ref->tag = strdup (tag ? tag : "latest");
  if (!ref->domain || !ref->path || (!ref->digest && !ref->tag))
    return nsbox_error_oom (err);
  *out = TAKE_PTR (ref);
  return 0;
}

char *
nsbox_reference_string (const struct nsbox_reference *ref)
{
  char *s = NULL;
  if (!(s = xasprintf ("%s/%s%s%s", ref->domain, ref->path, ref->digest ? "@" : ":",
                       ref->digest ? ref->digest : ref->tag)))
    return NULL;
  return s;
}

const char *
nsbox_reference_registry_host (const struct nsbox_reference *ref)
{
  if (strcmp (ref->domain, "docker.io") == 0)
    return "registry-1.docker.io";
  return ref->domain;
}
