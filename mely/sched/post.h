/* SPDX-License-Identifier: MIT */
/*
 * post.h: the scheduler's post, as the I/O layer uses it (post.c). A
 * readiness, a timer or a signal becomes an event posted to its target, with
 * the checks and the paths of mely_post_ex().
 */
#ifndef MELY_POST_H
#define MELY_POST_H

#include <mely/mely.h>

struct mely__rt;

/* Posts fn(arg) to `to` (color, priority, handler descriptor): 0 or one of
 * mely_post_ex()'s errors. Any thread. */
int mely__post_to(struct mely__rt *rt, const mely_to_t *to, mely_fn_t fn, void *arg);

#endif
