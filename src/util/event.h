/* A one-shot event one thread waits on and another sets: what a queued
 * writer waits on (to lead, to insert its batch, to learn its outcome).
 * Each waiter has its own word, so a waiter only ever reads its own cache
 * line, and setting it needs no mutex: the setter's one atomic exchange
 * publishes every write it made before (release), and a futex wake follows
 * only when the waiter went to sleep.
 *
 * The waiter spins briefly (a hand-off among busy writers takes well under
 * a microsecond), then, when the caller allows, yields the processor
 * between looks for a while (a writer that waits for a group rather than
 * a hand-off must not hold a core the flush and compaction threads need,
 * and a yield costs far less than a sleep and a wake-up), and only then
 * sleeps in the kernel.
 *
 * The setter touches the event through the exchange alone, then at most
 * makes a futex wake on its address: a waiter that saw the event set may
 * already have left and reused its memory, and a stray wake of whatever
 * waits there next is harmless (every wait here rechecks its word). */
#ifndef BKV_UTIL_EVENT_H
#define BKV_UTIL_EVENT_H

#include <stdatomic.h>

typedef struct bkv_event {
    atomic_uint state; /* BKV_EVENT_* */
} bkv_event;

enum { BKV_EVENT_CLEAR = 0, BKV_EVENT_SLEEPING = 1, BKV_EVENT_SET = 2 };

static inline void bkv_event_init(bkv_event *ev) { atomic_init(&ev->state, BKV_EVENT_CLEAR); }

static inline int bkv_event_is_set(const bkv_event *ev) {
    return atomic_load_explicit(&ev->state, memory_order_acquire) == BKV_EVENT_SET;
}

/* Whether the waiter has gone to sleep (a hint: it may do so right after). */
static inline int bkv_event_sleeping(const bkv_event *ev) {
    return atomic_load_explicit(&ev->state, memory_order_relaxed) == BKV_EVENT_SLEEPING;
}

/* Waits until the event is set, then clears it for the next use. Every
 * write the setter made before setting it is visible on return. may_yield:
 * yield between spinning and sleeping; worth it only while the waiters
 * are no more than the processors, or the yielding threads take turns
 * with the ones they wait for. */
void bkv_event_wait(bkv_event *ev, int may_yield);

/* Sets the event, waking its waiter if it sleeps. At most one set per
 * wait. */
void bkv_event_set(bkv_event *ev);

#endif
