/* SPDX-License-Identifier: MIT */
/*
 * idle.h: what a worker does when it has nothing to run (idle.c).
 */
#ifndef MELY_IDLE_H
#define MELY_IDLE_H

struct mely__worker;

/* The worker has nothing to run: polls, steals, spins a little, then parks
 * until a post, readiness, a timer or a stop. Called by the worker's own
 * thread, without its lock. */
void mely__idle(struct mely__worker *w);

#endif
