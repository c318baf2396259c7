/* Loading a library on first use: see dl.h. */
#include "dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

int
nsbox_dl_load (const char *soname, const struct nsbox_dl_symbol *symbols, size_t n, char *why,
               size_t size)
{
  void *lib = dlopen (soname, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    {
      snprintf (why, size, "cannot load %s: %s", soname, dlerror ());
      return -ENOENT;
    }
  for (size_t i = 0; i < n; i++)
    if (!(*symbols[i].slot = dlsym (lib, symbols[i].name)))
      {
        snprintf (why, size, "%s has no %s", soname, symbols[i].name);
        return -ENOSYS;
      }
  return 0;
}
