/* SPDX-License-Identifier: MIT */
/*
 * vatmpl.h (mely-compat): libasync's variadic-template macro, from before
 * C++11 had variadic templates.
 *   VA_TEMPLATE(decl, start, end) declares decl(), decl(const A1 &a1), ...
 *   up to 15 arguments, each with the body `start (a1, ..., an) end`: a
 *   forwarding constructor, or a function whose body calls another:
 *
 *     VA_TEMPLATE(explicit wrapper, : base, {})
 *     VA_TEMPLATE(void log, { out << "["; print_all, ; out << "]"; })
 *
 *   COMMA, LPAREN and RPAREN stand for `,`, `(` and `)` inside the macro's
 *   arguments (pair<int COMMA int>).
 * Here the 16 overloads are one variadic template (with its own 0-argument
 * overload), which any number of arguments instantiates.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_VATMPL_H
#define MELY_COMPAT_VATMPL_H

#define COMMA ,
#define LPAREN (
#define RPAREN )

#define VA_TEMPLATE(fn, start, end)                                                           \
    fn() start() end template <class... MelyVaArgs>                                           \
    fn(const MelyVaArgs &...mely_va_args) start(mely_va_args...) end

#endif /* MELY_COMPAT_VATMPL_H */
