/* The launch engine behind nsbox_run and the pool: prepares the plan of
 * one run (rootfs, environment, filter, limits), starts the sandbox through
 * its runtime's operations (launch_native.c, launch_runsc.c) with its
 * program waiting on stdin, then has the runtime supervise it with the
 * code, and fills what every result holds. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/capability.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <jansson.h>

#include "child.h"
#include "config.h"
#include "error.h"
#include "files.h"
#include "image.h"
#include "launch-private.h"
#include "limit.h"
#include "result.h"
#include "runsc.h"
#include "digest.h"
#include "egress.h"
#include "sandbox.h"
#include "seccomp.h"
#include "spawn.h"
#include "supervise.h"
#include "util.h"

/* The environment of a bare rootfs before the configured `env`. */
static const char *const base_env[] = {
  "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  "LANG=C.UTF-8",
};

/* ---- fork ----
 *
 * A process that forks copies every launch's host fds. A copy of a pooled
 * sandbox's stdin write end in a child (a multiprocessing worker, a
 * pre-fork server) would keep the program from ever seeing EOF, and a child
 * that used its copies would feed code to the parent's sandbox. So the
 * child closes them at once (pthread_atfork) and marks every launch
 * foreign: it never signals, kills, reaps or removes anything of it, and
 * frees only the handle. */

static void
launch_forked (struct nsbox_fork_node *node)
{
  struct nsbox_launch *r = container_of (node, struct nsbox_launch, fork_node);
  int *fds[]
      = { &r->streams.stdin_fd, &r->streams.stdout_fd, &r->streams.stderr_fd, &r->streams.report_fd,
          &r->child.pidfd,      &r->code_fd,           &r->answer_fd,         &r->program_pidfd };
  for (size_t i = 0; i < ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      close (TAKE_FD (*fds[i]));
  if (r->plan.control)
    {
      nsbox_close_slot (&r->plan.control_fds[0]);
      nsbox_close_slot (&r->plan.control_fds[1]);
    }
  if (r->ops && r->ops->forked)
    r->ops->forked (r);
  nsbox_pipes_close (&r->pipes);
  r->foreign = true;
}

static struct nsbox_fork_registry launches = NSBOX_FORK_REGISTRY (NULL, NULL, launch_forked);

static void
launch_register (struct nsbox_launch *r)
{
  nsbox_fork_add (&launches, &r->fork_node);
}

static void
launch_unregister (struct nsbox_launch *r)
{
  if (r->foreign)
    return;
  nsbox_fork_remove (&launches, &r->fork_node);
}

static void
launch_release (struct nsbox_launch *r)
{
  launch_unregister (r);
  if (r->foreign)
    {
      /* The parent's: its cgroups, image lock and work directory are not
       * ours to remove. Only the handle is freed. */
      free (r);
      return;
    }
  /* An init that reported its program's end with nothing else left is
   * reaped here, off the run's time (nsbox_supervise). */
  nsbox_spawn_abort (&r->child);
  /* The mounts go first: their tmpfs pages are charged to the cgroups, and
   * the image stays locked while it is mounted. */
  if (r->ops && r->ops->release)
    r->ops->release (r);
  nsbox_limits_release (&r->limits);
  if (r->own_bpf)
    nsbox_bpf_release (&r->plan.bpf);
  if (r->plan.empty_caps)
    cap_free (r->plan.empty_caps);
  free (r->rootfs);
  if (r->envp)
    for (char **e = r->envp; *e; e++)
      free (*e);
  free (r->envp);
  nsbox_image_release (&r->image);
  nsbox_pipes_close (&r->pipes);
  nsbox_inputs_close (&r->plan.inputs);
  nsbox_close_slot (&r->code_fd);
  nsbox_close_slot (&r->answer_fd);
  nsbox_close_slot (&r->program_pidfd);
  if (r->plan.control)
    {
      nsbox_close_slot (&r->plan.control_fds[0]);
      nsbox_close_slot (&r->plan.control_fds[1]);
    }
  json_decref (nsbox_egress_stop (r->proxy, false));
  free (r);
}

static int
check_rootfs (struct nsbox_launch *r, const char *rootfs, bool inputs, struct nsbox_error **err)
{
  r->rootfs = realpath (rootfs, NULL);
  if (!r->rootfs)
    return nsbox_error_sys (err, errno, "rootfs '%s'", rootfs);
  if (strlen (r->rootfs) > PATH_MAX / 2)
    return nsbox_error_set (err, ENAMETOOLONG, "rootfs path '%s' is too long", r->rootfs);
  static const char *const needed[] = { "", "/tmp", "/proc", "/dev", "/mnt" };
  for (size_t i = 0; i < ARRAY_SIZE (needed) - (inputs ? 0 : 1); i++)
    {
      char path[PATH_MAX + 16];
      struct stat st;
      snprintf (path, sizeof path, "%s%s", r->rootfs, needed[i]);
      /* lstat: a symlinked /tmp, /proc or /dev would send our mounts
       * outside the new root. */
      if (lstat (path, &st) < 0)
        return nsbox_error_sys (err, errno, "rootfs '%s' has no '%s' directory", r->rootfs,
                                needed[i][0] ? needed[i] : "/");
      if (!S_ISDIR (st.st_mode))
        return nsbox_error_set (err, ENOTDIR, "rootfs '%s': '%s' is not a directory", r->rootfs,
                                needed[i][0] ? needed[i] : "/");
    }
  r->plan.rootfs = r->rootfs;
  return 0;
}

static bool
env_overridden (const struct nsbox_config *c, const char *entry)
{
  size_t nl = strcspn (entry, "=");
  for (size_t i = 0; i < c->env_len; i++)
    if (strncmp (c->env[i], entry, nl) == 0 && c->env[i][nl] == '=')
      return true;
  return false;
}

/* The image's environment (or, for a bare rootfs, PATH and LANG) plus the
 * configured one; nothing from the host, ever. */
static int
build_env (struct nsbox_launch *r, const struct nsbox_config *c, struct nsbox_error **err)
{
  const char *const *base = base_env;
  size_t nbase = ARRAY_SIZE (base_env);
  if (c->base_env)
    {
      base = (const char *const *)c->base_env;
      nbase = c->base_env_len;
    }
  else if (r->image.env)
    {
      base = (const char *const *)r->image.env;
      for (nbase = 0; r->image.env[nbase]; nbase++)
        ;
    }
  size_t n = 0, nproxy = 0;
  const char *const *proxy = r->egress ? nsbox_egress_env (&nproxy) : NULL;
  r->envp = calloc (nbase + nproxy + c->env_len + 1, sizeof (char *));
  if (!r->envp)
    return nsbox_error_oom (err);
  for (size_t i = 0; i < nbase; i++)
    if (!env_overridden (c, base[i]) && !(r->envp[n++] = strdup (base[i])))
      return nsbox_error_oom (err);
  /* network: proxy: the program's HTTP clients go through the proxy, even
   * where the image's own environment names another. */
  for (size_t i = 0; i < nproxy; i++)
    {
      size_t nl = strcspn (proxy[i], "=") + 1;
      size_t j = 0;
      while (j < n && strncmp (r->envp[j], proxy[i], nl) != 0)
        j++;
      if (env_overridden (c, proxy[i]))
        continue;
      char *entry = strdup (proxy[i]);
      if (!entry)
        return nsbox_error_oom (err);
      if (j < n)
        free (r->envp[j]);
      r->envp[j < n ? j : n++] = entry;
    }
  for (size_t i = 0; i < c->env_len; i++)
    if (!(r->envp[n++] = strdup (c->env[i])))
      return nsbox_error_oom (err);
  r->plan.envp = r->envp;
  for (char **e = r->envp; *e; e++)
    if (strncmp (*e, "PATH=", 5) == 0)
      r->plan.path_search = *e + 5;
  return 0;
}

/* The built-in policy was compiled to BPF at build time. */
static int
prepare_filter (struct nsbox_launch *r, const struct nsbox_config *c, struct nsbox_error **err)
{
  if (c->seccomp_policy)
    {
      r->own_bpf = true;
      if (nsbox_seccomp_compile_file (c->seccomp_policy, &r->plan.bpf, NULL, NULL, err) < 0)
        return nsbox_error_prefix (err, "seccomp policy");
      return 0;
    }
  r->plan.bpf.insns = (struct sock_filter *)nsbox_default_bpf_insns;
  r->plan.bpf.len = nsbox_default_bpf_len;
  return 0;
}

/* The audit log names the filter by the SHA-256 of the BPF program the
 * sandbox installs: what was enforced, whatever policy text it came from. */
static int
hash_filter (struct nsbox_launch *r, const struct nsbox_config *c, struct nsbox_error **err)
{
  if (!c->audit_log)
    return 0;
  int ret = nsbox_sha256_hex (r->plan.bpf.insns, r->plan.bpf.len * sizeof *r->plan.bpf.insns,
                              r->policy_sha256, err);
  return ret < 0 ? nsbox_error_prefix (err, "audit log: seccomp filter digest") : 0;
}

/* Fields 48-51 of /proc/self/stat: where the kernel finds argv and environ.
 * Only read here; the wipe happens in the child's copy of this memory. */
static void
locate_launcher_strings (struct nsbox_plan *plan)
{
  uint64_t v[4];
  if (!nsbox_proc_stat_fields ("/proc/self/stat", 48, 4, v))
    return;
  plan->arg_start = v[0];
  plan->arg_end = v[1];
  plan->env_start = v[2];
  plan->env_end = v[3];
}

static int
prepare_plan (struct nsbox_launch *r, const struct nsbox_config *c, struct nsbox_error **err)
{
  int ret = 0;
  /* `image`: resolved through the store, pulled per `pull`. */
  if (!c->rootfs && (ret = nsbox_image_hold (c->store, c->image, c->pull, &r->image, err)) < 0)
    return ret;
  const char *digest = r->image.digest ? r->image.digest : c->image_digest;
  snprintf (r->image_digest, sizeof r->image_digest, "%s", digest ? digest : "");
  ret = check_rootfs (r, c->rootfs ? c->rootfs : r->image.rootfs, c->inputs_len > 0, err);
  if (ret < 0 || (ret = build_env (r, c, err)) < 0 || (ret = prepare_filter (r, c, err)) < 0
      || (ret = hash_filter (r, c, err)) < 0
      || (ret = nsbox_inputs_open (c->inputs, c->inputs_len, &r->plan.inputs, err)) < 0)
    return ret;
  if (!r->plan.control)
    r->plan.argv = c->command;
  r->plan.egress = r->egress;
  if (r->egress && (ret = nsbox_egress_new (c, &r->proxy, err)) < 0)
    return ret;
  locate_launcher_strings (&r->plan);
  r->plan.uid = c->uid;
  r->plan.gid = c->gid;
  r->plan.may_setgroups = geteuid () == 0;
  r->plan.caller_undumpable = prctl (PR_GET_DUMPABLE, 0, 0, 0, 0) == 0;
  /* tmpfs inodes cost kernel memory that `size` does not count (and no
   * memory cgroup does in rlimit mode): one per 2 KiB of tmp-size. */
  uint64_t inodes = c->tmp_size_bytes / 2048 > 1024 ? c->tmp_size_bytes / 2048 : 1024;
  snprintf (r->plan.tmp_options, sizeof r->plan.tmp_options,
            "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=1777", c->tmp_size_bytes, inodes);
  snprintf (r->plan.shm_options, sizeof r->plan.shm_options,
            "size=%" PRIu64 ",nr_inodes=%" PRIu64 ",mode=1777", c->tmp_size_bytes, inodes);
  r->plan.empty_caps = cap_init ();
  if (!r->plan.empty_caps)
    return nsbox_error_sys (err, errno, "prepare capabilities");
  return nsbox_limits_prepare (&r->limits, c, &r->plan, err);
}

static int
check_caller (struct nsbox_error **err)
{
  if (getuid () != geteuid () || getgid () != getegid ())
    return nsbox_error_set (err, EPERM,
                            "nsbox refuses to run set-user-ID or set-group-ID "
                            "(real and effective ids differ)");
  return 0;
}

void
nsbox_launch_close_streams (struct nsbox_streams *s)
{
  int *fds[] = { &s->stdin_fd, &s->stdout_fd, &s->stderr_fd, &s->report_fd };
  for (size_t i = 0; i < ARRAY_SIZE (fds); i++)
    if (*fds[i] >= 0)
      close (TAKE_FD (*fds[i]));
}

int
nsbox_launch_refuse_output_dir (struct nsbox_error **err)
{
  return nsbox_error_set (err, EINVAL,
                          "output-dir is not available with runtime runsc (the sandbox's /tmp "
                          "lives inside gVisor, out of the launcher's reach)");
}

enum nsbox_runtime
nsbox_launch_resolve_runtime (const nsbox_config *c)
{
  if (c->runtime == NSBOX_RUNTIME_AUTO)
    return nsbox_runsc_usable (c) ? NSBOX_RUNTIME_RUNSC : NSBOX_RUNTIME_NATIVE;
  return c->runtime;
}

int
nsbox_launch_check_files (const nsbox_config *c, enum nsbox_runtime runtime, bool output_dir,
                          struct nsbox_error **err)
{
  if (runtime != NSBOX_RUNTIME_RUNSC)
    return 0;
  if (c->inputs_len > 0)
    return nsbox_error_set (err, EINVAL,
                            "inputs are not available with runtime runsc (only the native "
                            "runtime places them in /mnt/in)");
  return output_dir ? nsbox_launch_refuse_output_dir (err) : 0;
}

/* A live sandbox runs the driver (live.c) with the interpreter the
 * config's command names, and gets the code and answer pipes. */
static int
prepare_live (struct nsbox_launch *r, const nsbox_config *c, struct nsbox_error **err)
{
  if (r->runtime == NSBOX_RUNTIME_RUNSC)
    return nsbox_error_set (err, ENOTSUP,
                            "live sandboxes are not available with runtime runsc yet (the "
                            "driver's control pipes are not passed into gVisor): use runtime "
                            "native");
  if (!c->command || !c->command[0])
    return nsbox_error_set (err, EINVAL, "a live sandbox needs a command naming the interpreter");
  int code[2], answers[2];
  if (pipe2 (code, O_CLOEXEC) < 0)
    return nsbox_error_sys (err, errno, "create the live sandbox's control pipes");
  if (pipe2 (answers, O_CLOEXEC) < 0)
    {
      int e = errno;
      close (code[0]);
      close (code[1]);
      return nsbox_error_sys (err, e, "create the live sandbox's control pipes");
    }
  r->code_fd = code[1];
  r->answer_fd = answers[0];
  r->plan.control = true;
  r->plan.control_fds[0] = code[0];
  r->plan.control_fds[1] = answers[1];
  for (int i = 0; i < 2; i++)
    snprintf (r->live_fd_args[i], sizeof r->live_fd_args[i], "%d",
              NSBOX_CHILD_FIRST_FREE_FD + (int)c->inputs_len + i);
  r->code_child_fd = NSBOX_CHILD_FIRST_FREE_FD + (int)c->inputs_len;
  size_t n = 0;
  r->live_argv[n++] = c->command[0];
  r->live_argv[n++] = (char *)"-u";
  r->live_argv[n++] = (char *)"-c";
  r->live_argv[n++] = (char *)nsbox_live_driver;
  r->live_argv[n++] = r->live_fd_args[0];
  r->live_argv[n++] = r->live_fd_args[1];
  r->live_argv[n] = NULL;
  r->plan.argv = r->live_argv;
  return 0;
}

static int
launch_start (const nsbox_config *c, bool live, struct nsbox_launch **out, struct nsbox_error **err)
{
  int ret = check_caller (err);
  if (ret < 0)
    return ret;
  struct nsbox_launch *r = calloc (1, sizeof *r);
  if (!r)
    return nsbox_error_oom (err);
  r->image.lock_fd = -1;
  r->native.sync_fd = -1;
  r->native.tmp_fd = -1;
  r->native.mnt_ns_fd = -1;
  r->child = (struct nsbox_child){ -1, -1 };
  r->streams = (struct nsbox_streams){ -1, -1, -1, -1 };
  r->code_fd = r->answer_fd = r->program_pidfd = -1;
  nsbox_limits_init (&r->limits);
  nsbox_pipes_init (&r->pipes);
  launch_register (r);
  r->runtime = nsbox_launch_resolve_runtime (c);
  r->ops = r->runtime == NSBOX_RUNTIME_RUNSC ? &nsbox_runsc_ops : &nsbox_native_ops;
  r->egress = nsbox_egress_wanted (c);
  if ((ret = nsbox_launch_check_files (c, r->runtime, c->output_dir != NULL, err)) < 0
      || (ret = nsbox_egress_check (c, r->runtime == NSBOX_RUNTIME_RUNSC, err)) < 0
      || (live && (ret = prepare_live (r, c, err)) < 0))
    {
      launch_release (r);
      return ret;
    }
  struct nsbox_config limits_view = *c;
  if (r->ops->host_limits)
    r->ops->host_limits (&limits_view);
  ret = prepare_plan (r, &limits_view, err);
  if (ret >= 0)
    ret = r->ops->start (r, c, &limits_view, err);
  if (ret < 0)
    {
      launch_release (r);
      return ret;
    }
  if (live)
    {
      /* The child has its copy; the program's stdin is at its end at once,
       * as after a single run's code. */
      nsbox_close_slot (&r->plan.control_fds[0]);
      nsbox_close_slot (&r->plan.control_fds[1]);
      r->plan.control = false;
      nsbox_close_slot (&r->streams.stdin_fd);
      /* Every run of it polls them (live.c). */
      int fds[] = { r->code_fd, r->answer_fd, r->streams.stdout_fd, r->streams.stderr_fd,
                    r->streams.report_fd };
      for (size_t i = 0; i < ARRAY_SIZE (fds); i++)
        nsbox_set_nonblocking (fds[i]);
    }
  *out = r;
  return 0;
}

int
nsbox_launch_start (const nsbox_config *c, struct nsbox_launch **out, struct nsbox_error **err)
{
  return launch_start (c, false, out, err);
}

int
nsbox_launch_start_live (const nsbox_config *c, struct nsbox_launch **out, struct nsbox_error **err)
{
  return launch_start (c, true, out, err);
}

void
nsbox_launch_kill (struct nsbox_launch *r)
{
  /* cgroup.kill where there is one; else the kill of init (PID 1 of its
   * namespace) in nsbox_spawn_abort takes the rest. */
  nsbox_limits_kill (&r->limits);
  nsbox_launch_close_streams (&r->streams);
  nsbox_spawn_abort (&r->child);
  if (r->ops->kill)
    r->ops->kill (r);
}

int
nsbox_launch_owned (const struct nsbox_launch *r, struct nsbox_error **err)
{
  if (r->foreign)
    return nsbox_error_set (err, ECHILD,
                            "this sandbox was started by the process this one forked from");
  return 0;
}

void
nsbox_launch_describe (const struct nsbox_launch *r, struct nsbox_result *res)
{
  for (int i = 0; i < NSBOX_LIMIT_COUNT_; i++)
    res->limits[i] = r->limits.mech[i];
  res->runtime = nsbox_launch_runtime (r);
  memcpy (res->policy_sha256, r->policy_sha256, sizeof res->policy_sha256);
  memcpy (res->image_digest, r->image_digest, sizeof res->image_digest);
}

int
nsbox_launch_finish (struct nsbox_launch *r, const struct nsbox_dispatch *d,
                     struct nsbox_result *res, struct nsbox_error **err)
{
  int ret = nsbox_launch_owned (r, err);
  if (ret < 0)
    return ret;
  ret = r->ops->finish (r, d, res, err);
  nsbox_launch_describe (r, res);
  return ret;
}

void
nsbox_launch_release (struct nsbox_launch *r)
{
  if (r)
    launch_release (r);
}

void
nsbox_launch_destroy (struct nsbox_launch *r)
{
  if (!r)
    return;
  if (!r->foreign)
    nsbox_launch_kill (r);
  launch_release (r);
}

const char *
nsbox_launch_runtime (const struct nsbox_launch *r)
{
  return r->ops->name;
}

/* ---- what an idle sandbox is doing, seen from the host ---- */

uint64_t
nsbox_launch_cpu_usec (struct nsbox_launch *r)
{
  uint64_t usec;
  if (nsbox_limits_cpu_usec (&r->limits, &usec))
    return usec;
  return nsbox_tree_cpu_usec (r->child.pid);
}

void
nsbox_launch_identity (struct nsbox_launch *r, pid_t *pid, uint64_t *pid_namespace)
{
  *pid = r->child.pid;
  *pid_namespace = nsbox_child_pid_namespace (r->child.pid);
}

enum nsbox_launch_state
nsbox_launch_probe (struct nsbox_launch *r)
{
  /* A live sandbox's driver answers only runs it was given. */
  struct pollfd p[5] = {
    { r->child.pidfd, POLLIN, 0 },       { r->streams.report_fd, POLLIN, 0 },
    { r->streams.stdout_fd, POLLIN, 0 }, { r->streams.stderr_fd, POLLIN, 0 },
    { r->answer_fd, POLLIN, 0 },
  };
  int n = r->child.pidfd < 0 ? 1 : poll (p, ARRAY_SIZE (p), 0);
  if (n < 0 && errno == EINTR)
    return NSBOX_LAUNCH_STARTING;
  if (n != 0)
    return NSBOX_LAUNCH_BROKEN;
  return r->ops->probe (r);
}

int
nsbox_launch_run (const nsbox_config *c, const char *code, size_t code_len, nsbox_result **out,
                  struct nsbox_error **err)
{
  if (!c || !out || (!code && code_len))
    return nsbox_error_set (err, EINVAL, "nsbox_run: invalid arguments");
  struct nsbox_result *res = calloc (1, sizeof *res);
  if (!res)
    return nsbox_error_oom (err);
  cleanup_close int output_dir_fd = -1;
  struct nsbox_launch *launch = NULL;
  int ret = 0;
  /* Refused under runsc before anything is created for it. */
  if (c->output_dir
      && (ret = nsbox_launch_check_files (c, nsbox_launch_resolve_runtime (c), true, err)) >= 0)
    ret = nsbox_output_dir_open (c->output_dir, &output_dir_fd, err);
  if (ret >= 0)
    ret = nsbox_launch_start (c, &launch, err);
  if (ret >= 0)
    {
      struct nsbox_dispatch d = {
        .code = code,
        .code_len = code_len,
        .timeout_ms = c->timeout_ms,
        .max_output_bytes = c->max_output_bytes,
        .cancel_fd = -1,
        .capture = c->output_capture,
        .memory_bytes = c->memory_bytes,
        .output_dir_fd = output_dir_fd,
      };
      ret = nsbox_launch_finish (launch, &d, res, err);
      nsbox_launch_release (launch);
    }
  if (ret < 0)
    {
      nsbox_result_free (res);
      return ret;
    }
  *out = res;
  return 0;
}
