/* The sandbox's network, child side: see net.h. */
#include "net.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "child.h"

void
nsbox_net_loopback_up (void)
{
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  struct ifreq ifr;
  memset (&ifr, 0, sizeof ifr);
  ifr.ifr_name[0] = 'l';
  ifr.ifr_name[1] = 'o';
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    nsbox_child_fail (NSBOX_STEP_LOOPBACK, errno, "lo");
  close (fd);
}
