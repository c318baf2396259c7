# Prelude for syscall-level cases (the try-syscall technique of bubblewrap
# and flatpak): arguments that make an unfiltered call fail with EFAULT or
# EBADF, so EPERM or ENOSYS proves the seccomp filter decided. x86_64 numbers.
import ctypes, errno, os, sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
BAD = 1        # an address that is never mapped: EFAULT when dereferenced
BADFD = -1     # EBADF
NR = dict(
    read=0, ioctl=16, socket=41, socketpair=53, setsockopt=54, getsockopt=55, clone=56, fork=57, kill=62, ptrace=101, syslog=103,
    personality=135, ustat=136, sysfs=139, modify_ldt=154, pivot_root=155, _sysctl=156,
    prctl=157, adjtimex=159, chroot=161, acct=163, settimeofday=164, mount=165,
    umount2=166, swapon=167, swapoff=168, reboot=169, sethostname=170, setdomainname=171,
    iopl=172, ioperm=173, init_module=175, delete_module=176, quotactl=179,
    nfsservctl=180, lookup_dcookie=212, clock_settime=227, mbind=237, set_mempolicy=238,
    get_mempolicy=239, kexec_load=246, add_key=248, request_key=249, keyctl=250,
    migrate_pages=256, mknodat=259, unshare=272, splice=275, tee=276, move_pages=279,
    vmsplice=278, fanotify_init=300, name_to_handle_at=303, open_by_handle_at=304,
    clock_adjtime=305, setns=308, process_vm_readv=310, process_vm_writev=311, kcmp=312,
    finit_module=313, seccomp=317, bpf=321, kexec_file_load=320, userfaultfd=323,
    perf_event_open=298, uselib=134, pkey_alloc=330, io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, open_tree=428, move_mount=429, fsopen=430,
    fsconfig=431, fsmount=432, fspick=433, pidfd_open=434, clone3=435, pidfd_getfd=438,
    process_madvise=440, mount_setattr=442, landlock_create_ruleset=444,
    landlock_add_rule=445, landlock_restrict_self=446, memfd_secret=447,
    quotactl_fd=443, set_mempolicy_home_node=450, cachestat=451, statmount=457,
    listmount=458, lsm_get_self_attr=459,
)
FAILED = []

def sc(nr, *args):
    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in args]
    ctypes.set_errno(0)
    r = _libc.syscall(ctypes.c_long(nr), *a)
    return r, ctypes.get_errno()

def blocked(name, want, *args):
    """The call must fail with errno `want` (a name or a tuple of names)."""
    wants = (want,) if isinstance(want, str) else want
    nr = NR[name] if isinstance(name, str) else name
    r, e = sc(nr, *args)
    if r == -1 and errno.errorcode.get(e) in wants:
        return
    FAILED.append(name)
    print("ESCAPED: %s%r returned %d, errno %s; want %s" % (
        name, args, r, errno.errorcode.get(e, e), "/".join(wants)))

def done():
    print("OK" if not FAILED else "FAILED %d" % len(FAILED))
