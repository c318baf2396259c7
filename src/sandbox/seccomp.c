/* Seccomp policy compiler: a YAML policy (seccomp_policy.c, with the
 * region algebra of seccomp_regions.c) becomes libseccomp rules, exported
 * here as the classic BPF program the launcher installs. */
#include "seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fileio.h"
#include "seccomp_policy.h"
#include "util.h"

#define POLICY_MAX_BYTES (1024 * 1024)
#define DEFAULT_POLICY_NAME "default.yaml"

/* libseccomp 2.5 exports only to a file descriptor. */
static int
export_bpf (scmp_filter_ctx ctx, const char *name, struct nsbox_bpf *out, struct nsbox_error **err)
{
  cleanup_close int fd = memfd_create ("nsbox-seccomp-bpf", MFD_CLOEXEC);
  if (fd < 0)
    return nsbox_error_sys (err, errno, "%s: create a memfd for the BPF program", name);
  int rc = seccomp_export_bpf (ctx, fd);
  if (rc < 0)
    return nsbox_error_sys (err, -rc, "%s: export the BPF program", name);
  struct stat st;
  if (fstat (fd, &st) < 0)
    return nsbox_error_sys (err, errno, "%s: stat the BPF program memfd", name);
  size_t size = (size_t)st.st_size, count = size / sizeof (struct sock_filter);
  if (count == 0 || size % sizeof (struct sock_filter) != 0)
    return nsbox_error_set (err, EIO, "%s: libseccomp exported %zu bytes, not a BPF program", name,
                            size);
  if (count > BPF_MAXINSNS)
    return nsbox_error_set (err, E2BIG, "%s: the BPF program has %zu instructions (limit %d)", name,
                            count, BPF_MAXINSNS);
  cleanup_free struct sock_filter *insns = malloc (size);
  if (!insns)
    return nsbox_error_oom (err);
  ssize_t n = nsbox_pread_full (fd, insns, size, 0);
  if (n < 0)
    return nsbox_error_sys (err, (int)-n, "%s: read the BPF program back", name);
  if ((size_t)n != size)
    return nsbox_error_sys (err, EIO, "%s: read the BPF program back", name);
  out->insns = TAKE_PTR (insns);
  out->len = (unsigned short)count;
  return 0;
}

int
nsbox_seccomp_compile (const char *text, size_t len, const char *name, struct nsbox_bpf *out,
                       nsbox_warning_fn warn, void *warn_data, struct nsbox_error **err)
{
  if (!name)
    name = "policy";
  if (!text || !out)
    return nsbox_error_set (err, EINVAL, "%s: no policy text or output", name);
  cleanup_seccomp scmp_filter_ctx ctx = NULL;
  int rc = nsbox_seccomp_policy_build (text, len, name, warn, warn_data, &ctx, err);
  if (rc < 0)
    return rc;
  return export_bpf (ctx, name, out, err);
}

int
nsbox_seccomp_compile_file (const char *path, struct nsbox_bpf *out, nsbox_warning_fn warn,
                            void *warn_data, struct nsbox_error **err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;
  int rc = nsbox_read_file (path, POLICY_MAX_BYTES, "seccomp policy", &text, &len, err);
  if (rc < 0)
    return rc;
  return nsbox_seccomp_compile (text, len, path, out, warn, warn_data, err);
}

int
nsbox_seccomp_compile_default (struct nsbox_bpf *out, nsbox_warning_fn warn, void *warn_data,
                               struct nsbox_error **err)
{
  return nsbox_seccomp_compile (nsbox_default_policy, strlen (nsbox_default_policy),
                                DEFAULT_POLICY_NAME, out, warn, warn_data, err);
}

void
nsbox_bpf_release (struct nsbox_bpf *bpf)
{
  if (!bpf)
    return;
  free (bpf->insns);
  bpf->insns = NULL;
  bpf->len = 0;
}
