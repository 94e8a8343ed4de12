/* SPDX-License-Identifier: MIT */
/* nulls.cpp: the null callbacks of async.h (never destroyed: handlers may
 * still copy them while exit() runs). */
#include "async.h"

namespace {
void nothing_v() {}
void nothing_i(int) {}
void nothing_b(bool) {}
} // namespace

const cbv &cbv_null = *new cbv(wrap(nothing_v));
const cbi &cbi_null = *new cbi(wrap(nothing_i));
const cbb &cbb_null = *new cbb(wrap(nothing_b));
