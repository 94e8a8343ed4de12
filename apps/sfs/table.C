/* SPDX-License-Identifier: MIT */
/*
 * table.C: the connection table: who gets in when sfsd is full, and who
 * makes room. Color 0 only (accept's color), so nothing here takes a lock.
 *
 * The threat: a connection holds a slot from accept on, and one that never
 * sends its hello costs its opener nothing but a socket. Filling the table
 * with such connections used to refuse every other client for as long as
 * they stayed open. The handshake timeout (conn.C) ends them after
 * --handshake-timeout seconds, but that is far too slow to let a real
 * client in within a second, and an attacker simply opens new ones.
 *
 * The rules, applied at accept (doc/sfs.md, "Faults and hostile clients"):
 *  1. Per address: an IPv4 address that holds --max-per-addr connections
 *     gets no more. Its newcomer displaces that address's oldest connection
 *     still in its handshake, or is refused if all of them are keyed.
 *  2. The table: at --max-conns, the newcomer displaces the oldest
 *     connection still in its handshake, from any address, or is refused if
 *     every connection is keyed.
 * A keyed connection is never evicted: it has done a key exchange, and
 * holds the client's handles. Keyed connections that then stay silent are
 * the idle timeout's (conn.C), and the per-address limit keeps one remote
 * host from holding more than its share of them.
 *
 * Why the oldest in its handshake: a real client sends its hello with its
 * connect and is keyed one round trip later (on loopback, well under a
 * millisecond). To evict it, an attacker must open more connections than
 * the limit in that time, all newer than it; silent connections, however
 * many, are older and go first. On loopback every client has the address
 * 127.0.0.1, so rule 1 alone would refuse the real client along with the
 * silent ones: it is the eviction, within the address too, that lets it in.
 *
 * State: the count of live connections (admitted, not yet gone), per
 * address a count and the list of its connections in their handshake, and
 * the same connections again in one list in accept order. A connection
 * leaves the lists when it is keyed or gone (it posts sfs_table_keyed or
 * sfs_table_gone here) or evicted. The race between an eviction (here) and
 * the key exchange (on the connection's color) is settled by `phase`'s
 * compare-and-swap (sfsd.h): whichever moves it out of HELLO first wins.
 *
 * Costs: O(1) per accept, key exchange and close (a hash lookup, list
 * links). An eviction pops the lists' front, skipping connections keyed or
 * closed meanwhile, each at most once over its life. Memory: one hash entry
 * per address with live connections.
 */
#include "apps/sfs/sfsd.h"

#include <cassert>
#include <unordered_map>

/* Every entry point below runs on color 0, which makes the table lock-free:
 * checked, since a caller on another color would race silently. */
#define ON_COLOR_0() assert(get_current_color() == 0)

namespace {

struct addr_entry {
    unsigned conns = 0;    /* live connections from this address */
    sfsconn_list unkeyed;  /* those in their handshake, oldest first */
};

struct table {
    unsigned live = 0;        /* admitted, not yet gone or evicted */
    sfsconn_list unkeyed_all; /* every connection in its handshake, oldest first */
    std::unordered_map<uint32_t, addr_entry> addrs;
};

/* Never destroyed: exit() (SIGTERM's handler) runs static destructors while
 * the workers still run, and the lists' counts would free connections
 * whose events may be running. */
table &tab = *new table;

/* Takes c out of the handshake lists, if there. The lists' counts go:
 * the caller holds its own. */
void unlist(sfsconn *c)
{
    if (!c->listed)
        return;
    c->listed = false;
    tab.addrs[c->addr].unkeyed.erase(c->in_addr);
    tab.unkeyed_all.erase(c->in_all);
}

/* c no longer holds a slot. */
void forget(sfsconn *c)
{
    unlist(c);
    tab.live--;
    auto a = tab.addrs.find(c->addr);
    if (--a->second.conns == 0)
        tab.addrs.erase(a); /* its list is empty: listed connections are counted */
}

/* Evicts the oldest connection of `list` still in its handshake: it is
 * forgotten now, and closed on its own color (sfsconn::evicted). Those at
 * the front that were keyed or closed meanwhile leave the list on the way
 * (their notice, on its way here, does the rest). @return false if none. */
bool evict_from(sfsconn_list &list)
{
    while (!list.empty()) {
        ref<sfsconn> c = list.front();
        unlist(c);
        uint8_t hello = PHASE_HELLO;
        if (!c->phase.compare_exchange_strong(hello, PHASE_GONE, std::memory_order_acq_rel))
            continue;
        forget(c);
        g_stats.evicted.fetch_add(1, std::memory_order_relaxed);
        cpucb_tail(cwrap(c, &sfsconn::evicted, c->color));
        return true;
    }
    return false;
}

} // namespace

bool sfs_table_admit(uint32_t addr)
{
    ON_COLOR_0();
    /* An eviction may erase the address's entry: look it up afresh. */
    auto a = tab.addrs.find(addr);
    if (a != tab.addrs.end() && a->second.conns >= g_opt.max_per_addr &&
        !evict_from(a->second.unkeyed))
        return false;
    return tab.live < g_opt.max_conns || evict_from(tab.unkeyed_all);
}

void sfs_table_add(const ref<sfsconn> &c)
{
    ON_COLOR_0();
    addr_entry &a = tab.addrs[c->addr];
    tab.live++;
    a.conns++;
    c->in_addr = a.unkeyed.insert(a.unkeyed.end(), c);
    c->in_all = tab.unkeyed_all.insert(tab.unkeyed_all.end(), c);
    c->listed = true;
}

bool sfs_table_evict_oldest()
{
    ON_COLOR_0();
    return evict_from(tab.unkeyed_all);
}

void sfs_table_keyed(ref<sfsconn> c)
{
    ON_COLOR_0();
    unlist(c);
}

void sfs_table_gone(ref<sfsconn> c)
{
    ON_COLOR_0();
    forget(c);
}
