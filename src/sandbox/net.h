/* The sandbox's network: its own namespace with only loopback, brought up
 * by the child. */
#ifndef NSBOX_NET_H
#define NSBOX_NET_H

#include "util.h"

/* Child: brings `lo` up; fails through nsbox_child_fail. */
void nsbox_net_loopback_up (void) NSBOX_INTERNAL;

/* network: proxy. Listens on 127.0.0.1:NSBOX_EGRESS_PORT and sends the
 * listening socket to the launcher (tag 'l' on the sync channel), whose
 * proxy accepts every connection; init keeps no copy. The socket is bound
 * before the program exists, without SO_REUSEPORT: nothing in the sandbox
 * can take the port. */
void nsbox_net_egress_listen (void) NSBOX_INTERNAL;

#endif
