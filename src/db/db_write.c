/*
 * The write path: group commit into the WAL and the memtable, and the
 * switch to a new memtable when one fills (its flush is background.c).
 *
 * Group commit: writers queue up; the one at the head (the leader) takes
 * every queued batch it can, gives them consecutive sequence numbers,
 * appends them to the WAL as one record (one write, and one fsync if any
 * of them asked for sync), inserts them into the memtable and wakes the
 * others. Only the leader touches the WAL and the active memtable, so
 * neither needs a lock of its own; readers see a write once the leader
 * publishes visible_sequence after inserting it.
 *
 * Memtable switch: when the active memtable is full it becomes immutable,
 * a new WAL is started (the old one ended, and synced later in the
 * background: log_sync.c), and the background thread writes it to a
 * level-0 table. Writers slow down by 1 ms when the immutable memtables
 * reach the limit, and stop until a flush finishes when the active one is
 * full too, so memory stays bounded.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/read_view.h"
#include "db/write_batch.h"
#include "util/ikey.h"

/* A group grows to at most MAX_GROUP bytes, or to the first batch plus
 * SMALL_GROUP_SLACK when that one is small, so a small write is not delayed
 * by a huge group (LevelDB's BuildBatchGroup uses the same 1 MiB / 128 KiB). */
#define MAX_GROUP (1u << 20)
#define SMALL_GROUP_SLACK (128u << 10)

static int max_imm(const bkv_db *db) { return db->opts.max_write_buffer_number - 1; }

int bkv_db_new_wal(bkv_db *db, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e) {
    if (db->opts.wal_mmap) return bkv_env_new_log(db->env, path, mode, out, e);
    return db->env->new_writable(db->env, path, mode, out, e);
}

/* Makes the active memtable immutable and starts a new WAL.
 * REQUIRES: db->mu held, by the write leader, and nimm < max_imm. The
 * mutex is released while the logs are ended and created: only the write
 * leader touches the log, and other writers wait behind it in the queue. */
static int switch_memtable(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    uint64_t number;
    bkv_wfile *f = bkv_db_take_spare_log(db, &number);
    uint64_t last_sequence = db->last_sequence;
    bkv_wfile *old = db->logfile;
    bkv_db_unlock(db);
    bkv_memtable *fresh = bkv_db_new_memtable(db);
    if (!fresh) {
        if (f) bkv_db_discard_wal(db, f, number);
        bkv_db_lock(db);
        return bkv_fail(e, BKV_NOMEM, "out of memory for a new memtable");
    }
    /* The old log is ended, and in the OS's hands, before the new one
     * (the spare, when a background thread made it in time: log_sync.c)
     * takes a write: a crash of the process loses neither. Its sync, the
     * close of its map and the directory's sync wait for the background; a
     * synced write in the new log waits for them (bkv_db_mark_log). */
    uint8_t end[BKV_LOG_END_LEN] = {0}; /* a batch of no entries, then the next WAL's number */
    bkv_put_u64(end, last_sequence);
    bkv_put_u64(end + BKV_BATCH_HEADER, number);
    char path[BKV_PATH_MAX];
    bkv_wal_name(path, db->path, number);
    int rc = bkv_log_add_record(&db->log, end, sizeof end, e);
    if (!rc) rc = bkv_file_flush(old, e);
    if (!rc && !f) rc = bkv_db_new_wal(db, path, db->opts.file_mode, &f, e);
    int retire_rc = bkv_db_retire_log(db, old, number, rc ? NULL : e);
    if (!rc) rc = retire_rc;
    if (rc && f) bkv_db_discard_wal(db, f, number);
    bkv_db_lock(db);
    if (rc) {
        db->logfile = NULL;
        bkv_memtable_unref(fresh);
        return bkv_db_set_bg_error(db, rc, e);
    }
    db->logfile = f;
    bkv_log_writer_init(&db->log, f);
    db->log_marked = 0;
    db->imm[db->nimm] = db->mem;
    db->imm_log[db->nimm] = db->mem_log;
    db->nimm++;
    db->mem = fresh;
    db->mem_log = number;
    bkv_view_publish(db);
    pthread_cond_broadcast(&db->work_cv);
    return BKV_OK;
}

/* Gives the background 1 ms of this writer's time now, rather than stop
 * every writer later. REQUIRES: db->mu held; drops it while sleeping. */
static void slow_down(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    BKV_COUNT(db, write_slowdowns, 1);
    bkv_db_unlock(db);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    bkv_db_lock(db);
}

/* REQUIRES: db->mu held, by the write leader. */
static int make_room_for_write(bkv_db *db, int force, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    int allow_delay = !force;
    for (;;) {
        if (db->bg_error) return bkv_db_bg_status(db, e);
        size_t used = bkv_memtable_memory(db->mem);
        if (force && bkv_memtable_entries(db->mem) == 0) return BKV_OK;
        size_t l0 = db->current->nfiles[0];
        if (!force && allow_delay && l0 >= (size_t)db->opts.level0_slowdown_trigger) {
            slow_down(db); /* level 0 is piling up */
            allow_delay = 0;
            continue;
        }
        if (!force && l0 >= (size_t)db->opts.level0_stop_trigger) {
            BKV_COUNT(db, write_stalls, 1);
            pthread_cond_broadcast(&db->work_cv);
            bkv_db_wait(db, &db->bg_cv);
            continue;
        }
        if (!force && used < db->opts.write_buffer_size) {
            if (allow_delay && db->nimm >= max_imm(db) && used >= db->opts.write_buffer_size / 4 * 3) {
                slow_down(db); /* nearly full with no room to switch */
                allow_delay = 0;
                continue;
            }
            return BKV_OK;
        }
        if (db->nimm >= max_imm(db)) {
            BKV_COUNT(db, write_stalls, 1);
            bkv_db_wait(db, &db->bg_cv);
            continue;
        }
        int rc = switch_memtable(db, e);
        if (rc || force) return rc;
    }
}

/* How long a queued writer spins before it sleeps: about one group's
 * work. Sleeping and being woken cost two futex calls and two context
 * switches, more than a small group takes on this path. */
#define SPIN_NANOS 4000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Tells a queued writer that it is done or leads: a spinning one sees the
 * flag, a sleeping one is woken. REQUIRES: db->mu held. */
static void signal_writer(bkv_writer *x) {
    atomic_store_explicit(&x->signalled, 1, memory_order_release);
    if (x->sleeping) pthread_cond_signal(&x->cv);
}

static int insert_entry(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen) {
    bkv_memtable *m = arg;
    return bkv_memtable_add(m, seq, type, key, klen, val, vlen, bkv_hash_bytes(key, klen));
}

/* Queues w and waits until it leads the queue or a leader wrote it: first
 * spinning on w->signalled without the mutex, then asleep on w->cv.
 * REQUIRES: db->mu held. */
static void join_queue(bkv_db *db, bkv_writer *w, const bkv_buf *rep, int sync) {
    BKV_ASSERT_LOCKED(db);
    memset(w, 0, sizeof *w);
    w->rep = rep;
    w->sync = sync;
    pthread_cond_init(&w->cv, NULL);
    if (db->writers_tail) db->writers_tail->next = w;
    else db->writers_head = w;
    db->writers_tail = w;
    if (db->writers_head == w) return;
    bkv_db_unlock(db);
    uint64_t deadline = bkv_monotonic_nanos() + SPIN_NANOS;
    for (unsigned i = 1; !atomic_load_explicit(&w->signalled, memory_order_acquire); i++) {
        cpu_relax();
        if (i % 32 == 0 && bkv_monotonic_nanos() > deadline) break;
    }
    bkv_db_lock(db);
    while (!w->done && db->writers_head != w) {
        w->sleeping = 1;
        bkv_db_wait(db, &w->cv);
        w->sleeping = 0;
    }
}

/* The leader w hands the outcome to the writers it took (through last)
 * and the lead to the next. REQUIRES: db->mu held. */
static void leave_queue(bkv_db *db, bkv_writer *w, const bkv_writer *last, int rc, const bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    for (;;) {
        bkv_writer *x = db->writers_head;
        db->writers_head = x->next;
        if (x != w) {
            x->rc = rc;
            x->err = *e;
            x->done = 1;
            signal_writer(x);
        }
        if (x == last) break;
    }
    if (!db->writers_head) db->writers_tail = NULL;
    else signal_writer(db->writers_head);
}

void bkv_db_hold_writes(bkv_db *db, bkv_writer *w) {
    join_queue(db, w, NULL, 0); /* a writer without a batch is never taken into a group */
}

void bkv_db_release_writes(bkv_db *db, bkv_writer *w) {
    leave_queue(db, w, w, BKV_OK, &(bkv_err){{0}});
    pthread_cond_destroy(&w->cv);
}

int bkv_db_flush_held(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    int rc = make_room_for_write(db, 1, e);
    while (!rc && (db->nimm > 0 || db->flushing) && !db->bg_error) bkv_db_wait(db, &db->bg_cv);
    if (!rc && db->bg_error) rc = bkv_db_bg_status(db, e);
    return rc;
}

static int write_internal(bkv_db *db, const bkv_write_options *wo, const bkv_buf *rep) {
    bkv_write_options adopted;
    if (wo && wo->size != sizeof *wo) {
        bkv_err e;
        bkv_write_options_init(&adopted);
        if (bkv_adopt_options(&adopted, sizeof adopted, wo, "bkv_write_options", &e)) return bkv_db_error(db, BKV_INVALID, &e);
        wo = &adopted;
    }
    bkv_writer w;
    bkv_db_lock(db);
    join_queue(db, &w, rep, wo && wo->sync);
    if (w.done) {
        bkv_db_unlock(db);
        pthread_cond_destroy(&w.cv);
        return bkv_db_error(db, w.rc, &w.err);
    }

    /* Leader. */
    bkv_err e = {{0}};
    int rc = make_room_for_write(db, rep == NULL, &e);
    bkv_writer *last = &w;
    if (rc == BKV_OK && rep) {
        bkv_buf *g = &db->group;
        if (bkv_buf_set(g, rep->data, rep->len)) rc = bkv_fail(&e, BKV_NOMEM, "out of memory grouping writes");
        size_t limit = rep->len <= SMALL_GROUP_SLACK ? rep->len + SMALL_GROUP_SLACK : MAX_GROUP;
        int sync = w.sync;
        for (bkv_writer *x = w.next; rc == BKV_OK && x; x = x->next) {
            /* A sync write never rides in a group that will not sync, and
             * flush requests lead their own group. A batch that does not
             * fit in memory waits for the next group instead. */
            if (!x->rep || (x->sync && !sync) || g->len + x->rep->len > limit || bkv_batch_append(g, x->rep)) break;
            last = x;
        }
        uint64_t first = db->last_sequence + 1;
        uint32_t count = rc ? 0 : bkv_batch_rep_count(g->data);
        if (rc == BKV_OK && first + count > BKV_MAX_SEQ) rc = bkv_fail(&e, BKV_INVALID, "sequence numbers exhausted");
        if (rc == BKV_OK) {
            bkv_batch_set_sequence(g, first);
            db->last_sequence += count;
            bkv_memtable *mem = db->mem;
            bkv_db_unlock(db);

            rc = bkv_db_mark_log(db, sync, first - 1, &e);
            if (!rc) rc = bkv_log_add_record(&db->log, g->data, g->len, &e);
            /* Unsynced writes still reach the OS before returning, so they
             * survive a crash of this process. */
            if (!rc) rc = sync ? bkv_file_sync(db->logfile, &e) : bkv_file_flush(db->logfile, &e);
            int log_rc = rc;
            if (!rc) rc = bkv_batch_iterate(g->data, g->len, insert_entry, mem, "write batch", 0, &e);
            BKV_COUNT(db, bytes_written, g->len);
            BKV_COUNT(db, writes, count);
            if (sync) BKV_COUNT(db, syncs, 1);

            bkv_db_lock(db);
            if (log_rc) bkv_db_set_bg_error(db, log_rc, &e);
            else if (rc) bkv_db_set_bg_error(db, rc, &e); /* memtable out of memory: the WAL has it, but reads would not */
            else atomic_store_explicit(&db->visible_sequence, db->last_sequence, memory_order_release);
            atomic_store_explicit(&db->last_write_nanos, bkv_monotonic_nanos(), memory_order_relaxed);
        }
    }

    leave_queue(db, &w, last, rc, &e);
    bkv_db_unlock(db);
    pthread_cond_destroy(&w.cv);
    return bkv_db_error(db, rc, &e);
}

int bkv_write(bkv_db *db, const bkv_write_options *wo, const bkv_batch *batch) {
    if (!db || !batch) return BKV_INVALID;
    if (bkv_batch_count(batch) == 0) return BKV_OK;
    return write_internal(db, wo, &batch->rep);
}

static int write_one(bkv_db *db, const bkv_write_options *wo, unsigned type, const void *key, size_t klen,
                     const void *val, size_t vlen) {
    if (!db) return BKV_INVALID;
    bkv_batch b;
    uint8_t mem[512];
    bkv_buf_init_with(&b.rep, mem, sizeof mem);
    uint8_t h[BKV_BATCH_HEADER] = {0};
    (void)!bkv_buf_append(&b.rep, h, sizeof h); /* fits in mem */
    int rc = type == BKV_TYPE_VALUE ? bkv_batch_put(&b, key, klen, val, vlen) : bkv_batch_delete(&b, key, klen);
    if (!rc) rc = write_internal(db, wo, &b.rep);
    bkv_buf_free(&b.rep);
    return rc;
}

int bkv_put(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen, const void *val, size_t vlen) {
    return write_one(db, wo, BKV_TYPE_VALUE, key, klen, val, vlen);
}

int bkv_delete(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen) {
    return write_one(db, wo, BKV_TYPE_DELETION, key, klen, NULL, 0);
}

int bkv_flush(bkv_db *db) {
    if (!db) return BKV_INVALID;
    int rc = write_internal(db, NULL, NULL);
    if (rc) return rc;
    bkv_db_lock(db);
    while ((db->nimm > 0 || db->flushing) && !db->bg_error) bkv_db_wait(db, &db->bg_cv);
    bkv_err e = {{0}};
    if (db->bg_error) rc = bkv_db_bg_status(db, &e);
    bkv_db_unlock(db);
    return bkv_db_error(db, rc, &e);
}





