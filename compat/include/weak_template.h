/* SPDX-License-Identifier: MIT */
/*
 * weak_template.h (mely-compat): WEAK_TMPL(T) names T in a function template's
 * parameter list without letting that parameter take part in deducing T
 * (parseopt.h's conftab::add(name, &var, lo, hi) deduces T from &var alone, so
 * add("port", &port, 1, 65535) works for a u_int16_t port).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_WEAK_TEMPLATE_H
#define MELY_COMPAT_WEAK_TEMPLATE_H

template <typename T> struct Identity {
    typedef T type;
};
#define WEAK_TMPL(T) typename Identity<T>::type

#endif /* MELY_COMPAT_WEAK_TEMPLATE_H */
