/* A delegated cgroup v2 from the caller's systemd user instance: a transient
 * scope unit with Delegate=yes holding this process. */
#ifndef NSBOX_SCOPE_H
#define NSBOX_SCOPE_H

#include "util.h"

/* Asks the systemd user instance on the caller's user bus
 * ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus) for a transient
 * scope nsbox-<pid>-<random>.scope with Delegate=yes and this process in it,
 * and waits for its start job. Moving a process is process-wide, so this is
 * done at most once per process, whatever the number of threads: every later
 * call returns the first call's outcome. Returns 0 when the process sits in
 * its new scope, else a negative errno with *why (static text) saying why.
 * The scope lasts as long as its processes: systemd removes it when empty. */
int nsbox_scope_join (const char **why) NSBOX_INTERNAL;

#endif
