/* Invariant checks: on in debug builds (the sanitizer, fuzz and TSan
 * builds are debug builds), compiled out of release builds. A failed check
 * prints the condition and where, and aborts: an invariant that does not
 * hold means the next step could write wrong data. */
#ifndef BKV_UTIL_CHECK_H
#define BKV_UTIL_CHECK_H

#ifdef BKV_CHECK_INVARIANTS
void bkv_check_failed(const char *cond, const char *file, int line) __attribute__((noreturn));
#define BKV_ASSERT(cond) ((cond) ? (void)0 : bkv_check_failed(#cond, __FILE__, __LINE__))
#else
#define BKV_ASSERT(cond) ((void)0)
#endif

#endif
