/*
 * A fault-injecting env for tests: wraps the POSIX env, remembers what a
 * power loss would keep, and fails chosen operations.
 *
 * Durability model (what survives a power loss): a file's bytes up to its
 * last sync, then none, some or garbage of the rest; a file's creation,
 * removal or rename only once its directory was synced after it; a
 * directory made through the env likewise, with all it holds.
 * bkv_fault_env_snapshot() copies the database directory as it would look
 * after a power loss at this instant.
 *
 * Failure injection: the n-th operation of a kind after the request (n = 1:
 * the next one) fails with EIO, ENOSPC or a short write, once or from then
 * on.
 *
 * Single-threaded use only (the tests drive one database at a time; the
 * database's own threads are serialized by a mutex inside).
 */
#ifndef BKV_UTIL_ENV_FAULT_H
#define BKV_UTIL_ENV_FAULT_H

#include <stdint.h>

#include "util/env.h"

enum { BKV_FAULT_WRITE, BKV_FAULT_SYNC, BKV_FAULT_OPEN, BKV_FAULT_RENAME, BKV_FAULT_READ, BKV_FAULT_KINDS };
enum { BKV_FAULT_EIO, BKV_FAULT_ENOSPC, BKV_FAULT_SHORT_WRITE };

typedef struct bkv_fault_env bkv_fault_env;

bkv_fault_env *bkv_fault_env_new(void);
void bkv_fault_env_free(bkv_fault_env *f);
const bkv_env *bkv_fault_env_get(bkv_fault_env *f);

/* Fail the n-th operation of kind from now (n >= 1; 1: the next one),
 * persistently or once. */
void bkv_fault_env_fail_at(bkv_fault_env *f, int kind, uint64_t n, int error, int persistent);
void bkv_fault_env_clear_faults(bkv_fault_env *f);
uint64_t bkv_fault_env_count(bkv_fault_env *f, int kind);
uint64_t bkv_fault_env_faults_injected(bkv_fault_env *f);

/* Calls fn at every crash point, with their running count: after every
 * file sync, directory sync, rename and removal, and after every
 * append_every-th append (0: none). */
void bkv_fault_env_on_crash_point(bkv_fault_env *f, void (*fn)(void *arg, uint64_t n), void *arg, uint64_t append_every);

/* What a power loss leaves of a file's unsynced tail: nothing; a prefix
 * of it as written; a prefix of it overwritten with garbage. */
enum { BKV_LOSS_DROP, BKV_LOSS_TORN, BKV_LOSS_GARBAGE, BKV_LOSS_MODES };

/* Writes into dst (an empty directory) what a power loss now would leave
 * of directory src; seed picks the torn lengths and garbage. Returns BKV_OK
 * or an I/O error. */
int bkv_fault_env_snapshot(bkv_fault_env *f, const char *src, const char *dst, int mode, uint64_t seed);

#endif
