/* The sandbox's network: its own namespace with only loopback, brought up
 * by the child. */
#ifndef NSBOX_NET_H
#define NSBOX_NET_H

#include "util.h"

/* Child: brings `lo` up; fails through nsbox_child_fail. */
void nsbox_net_loopback_up (void) NSBOX_INTERNAL;

#endif
