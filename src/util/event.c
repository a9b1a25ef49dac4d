#include "util/event.h"

#include <sched.h>
#include <time.h>

#include "util/clock.h"

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* About one hand-off between busy writers. The waiter then yields until
 * YIELD: a writer waiting for its group (a WAL write, the group's
 * inserts) is usually done within tens of microseconds, and one that
 * yields gives way to the flush and compaction threads yet comes back
 * without a wake-up. On a 16-core machine, 16 writers filling with
 * 4 MiB buffers wrote 1.61x faster than with a 4-microsecond spin and
 * no yield (511 k against 317 k ops/s), and 1.79x with no background
 * work (docs/benchmarks.md).
 * Either can be set at build time to try others on a machine at hand. */
#ifndef BKV_EVENT_SPIN_NANOS
#define BKV_EVENT_SPIN_NANOS 1000
#endif
/* Past this, a waiter is waiting for work (a flush that frees room, a
 * synced write), not a hand-off: it sleeps. */
#ifndef BKV_EVENT_YIELD_NANOS
#define BKV_EVENT_YIELD_NANOS 50000
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void sleep_while(bkv_event *ev) {
#ifdef __linux__
    /* Returns at once if the state is no longer SLEEPING; spurious wakes
     * are rechecked by the caller. */
    syscall(SYS_futex, &ev->state, FUTEX_WAIT_PRIVATE, BKV_EVENT_SLEEPING, NULL, NULL, 0);
#else
    (void)ev;
    nanosleep(&(struct timespec){0, 50000}, NULL);
#endif
}

void bkv_event_wait(bkv_event *ev, int may_yield) {
    uint64_t yield_until = may_yield ? BKV_EVENT_YIELD_NANOS : BKV_EVENT_SPIN_NANOS;
    if (!bkv_event_is_set(ev)) {
        uint64_t start = bkv_monotonic_nanos(), now = start;
        for (unsigned i = 1; !bkv_event_is_set(ev); i++) {
            if (now - start < BKV_EVENT_SPIN_NANOS) {
                cpu_relax();
            } else if (now - start < yield_until) {
                sched_yield();
            } else {
                unsigned expected = BKV_EVENT_CLEAR;
                if (atomic_compare_exchange_strong_explicit(&ev->state, &expected, BKV_EVENT_SLEEPING,
                                                            memory_order_acquire, memory_order_acquire) ||
                    expected == BKV_EVENT_SLEEPING)
                    sleep_while(ev);
                continue;
            }
            if (i % 16 == 0 || now - start >= BKV_EVENT_SPIN_NANOS) now = bkv_monotonic_nanos();
        }
    }
    atomic_store_explicit(&ev->state, BKV_EVENT_CLEAR, memory_order_relaxed);
}

void bkv_event_set(bkv_event *ev) {
    if (atomic_exchange_explicit(&ev->state, BKV_EVENT_SET, memory_order_acq_rel) == BKV_EVENT_SLEEPING) {
#ifdef __linux__
        syscall(SYS_futex, &ev->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#endif
    }
}
