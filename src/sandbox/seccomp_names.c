/* The names a seccomp policy may use (seccomp_names.h): constants, actions
 * and the errno names strerrorname_np does not know. */
#include "seccomp_names.h"

#include <errno.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

struct named_value
{
  const char *name;
  uint64_t value;
};

#define NAMED(c)                                                                                   \
  {                                                                                                \
#c, (uint64_t)(c)                                                                              \
  }

/* Constants usable wherever a policy takes a number. Only what a seccomp
 * policy for a sandboxed interpreter plausibly needs; numbers work too. */
static const struct named_value policy_constants[] = {
  NAMED (AF_UNIX),
  NAMED (AF_INET),
  NAMED (AF_INET6),
  NAMED (AF_NETLINK),
  NAMED (NETLINK_ROUTE),
  NAMED (SOCK_STREAM),
  NAMED (SOCK_DGRAM),
  NAMED (SOCK_RAW),
  NAMED (SOCK_SEQPACKET),
  NAMED (IPPROTO_IP),
  NAMED (IPPROTO_ICMP),
  NAMED (IPPROTO_TCP),
  NAMED (IPPROTO_UDP),
  NAMED (IPPROTO_ICMPV6),
  NAMED (SOL_SOCKET),
  NAMED (SOL_IP),
  NAMED (SOL_TCP),
  NAMED (SOL_IPV6),
  NAMED (SO_REUSEADDR),
  NAMED (SO_TYPE),
  NAMED (SO_ERROR),
  NAMED (SO_BROADCAST),
  NAMED (SO_SNDBUF),
  NAMED (SO_RCVBUF),
  NAMED (SO_KEEPALIVE),
  NAMED (SO_OOBINLINE),
  NAMED (SO_LINGER),
  NAMED (SO_REUSEPORT),
  NAMED (SO_PASSCRED),
  NAMED (SO_PEERCRED),
  NAMED (SO_RCVLOWAT),
  NAMED (SO_SNDLOWAT),
  NAMED (SO_RCVTIMEO_OLD),
  NAMED (SO_SNDTIMEO_OLD),
  NAMED (SO_RCVTIMEO_NEW),
  NAMED (SO_SNDTIMEO_NEW),
  NAMED (SO_TIMESTAMP_OLD),
  NAMED (SO_TIMESTAMPNS_OLD),
  NAMED (SO_TIMESTAMP_NEW),
  NAMED (SO_TIMESTAMPNS_NEW),
  NAMED (SO_ACCEPTCONN),
  NAMED (SO_PROTOCOL),
  NAMED (SO_DOMAIN),
  NAMED (SO_ATTACH_FILTER),
  NAMED (SO_ATTACH_BPF),
  NAMED (SO_ATTACH_REUSEPORT_CBPF),
  NAMED (SO_ATTACH_REUSEPORT_EBPF),
  NAMED (SO_PEEK_OFF),
  NAMED (SO_ZEROCOPY),
  NAMED (TCP_NODELAY),
  NAMED (TCP_MAXSEG),
  NAMED (TCP_CORK),
  NAMED (TCP_KEEPIDLE),
  NAMED (TCP_KEEPINTVL),
  NAMED (TCP_KEEPCNT),
  NAMED (TCP_SYNCNT),
  NAMED (TCP_LINGER2),
  NAMED (TCP_DEFER_ACCEPT),
  NAMED (TCP_WINDOW_CLAMP),
  NAMED (TCP_INFO),
  NAMED (TCP_QUICKACK),
  NAMED (TCP_CONGESTION),
  NAMED (TCP_USER_TIMEOUT),
  NAMED (TCP_NOTSENT_LOWAT),
  NAMED (TCP_MD5SIG),
  NAMED (TCP_MD5SIG_EXT),
  NAMED (TCP_REPAIR),
  NAMED (TCP_REPAIR_QUEUE),
  NAMED (TCP_QUEUE_SEQ),
  NAMED (TCP_REPAIR_OPTIONS),
  NAMED (TCP_REPAIR_WINDOW),
  NAMED (TCP_ULP),
  NAMED (TCP_FASTOPEN_KEY),
  NAMED (TCP_ZEROCOPY_RECEIVE),
  NAMED (IP_TOS),
  NAMED (IP_TTL),
  NAMED (IP_PKTINFO),
  NAMED (IP_MTU_DISCOVER),
  NAMED (IP_RECVERR),
  NAMED (IP_RECVTTL),
  NAMED (IP_RECVTOS),
  NAMED (IP_MTU),
  NAMED (IP_BIND_ADDRESS_NO_PORT),
  NAMED (IP_MULTICAST_IF),
  NAMED (IP_MULTICAST_TTL),
  NAMED (IP_MULTICAST_LOOP),
  NAMED (IP_IPSEC_POLICY),
  NAMED (IP_XFRM_POLICY),
  NAMED (IPV6_ADDRFORM),
  NAMED (IPV6_UNICAST_HOPS),
  NAMED (IPV6_MULTICAST_IF),
  NAMED (IPV6_MULTICAST_HOPS),
  NAMED (IPV6_MULTICAST_LOOP),
  NAMED (IPV6_MTU_DISCOVER),
  NAMED (IPV6_MTU),
  NAMED (IPV6_RECVERR),
  NAMED (IPV6_V6ONLY),
  NAMED (IPV6_RECVPKTINFO),
  NAMED (IPV6_RECVHOPLIMIT),
  NAMED (IPV6_RECVTCLASS),
  NAMED (IPV6_TCLASS),
  NAMED (IPV6_DONTFRAG),
  NAMED (IPV6_IPSEC_POLICY),
  NAMED (IPV6_XFRM_POLICY),
  NAMED (CLONE_NEWNS),
  NAMED (CLONE_NEWCGROUP),
  NAMED (CLONE_NEWUTS),
  NAMED (CLONE_NEWIPC),
  NAMED (CLONE_NEWUSER),
  NAMED (CLONE_NEWPID),
  NAMED (CLONE_NEWNET),
  NAMED (PR_SET_PDEATHSIG),
  NAMED (PR_GET_PDEATHSIG),
  NAMED (PR_GET_DUMPABLE),
  NAMED (PR_SET_DUMPABLE),
  NAMED (PR_SET_NAME),
  NAMED (PR_GET_NAME),
  NAMED (PR_GET_SECCOMP),
  NAMED (PR_CAPBSET_READ),
  NAMED (PR_GET_TIMERSLACK),
  NAMED (PR_GET_CHILD_SUBREAPER),
  NAMED (PR_SET_NO_NEW_PRIVS),
  NAMED (PR_GET_NO_NEW_PRIVS),
  NAMED (PR_GET_TID_ADDRESS),
  NAMED (PR_GET_THP_DISABLE),
  NAMED (TCGETS),
  NAMED (TIOCGWINSZ),
  NAMED (TIOCGPGRP),
  NAMED (FIONREAD),
  NAMED (FIONBIO),
  NAMED (FIONCLEX),
  NAMED (FIOCLEX),
  NAMED (FIOASYNC),
  NAMED (SIOCGIFCONF),
  NAMED (SIOCGIFFLAGS),
  NAMED (SIOCGIFHWADDR),
  NAMED (SIOCGIFINDEX),
  NAMED (TIOCSTI),
  NAMED (TIOCLINUX),
  NAMED (TIOCSETD),
  NAMED (S_IFMT),
  NAMED (S_IFCHR),
  NAMED (S_IFBLK),
  NAMED (S_IFIFO),
  NAMED (S_IFREG),
  NAMED (S_IFSOCK),
  NAMED (PER_LINUX),
  NAMED (ADDR_NO_RANDOMIZE),
};

/* Action names; `default` (the policy's default action) is handled apart
 * because it is only meaningful inside conditional rules. */
static const struct named_value action_names[] = {
  { "allow", SCMP_ACT_ALLOW },
  { "log", SCMP_ACT_LOG },
  { "trap", SCMP_ACT_TRAP },
  { "kill_thread", SCMP_ACT_KILL_THREAD },
  { "kill_process", SCMP_ACT_KILL_PROCESS },
};

/* strerrorname_np knows only one name per errno value. */
static const struct named_value errno_aliases[] = {
  { "EWOULDBLOCK", EWOULDBLOCK },
  { "ENOTSUP", ENOTSUP },
  { "EDEADLOCK", EDEADLOCK },
};

static bool
find_named (const struct named_value *table, size_t len, const char *name, uint64_t *value)
{
  for (size_t i = 0; i < len; i++)
    if (strcmp (table[i].name, name) == 0)
      {
        *value = table[i].value;
        return true;
      }
  return false;
}

bool
nsbox_policy_constant (const char *name, uint64_t *value)
{
  return find_named (policy_constants, ARRAY_SIZE (policy_constants), name, value);
}

bool
nsbox_policy_action (const char *name, uint64_t *value)
{
  return find_named (action_names, ARRAY_SIZE (action_names), name, value);
}

bool
nsbox_policy_errno_alias (const char *name, uint64_t *value)
{
  return find_named (errno_aliases, ARRAY_SIZE (errno_aliases), name, value);
}
