/*
 * The write path and flushes.
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
 * a new WAL is started (the old one synced whole first, so only the newest
 * WAL can ever have a torn tail), and the background thread writes it to a
 * level-0 table. Writers slow down by 1 ms when the immutable memtables
 * reach the limit, and stop until a flush finishes when the active one is
 * full too, so memory stays bounded.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/db_files.h"
#include "db/write_batch.h"
#include "util/ikey.h"

/* A group grows to at most this many bytes (1 MiB), or to the first batch
 * plus 128 KiB when that one is small, so a small write is not delayed by
 * a huge group. */
#define MAX_GROUP (1u << 20)

struct bkv_writer {
    const bkv_buf *rep;   /* NULL: a flush request */
    int sync;
    int done;
    int rc;
    bkv_err err;
    pthread_cond_t cv;
    bkv_writer *next;
};

static int max_imm(const bkv_db *db) { return db->opts.max_write_buffer_number - 1; }

int bkv_db_set_bg_error(bkv_db *db, int rc, const bkv_err *e) {
    if (!db->bg_error) {
        db->bg_error = rc;
        snprintf(db->bg_msg, sizeof db->bg_msg, "%s", e && e->msg[0] ? e->msg : bkv_strerror(rc));
    }
    pthread_cond_broadcast(&db->bg_cv);
    return rc;
}

static int bg_error(bkv_db *db, bkv_err *e) {
    return bkv_fail(e, db->bg_error, "database is read-only after an earlier error: %s", db->bg_msg);
}

/* Makes the active memtable immutable and starts a new WAL.
 * REQUIRES: db->mu held, by the write leader, and nimm < max_imm. */
static int switch_memtable(bkv_db *db, bkv_err *e) {
    bkv_memtable *fresh = bkv_db_new_memtable(db);
    if (!fresh) return bkv_fail(e, BKV_NOMEM, "out of memory for a new memtable");
    uint64_t number = db->next_file++;
    char path[BKV_PATH_MAX];
    bkv_log_name(path, db->path, number);
    bkv_wfile *f = NULL;
    /* The old log is ended and synced before the new one can exist on
     * disk: once a newer log survives a power loss, a torn tail in an
     * older one would be mid-history damage and refuse the open; and an
     * older log that lost its end record was truncated. */
    uint8_t end[BKV_BATCH_HEADER] = {0}; /* a batch of no entries */
    bkv_put_u64(end, db->last_sequence);
    int rc = bkv_log_add_record(&db->log, end, sizeof end, e);
    if (!rc) rc = bkv_file_sync(db->logfile, e);
    if (!rc) rc = bkv_file_close(db->logfile, e);
    else bkv_file_close(db->logfile, NULL);
    db->logfile = NULL;
    if (!rc) rc = db->env->new_writable(db->env, path, db->opts.file_mode, &f, e);
    /* The new log's name must be durable before a synced write in it is
     * acknowledged: a power loss could otherwise drop the whole file. */
    if (!rc) rc = db->env->sync_dir(db->env, db->path, e);
    if (rc) {
        if (f) {
            bkv_file_close(f, NULL);
            db->env->remove_file(db->env, path, NULL);
        }
        bkv_memtable_unref(fresh);
        return bkv_db_set_bg_error(db, rc, e);
    }
    db->logfile = f;
    bkv_log_writer_init(&db->log, f);
    db->imm[db->nimm] = db->mem;
    db->imm_log[db->nimm] = db->mem_log;
    db->nimm++;
    db->mem = fresh;
    db->mem_log = number;
    pthread_cond_signal(&db->work_cv);
    return BKV_OK;
}

/* Gives the background 1 ms of this writer's time now, rather than stop
 * every writer later. REQUIRES: db->mu held; drops it while sleeping. */
static void slow_down(bkv_db *db) {
    atomic_fetch_add_explicit(&db->c.write_slowdowns, 1, memory_order_relaxed);
    pthread_mutex_unlock(&db->mu);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    pthread_mutex_lock(&db->mu);
}

/* REQUIRES: db->mu held, by the write leader. */
static int make_room_for_write(bkv_db *db, int force, bkv_err *e) {
    int allow_delay = !force;
    for (;;) {
        if (db->bg_error) return bg_error(db, e);
        size_t used = bkv_memtable_memory(db->mem);
        if (force && bkv_memtable_entries(db->mem) == 0) return BKV_OK;
        size_t l0 = db->current->nfiles[0];
        if (!force && allow_delay && l0 >= (size_t)db->opts.level0_slowdown_trigger) {
            slow_down(db); /* level 0 is piling up */
            allow_delay = 0;
            continue;
        }
        if (!force && l0 >= (size_t)db->opts.level0_stop_trigger) {
            atomic_fetch_add_explicit(&db->c.write_stalls, 1, memory_order_relaxed);
            pthread_cond_signal(&db->work_cv);
            pthread_cond_wait(&db->bg_cv, &db->mu);
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
            atomic_fetch_add_explicit(&db->c.write_stalls, 1, memory_order_relaxed);
            pthread_cond_wait(&db->bg_cv, &db->mu);
            continue;
        }
        int rc = switch_memtable(db, e);
        if (rc || force) return rc;
    }
}

static int insert_entry(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen) {
    bkv_memtable *m = arg;
    return bkv_memtable_add(m, seq, type, key, klen, val, vlen, bkv_hash_bytes(key, klen));
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
    memset(&w, 0, sizeof w);
    w.rep = rep;
    w.sync = wo && wo->sync;
    pthread_cond_init(&w.cv, NULL);

    pthread_mutex_lock(&db->mu);
    if (db->writers_tail) db->writers_tail->next = &w;
    else db->writers_head = &w;
    db->writers_tail = &w;
    while (!w.done && db->writers_head != &w) pthread_cond_wait(&w.cv, &db->mu);
    if (w.done) {
        pthread_mutex_unlock(&db->mu);
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
        size_t limit = rep->len <= (128u << 10) ? rep->len + (128u << 10) : MAX_GROUP;
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
            pthread_mutex_unlock(&db->mu);

            rc = bkv_log_add_record(&db->log, g->data, g->len, &e);
            /* Unsynced writes still reach the OS before returning, so they
             * survive a crash of this process. */
            if (!rc) rc = sync ? bkv_file_sync(db->logfile, &e) : bkv_file_flush(db->logfile, &e);
            int log_rc = rc;
            if (!rc) rc = bkv_batch_iterate(g->data, g->len, insert_entry, mem, "write batch", 0, &e);
            atomic_fetch_add_explicit(&db->c.bytes_written, g->len, memory_order_relaxed);
            atomic_fetch_add_explicit(&db->c.writes, count, memory_order_relaxed);
            if (sync) atomic_fetch_add_explicit(&db->c.syncs, 1, memory_order_relaxed);

            pthread_mutex_lock(&db->mu);
            if (log_rc) bkv_db_set_bg_error(db, log_rc, &e);
            else if (rc) bkv_db_set_bg_error(db, rc, &e); /* memtable out of memory: the WAL has it, but reads would not */
            else atomic_store_explicit(&db->visible_sequence, db->last_sequence, memory_order_release);
        }
    }

    for (;;) {
        bkv_writer *x = db->writers_head;
        db->writers_head = x->next;
        if (x != &w) {
            x->rc = rc;
            x->err = e;
            x->done = 1;
            pthread_cond_signal(&x->cv);
        }
        if (x == last) break;
    }
    if (!db->writers_head) db->writers_tail = NULL;
    else pthread_cond_signal(&db->writers_head->cv);
    pthread_mutex_unlock(&db->mu);
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
    pthread_mutex_lock(&db->mu);
    while ((db->nimm > 0 || db->flushing) && !db->bg_error) pthread_cond_wait(&db->bg_cv, &db->mu);
    bkv_err e = {{0}};
    if (db->bg_error) rc = bg_error(db, &e);
    pthread_mutex_unlock(&db->mu);
    return bkv_db_error(db, rc, &e);
}

int bkv_write_level0_table(bkv_db *db, bkv_memtable *mem, uint64_t number, bkv_file_meta **out, bkv_err *e) {
    *out = NULL;
    if (bkv_memtable_entries(mem) == 0) return BKV_OK;
    char path[BKV_PATH_MAX];
    bkv_table_name(path, db->path, number);
    bkv_wfile *f;
    int rc = db->env->new_writable(db->env, path, db->opts.file_mode, &f, e);
    if (rc) return rc;
    /* A flush is bottommost only when it makes the first table of all. */
    bkv_table_options to = bkv_db_table_options(db, 0, 0);
    bkv_table_builder *b = bkv_table_builder_new(&to, f, path);
    if (!b) rc = bkv_fail(e, BKV_NOMEM, "out of memory building %s", path);
    bkv_memtable_iter it;
    bkv_memtable_iter_init(&it, mem);
    const uint8_t *smallest = NULL, *largest = NULL;
    size_t slen = 0, llen = 0;
    for (bkv_memtable_iter_first(&it); !rc && bkv_memtable_iter_valid(&it); bkv_memtable_iter_next(&it)) {
        size_t klen, vlen;
        const uint8_t *k = bkv_memtable_iter_ikey(&it, &klen), *v = bkv_memtable_iter_value(&it, &vlen);
        if (!smallest) smallest = k, slen = klen;
        largest = k, llen = klen;
        rc = bkv_table_builder_add(b, k, klen, v, vlen, e);
    }
    if (!rc) rc = bkv_table_builder_finish(b, e);
    uint64_t size = b ? bkv_table_builder_file_size(b) : 0, entries = b ? bkv_table_builder_entries(b) : 0;
    uint64_t lo = 0, hi = 0;
    if (b) bkv_table_builder_seq_range(b, &lo, &hi);
    bkv_vf_set *vf = b && !rc ? bkv_db_take_value_filters(b) : NULL;
    bkv_table_builder_free(b);
    if (!rc) rc = bkv_file_sync(f, e);
    int crc = bkv_file_close(f, rc ? NULL : e);
    if (!rc) rc = crc;
    /* The new name must be durable before a manifest refers to it. */
    if (!rc) rc = db->env->sync_dir(db->env, db->path, e);
    if (!rc && !(*out = bkv_file_meta_new(number, size, entries, smallest, slen, largest, llen)))
        rc = bkv_fail(e, BKV_NOMEM, "out of memory");
    if (!rc) {
        (*out)->smallest_seq = lo;
        (*out)->largest_seq = hi;
        (*out)->vf = vf;
        vf = NULL;
        atomic_fetch_add_explicit(&db->c.flush_bytes_written, size, memory_order_relaxed);
    }
    if (rc) db->env->remove_file(db->env, path, NULL);
    bkv_vf_set_destroy(vf);
    return rc;
}

int bkv_log_and_apply(bkv_db *db, bkv_version_edit *edit, bkv_err *e) {
    edit->has_next_file = edit->has_last_sequence = 1;
    edit->next_file = db->next_file;
    edit->last_sequence = db->last_sequence;
    bkv_tree_version *nv;
    int rc = bkv_tree_version_apply(db->current, edit, &nv);
    if (rc) return bkv_fail(e, rc, "out of memory applying a version edit");
    bkv_buf rec;
    bkv_buf_init(&rec);
    if (bkv_edit_encode(edit, &rec)) rc = bkv_fail(e, BKV_NOMEM, "out of memory encoding a version edit");
    if (!rc) rc = bkv_log_add_record(&db->manifest_log, rec.data, rec.len, e);
    if (!rc) rc = bkv_file_sync(db->manifest, e);
    bkv_buf_free(&rec);
    if (rc) {
        bkv_tree_version_unref(nv);
        /* The manifest may now end in a partial record: nothing more may
         * be appended after it. */
        return bkv_db_set_bg_error(db, rc, e);
    }
    bkv_tree_version_unref(db->current);
    db->current = nv;
    return BKV_OK;
}

/* Flushes the oldest immutable memtable. REQUIRES: db->mu held. */
static void flush_one(bkv_db *db) {
    bkv_memtable *mem = db->imm[0];
    uint64_t old_log = db->imm_log[0];
    uint64_t number = db->next_file++;
    db->flushing = 1;
    pthread_mutex_unlock(&db->mu);
    bkv_err e = {{0}};
    bkv_file_meta *meta = NULL;
    int rc = bkv_write_level0_table(db, mem, number, &meta, &e);
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    if (!rc && meta && (rc = bkv_edit_add_file(&edit, 0, meta))) bkv_fail(&e, rc, "out of memory");
    bkv_file_meta_unref(meta);
    if (!rc) bkv_db_value_index_add(db, &edit);
    pthread_mutex_lock(&db->mu);
    db->flushing = 0;
    if (!rc) {
        edit.has_log_number = 1;
        edit.log_number = db->nimm > 1 ? db->imm_log[1] : db->mem_log;
        rc = bkv_log_and_apply(db, &edit, &e);
        if (rc) {
            pthread_mutex_unlock(&db->mu);
            bkv_db_value_index_finish(db, &edit, 0);
            pthread_mutex_lock(&db->mu);
        }
    }
    bkv_edit_free(&edit);
    if (rc) {
        bkv_db_set_bg_error(db, rc, &e);
        return;
    }
    memmove(db->imm, db->imm + 1, (size_t)(db->nimm - 1) * sizeof db->imm[0]);
    memmove(db->imm_log, db->imm_log + 1, (size_t)(db->nimm - 1) * sizeof db->imm_log[0]);
    db->nimm--;
    bkv_memtable_unref(mem);
    atomic_fetch_add_explicit(&db->c.flushes, 1, memory_order_relaxed);
    char path[BKV_PATH_MAX];
    bkv_log_name(path, db->path, old_log);
    db->env->remove_file(db->env, path, NULL);
    pthread_cond_broadcast(&db->bg_cv);
}

/* Each background thread flushes when a flush is due and none is running,
 * else compacts when a compaction is due and none is running, else waits.
 * With two or more threads a long compaction never holds up flushes. */
void *bkv_db_background(void *arg) {
    bkv_db *db = arg;
    pthread_mutex_lock(&db->mu);
    while (!db->shutting_down) {
        if (db->nimm > 0 && !db->flushing && !db->bg_error) {
            flush_one(db);
            pthread_cond_broadcast(&db->work_cv); /* a compaction may now be due */
            continue;
        }
        if (!db->compacting && !db->bg_error) {
            bkv_compaction *c = bkv_pick_compaction(db);
            if (c) {
                db->compacting = 1;
                bkv_run_compaction(db, c);
                db->compacting = 0;
                pthread_cond_broadcast(&db->bg_cv);
                pthread_cond_broadcast(&db->work_cv);
                continue;
            }
        }
        pthread_cond_wait(&db->work_cv, &db->mu);
    }
    pthread_cond_broadcast(&db->bg_cv);
    pthread_mutex_unlock(&db->mu);
    return NULL;
}

int bkv_compact(bkv_db *db) {
    if (!db) return BKV_INVALID;
    int rc = bkv_flush(db);
    if (rc) return rc;
    pthread_mutex_lock(&db->mu);
    pthread_cond_broadcast(&db->work_cv);
    for (;;) {
        if (db->bg_error) break;
        if (!db->compacting && !db->flushing && db->nimm == 0) {
            bkv_compaction *c = bkv_pick_compaction(db);
            if (!c) break;
            /* Run it here rather than wait: the caller asked for it. */
            db->compacting = 1;
            bkv_run_compaction(db, c);
            db->compacting = 0;
            pthread_cond_broadcast(&db->bg_cv);
            continue;
        }
        pthread_cond_wait(&db->bg_cv, &db->mu);
    }
    bkv_err e = {{0}};
    if (db->bg_error) rc = bg_error(db, &e);
    pthread_mutex_unlock(&db->mu);
    return bkv_db_error(db, rc, &e);
}
