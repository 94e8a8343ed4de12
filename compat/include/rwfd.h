/* SPDX-License-Identifier: MIT */
/*
 * rwfd.h (mely-compat): passing a descriptor over a Unix socket, as
 * libasync's rwfd.h: readfd, writefd, readvfd, writevfd. amisc.h (so
 * async.h) declares them too, as libasync's did; see there for what they do.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_RWFD_H
#define MELY_COMPAT_RWFD_H

#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif
ssize_t readvfd(int fd, const struct iovec *iov, int iovcnt, int *rfdp);
ssize_t writevfd(int fd, const struct iovec *iov, int iovcnt, int wfd);
ssize_t readfd(int fd, void *buf, size_t len, int *rfdp);
ssize_t writefd(int fd, const void *buf, size_t len, int wfd);
#ifdef __cplusplus
}
#endif

#endif /* MELY_COMPAT_RWFD_H */
