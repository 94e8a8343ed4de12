/* SPDX-License-Identifier: MIT */
/*
 * arpc.h (mely-compat): libasync's asynchronous RPC (SFS's arpc library):
 * async.h, the XDR types and streams (xdrmisc.h, rpctypes.h), transports
 * (axprt.h), clients (aclnt.h) and servers (asrv.h). Protocol files (.x)
 * compile with mely-rpcc (rpcc's command line). See doc/porting.md, "RPC".
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ARPC_H
#define MELY_COMPAT_ARPC_H

#include "async.h"
#include "xdrmisc.h"
#include "axprt.h"
#include "aclnt.h"
#include "asrv.h"

#endif /* MELY_COMPAT_ARPC_H */
