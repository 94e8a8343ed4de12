/* SPDX-License-Identifier: MIT */
/*
 * io/watch.h: the table of fd and signal watches (internal; the design is in
 * io/watch.c).
 */
#ifndef MELY_IO_WATCH_H
#define MELY_IO_WATCH_H

#include <mely/mely.h>

struct mely__rt;

/* Creates the runtime's watch table: 0 or MELY_ENOMEM. _free (at shutdown,
 * no worker running) frees every watch left, before the pollers go. */
int mely__watchtab_init(struct mely__rt *rt);
void mely__watchtab_free(struct mely__rt *rt);

/* mely_close() on rt itself (shutdown has no handle any more). */
int mely__close_fd(struct mely__rt *rt, int fd);

/* Sets the function a watch's destruction runs (mely_watch_remove_then's),
 * from its creation on: io/listen.c counts its sockets' watches with it. */
void mely__watch_set_fin(struct mely_watch *w, mely_fn_t fin, void *arg);

#endif
