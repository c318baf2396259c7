/* Platforms: the host's, parsing "os/arch[/variant]", and choosing an
 * index entry; see platform.h. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "platform.h"
#include "util.h"

static void
copy_lower (char *dst, size_t size, const char *src, size_t len)
{
  size_t n = len < size - 1 ? len : size - 1;
  for (size_t i = 0; i < n; i++)
    dst[i] = (char)tolower ((unsigned char)src[i]);
  dst[n] = '\0';
}

static void
set_field (char *dst, size_t size, const char *value)
{
  copy_lower (dst, size, value, strlen (value));
}

/* Architecture aliases: { from, to, variant to set when given none (NULL:
 * keep), variant that is the default and dropped (NULL: none) }. */
static const struct arch_alias
{
  const char *from;
  const char *to;
  const char *default_variant;
  const char *dropped_variant;
} arch_aliases[] = {
  { "x86_64", "amd64", NULL, "v1" }, { "x86-64", "amd64", NULL, "v1" },
  { "amd64", "amd64", NULL, "v1" },  { "aarch64", "arm64", NULL, "v8" },
  { "arm64", "arm64", NULL, "v8" },  { "armhf", "arm", "v7", NULL },
  { "armel", "arm", "v6", NULL },    { "arm", "arm", "v7", NULL },
  { "i386", "386", NULL, NULL },     { "i486", "386", NULL, NULL },
  { "i586", "386", NULL, NULL },     { "i686", "386", NULL, NULL },
};

void
nsbox_platform_normalize (struct nsbox_platform *p)
{
  set_field (p->os, sizeof p->os, p->os);
  set_field (p->architecture, sizeof p->architecture, p->architecture);
  set_field (p->variant, sizeof p->variant, p->variant);
  if (strcmp (p->os, "macos") == 0)
    set_field (p->os, sizeof p->os, "darwin");
  for (size_t i = 0; i < ARRAY_SIZE (arch_aliases); i++)
    {
      const struct arch_alias *a = &arch_aliases[i];
      if (strcmp (p->architecture, a->from) != 0)
        continue;
      /* armhf/armel name a variant themselves. */
      if (strcmp (a->from, "armhf") == 0 || strcmp (a->from, "armel") == 0)
        set_field (p->variant, sizeof p->variant, a->default_variant);
      else if (a->default_variant && !p->variant[0])
        set_field (p->variant, sizeof p->variant, a->default_variant);
      if (a->dropped_variant && strcmp (p->variant, a->dropped_variant) == 0)
        p->variant[0] = '\0';
      set_field (p->architecture, sizeof p->architecture, a->to);
      if (strcmp (a->to, "arm") == 0 && strcmp (p->variant, "8") == 0)
        set_field (p->variant, sizeof p->variant, "v8");
      break;
    }
}

int
nsbox_platform_parse (const char *text, struct nsbox_platform *out, struct nsbox_error **err)
{
  struct nsbox_platform p = { 0 };
  const char *s1 = strchr (text, '/');
  const char *s2 = s1 ? strchr (s1 + 1, '/') : NULL;
  const char *end = text + strlen (text);
  if (!s1 || s1 == text || (s2 ? s2 : end) == s1 + 1
      || (s2 && (s2 + 1 == end || strchr (s2 + 1, '/'))) || (size_t)(s1 - text) >= sizeof p.os
      || (size_t)((s2 ? s2 : end) - s1 - 1) >= sizeof p.architecture
      || (s2 && (size_t)(end - s2 - 1) >= sizeof p.variant))
    return nsbox_error_set (err, EINVAL, "invalid platform '%s': want os/arch[/variant]", text);
  for (const char *c = text; *c; c++)
    if (!isalnum ((unsigned char)*c) && *c != '/' && *c != '_' && *c != '-' && *c != '.')
      return nsbox_error_set (err, EINVAL, "invalid platform '%s': unexpected character '%c'", text,
                              *c);
  copy_lower (p.os, sizeof p.os, text, (size_t)(s1 - text));
  copy_lower (p.architecture, sizeof p.architecture, s1 + 1, (size_t)((s2 ? s2 : end) - s1 - 1));
  if (s2)
    copy_lower (p.variant, sizeof p.variant, s2 + 1, (size_t)(end - s2 - 1));
  nsbox_platform_normalize (&p);
  *out = p;
  return 0;
}

void
nsbox_platform_host (struct nsbox_platform *out)
{
  struct utsname u;
  struct nsbox_platform p = { .os = "linux" };
  if (uname (&u) == 0)
    set_field (p.architecture, sizeof p.architecture, u.machine);
  else
    set_field (p.architecture, sizeof p.architecture, "amd64");
  /* uname reports armv7l, armv6l, armv8l for 32-bit ARM kernels. */
  if (strncmp (p.architecture, "armv", 4) == 0 && isdigit ((unsigned char)p.architecture[4]))
    {
      snprintf (p.variant, sizeof p.variant, "v%c", p.architecture[4]);
      set_field (p.architecture, sizeof p.architecture, "arm");
    }
  nsbox_platform_normalize (&p);
  *out = p;
}

void
nsbox_platform_format (const struct nsbox_platform *p, char *buf, size_t size)
{
  snprintf (buf, size, "%s/%s%s%s", p->os, p->architecture, p->variant[0] ? "/" : "", p->variant);
}

bool
nsbox_platform_equal (const struct nsbox_platform *a, const struct nsbox_platform *b)
{
  return strcmp (a->os, b->os) == 0 && strcmp (a->architecture, b->architecture) == 0
         && strcmp (a->variant, b->variant) == 0;
}

/* The entry's platform, normalised; false for entries to skip. */
static bool
entry_platform (json_t *entry, struct nsbox_platform *out)
{
  json_t *platform = json_object_get (entry, "platform");
  const char *os = json_string_value (json_object_get (platform, "os"));
  const char *arch = json_string_value (json_object_get (platform, "architecture"));
  const char *variant = json_string_value (json_object_get (platform, "variant"));
  const char *ref_type = json_string_value (
      json_object_get (json_object_get (entry, "annotations"), "vnd.docker.reference.type"));
  if (!json_is_object (entry) || !os || !arch || strcmp (os, "unknown") == 0
      || strcmp (arch, "unknown") == 0
      || (ref_type && strcmp (ref_type, "attestation-manifest") == 0))
    return false;
  struct nsbox_platform p = { 0 };
  set_field (p.os, sizeof p.os, os);
  set_field (p.architecture, sizeof p.architecture, arch);
  set_field (p.variant, sizeof p.variant, variant ? variant : "");
  nsbox_platform_normalize (&p);
  *out = p;
  return true;
}

int
nsbox_platform_select (json_t *index, const struct nsbox_platform *want, const char *what,
                       json_t **chosen, struct nsbox_error **err)
{
  json_t *manifests = json_object_get (index, "manifests");
  if (!json_is_array (manifests))
    return nsbox_error_set (err, EBADMSG, "image index of '%s' has no manifests array", what);
  size_t i;
  json_t *entry;
  json_array_foreach (manifests, i, entry)
  {
    struct nsbox_platform p;
    if (entry_platform (entry, &p) && nsbox_platform_equal (&p, want))
      {
        *chosen = entry;
        return 0;
      }
  }

  char wanted[96];
  nsbox_platform_format (want, wanted, sizeof wanted);
  char *list = NULL;
  size_t list_len = 0;
  cleanup_fclose FILE *f = open_memstream (&list, &list_len);
  if (!f)
    return nsbox_error_oom (err);
  bool any = false;
  json_array_foreach (manifests, i, entry)
  {
    struct nsbox_platform p;
    char name[96];
    if (!entry_platform (entry, &p))
      continue;
    nsbox_platform_format (&p, name, sizeof name);
    fprintf (f, "%s%s", any ? ", " : "", name);
    any = true;
  }
  if (fclose (TAKE_PTR (f)) != 0)
    {
      free (list);
      return nsbox_error_oom (err);
    }
  int r = nsbox_error_set (err, ENOEXEC, "no image for platform '%s' in '%s'; available: %s",
                           wanted, what, any ? list : "none");
  free (list);
  return r;
}
