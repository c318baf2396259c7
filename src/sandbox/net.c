/* The sandbox's network, child side: see net.h. */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "child.h"
#include "egress_names.h"

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

void
nsbox_net_egress_listen (void)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    nsbox_child_fail (NSBOX_STEP_EGRESS, errno, "127.0.0.1");
  struct sockaddr_in addr;
  memset (&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons (NSBOX_EGRESS_PORT);
  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (bind (fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen (fd, 128) < 0)
    nsbox_child_fail (NSBOX_STEP_EGRESS, errno, "127.0.0.1");
  nsbox_child_send_fd ('l', fd, NSBOX_STEP_EGRESS, "127.0.0.1");
  close (fd);
}
