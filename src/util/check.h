/* Invariant checks. BKV_ASSERT: on in debug builds (the sanitizer, fuzz
 * and TSan builds are debug builds), compiled out of release builds; a
 * failed check prints the condition and where, and aborts: an invariant
 * that does not hold means the next step could write wrong data. */
#ifndef BKV_UTIL_CHECK_H
#define BKV_UTIL_CHECK_H

#ifdef BKV_CHECK_INVARIANTS
void bkv_check_failed(const char *cond, const char *file, int line) __attribute__((noreturn));
#define BKV_ASSERT(cond) ((cond) ? (void)0 : bkv_check_failed(#cond, __FILE__, __LINE__))
#else
#define BKV_ASSERT(cond) ((void)0)
#endif

/* Cheap checks that stay in release builds (SQLite's NEVER): for an
 * invariant whose failure would let the next step install or write a wrong
 * state, tested where the test costs next to nothing. BKV_NEVER(cond) is
 * cond, so the caller takes its error path (BKV_CORRUPTION from
 * bkv_internal_error, naming the check) instead of going on; a debug
 * build aborts at once, where the failure is. */
#ifdef BKV_CHECK_INVARIANTS
#define BKV_NEVER(cond) ((cond) ? (bkv_check_failed(#cond, __FILE__, __LINE__), 1) : 0)
#else
#define BKV_NEVER(cond) __builtin_expect(!!(cond), 0)
#endif
#define bkv_internal_error(e, what) \
    bkv_fail((e), BKV_CORRUPTION, "internal check failed: %s (%s:%d)", (what), __FILE__, __LINE__)

#endif
