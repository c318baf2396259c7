/* `nsbox doctor`: whether and how nsbox can run here, each check as ok,
 * degraded or failing with the one command or setting that fixes it. */
#ifndef NSBOX_DOCTOR_H
#define NSBOX_DOCTOR_H

#include <stdbool.h>

#include "nsbox.h"

/* The exit statuses: every limit enforced; runs, but a limit by rlimit or
 * none (or something it needs is missing); cannot run. */
#define NSBOX_DOCTOR_OK 0
#define NSBOX_DOCTOR_DEGRADED 1
#define NSBOX_DOCTOR_FAILING 2

/* Runs every check on `config` (the user's, flags applied) and prints the
 * report, as text or as one JSON object; returns the exit status. */
int nsbox_doctor (nsbox_config *config, bool json);

#endif
