/*
 * io/listen.h: listeners (internal; the design is in io/listen.c, which
 * works only through the public API).
 */
#ifndef MELY_IO_LISTEN_H
#define MELY_IO_LISTEN_H

struct mely__rt;

/* Closes the listeners left at shutdown (no worker running). */
void mely__listeners_free(struct mely__rt *rt);

/* Pauses every listener of rt (mely_drain). Any thread. */
void mely__listeners_pause(struct mely__rt *rt);

#endif
