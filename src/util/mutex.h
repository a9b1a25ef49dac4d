/* Mutexes guarding steps of well under a microsecond that two threads may
 * meet at several times per operation (the database's writers, the
 * memtable's concurrent adds): a waiter that sleeps in the kernel and is
 * woken costs far more than the step, so it spins a little first (glibc's
 * adaptive mutex; elsewhere the default). */
#ifndef BKV_UTIL_MUTEX_H
#define BKV_UTIL_MUTEX_H

#include <pthread.h>

static inline void bkv_mutex_init_adaptive(pthread_mutex_t *mu) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef __GLIBC__
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(mu, &attr);
    pthread_mutexattr_destroy(&attr);
}

#endif
