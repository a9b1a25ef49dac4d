/*
 * The write path: group commit into the WAL and the memtable, and the
 * switch to a new memtable when one fills (its flush is background.c).
 *
 * Group commit: writers queue up; the one at the head (the leader) takes
 * every queued batch it can, gives them consecutive sequence numbers and
 * appends them to the WAL as one record (one write, and one fsync if any
 * of them asked for sync). Only the leader touches the WAL, so it needs
 * no lock of its own.
 *
 * Memtable inserts do not serialize behind the leader: once its group is
 * in the WAL, the leader passes the lead on, so the next group's WAL
 * write overlaps this group's inserts, and the group's followers insert
 * their own batches beside the leader (the memtable takes concurrent
 * adds; hand_out_inserts says which). When the background leaves the
 * writers one processor, the leader inserts its group alone before
 * passing the lead (writer_cpus). Groups are published in sequence
 * order: readers see a group once it and every group before it are in
 * the memtable (visible_sequence), so a batch is never seen in part. A
 * memtable switch, and a caller holding writes, first wait for the
 * inserts in flight.
 *
 * Each writer waits on an event of its own (util/event.h), set without
 * the mutex, and the writers of a group wake one another (plan_wakes), so
 * the leader never makes a system call per follower.
 *
 * Memtable switch: when the active memtable is full it becomes immutable,
 * a new WAL is started (the old one ended, and synced later in the
 * background: log_sync.c), and the background thread writes it to a
 * level-0 table. Writers slow down by 1 ms when the immutable memtables
 * reach the limit, and stop until a flush finishes when the active one is
 * full too, so memory stays bounded.
 */
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/memtables.h"
#include "db/read_view.h"
#include "db/scheduler.h"
#include "db/version_set.h"
#include "db/write_batch.h"
#include "util/ikey.h"

/* A group grows to at most MAX_GROUP bytes, or to the first batch plus
 * SMALL_GROUP_SLACK when that one is small, so a small write is not delayed
 * by a huge group (LevelDB's BuildBatchGroup uses the same 1 MiB / 128 KiB). */
#define MAX_GROUP (1u << 20)
#define SMALL_GROUP_SLACK (128u << 10)

static int max_imm(const bkv_db *db) { return db->opts.max_write_buffer_number - 1; }

/* Makes the active memtable immutable and starts a new WAL.
 * REQUIRES: db->mu held, by the write leader, and nimm < max_imm. The
 * mutex is released while the logs are ended and created: only the write
 * leader touches the log, and other writers wait behind it in the queue. */
static int switch_memtable(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    uint64_t number;
    bkv_wfile *f = bkv_db_take_spare_log(db, &number);
    uint64_t last_sequence = db->last_sequence;
    bkv_wfile *old = bkv_db_wal_active(db);
    bkv_db_unlock(db);
    bkv_memtable *fresh = bkv_mems_new_memtable(db);
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
    int rc = bkv_db_wal_append(db, end, sizeof end, 0, e);
    if (!rc && !f) rc = bkv_db_new_wal(db, path, db->opts.file_mode, &f, e);
    int retire_rc = bkv_db_retire_log(db, old, number, rc ? NULL : e);
    if (!rc) rc = retire_rc;
    if (rc && f) bkv_db_discard_wal(db, f, number);
    bkv_db_lock(db);
    if (rc) {
        bkv_db_wal_install(db, NULL);
        bkv_memtable_unref(fresh);
        return bkv_db_set_bg_error(db, rc, e);
    }
    bkv_db_wal_install(db, f);
    bkv_mems_switch(db, fresh, number);
    bkv_view_publish(db);
    bkv_sched_wake(db);
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

static void await_inserts(bkv_db *db, bkv_writer *w);

/* REQUIRES: db->mu held, by the write leader w (NULL: by a caller holding
 * writes, so no insert is in flight). */
static int make_room_for_write(bkv_db *db, bkv_writer *w, int force, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    int allow_delay = !force;
    for (;;) {
        if (db->bg_error) return bkv_db_bg_status(db, e);
        size_t used = bkv_memtable_memory(bkv_mems_active(db));
        if (force && bkv_memtable_entries(bkv_mems_active(db)) == 0) return BKV_OK;
        size_t l0 = bkv_vset_current(&db->vset)->nfiles[0];
        if (!force && allow_delay && l0 >= (size_t)db->opts.level0_slowdown_trigger) {
            slow_down(db); /* level 0 is piling up */
            allow_delay = 0;
            continue;
        }
        if (!force && l0 >= (size_t)db->opts.level0_stop_trigger) {
            BKV_COUNT(db, write_stalls, 1);
            bkv_sched_wake(db);
            bkv_db_wait(db, &db->bg_cv);
            continue;
        }
        if (!force && used < db->opts.write_buffer_size) {
            if (allow_delay && bkv_mems_immutable(db) >= max_imm(db) && used >= db->opts.write_buffer_size / 4 * 3) {
                slow_down(db); /* nearly full with no room to switch */
                allow_delay = 0;
                continue;
            }
            return BKV_OK;
        }
        if (bkv_mems_immutable(db) >= max_imm(db)) {
            BKV_COUNT(db, write_stalls, 1);
            bkv_db_wait(db, &db->bg_cv);
            continue;
        }
        if (w && db->wq.inserting_head) {
            await_inserts(db, w); /* the memtable is complete before it is frozen */
            continue;
        }
        int rc = switch_memtable(db, e);
        if (rc || force) return rc;
    }
}

/* Tells a queued writer that it is done or leads, or its group is in:
 * its own event (util/event.h), set after the state it reads is written.
 * Needs no mutex. */
static void signal_writer(bkv_writer *x) { bkv_event_set(&x->ev); }

typedef struct batch_insert {
    bkv_memtable *mem;
    uint64_t seq_delta; /* from the batch header's sequence to the one assigned */
    int concurrent;
} batch_insert;

static int insert_entry(void *arg, uint64_t seq, unsigned type, const uint8_t *key, size_t klen,
                        const uint8_t *val, size_t vlen) {
    const batch_insert *bi = arg;
    bkv_hash h = bkv_hash_bytes(key, klen);
    seq += bi->seq_delta;
    return bi->concurrent ? bkv_memtable_add_concurrent(bi->mem, seq, type, key, klen, val, vlen, h)
                          : bkv_memtable_add(bi->mem, seq, type, key, klen, val, vlen, h);
}

/* Inserts a writer's batch as sequences seq onward (its header holds
 * none: only the group's copy in the WAL is numbered). */
static int insert_batch(bkv_memtable *mem, const bkv_buf *rep, uint64_t seq, int concurrent, bkv_err *e) {
    batch_insert bi = {mem, seq - bkv_batch_sequence(rep->data), concurrent};
    return bkv_batch_iterate(rep->data, rep->len, insert_entry, &bi, "write batch", 0, e);
}

/* How many processors flushes and compactions leave the writers. With
 * one (a compaction running on 2), writers can only take turns. */
static int writer_cpus(const bkv_db *db) { return db->wq.cpus - bkv_sched_working(db); }

/* Whether the writers queued can run side by side: they are no more than
 * the processors, and more than one processor is left them. While they
 * can, a waiting writer may yield (util/event.h) and the writers of a
 * group insert side by side. Past that, a writer spinning or yielding
 * takes the processor from another writer or from the background work
 * the writes wait for, so writers sleep and a leader inserts for them. */
static int writers_fit(const bkv_db *db) {
    int queued = atomic_load_explicit(&db->wq.queued, memory_order_relaxed);
    return queued <= 1 || (queued <= db->wq.cpus && writer_cpus(db) > 1);
}

/* Waits until w is signalled (signal_writer), without the mutex.
 * REQUIRES: db->mu held; held again on return. */
static void await_signal(bkv_db *db, bkv_writer *w) {
    if (bkv_event_is_set(&w->ev)) {
        bkv_event_wait(&w->ev, 0); /* consumes it, at once */
        return;
    }
    int yield = writers_fit(db);
    bkv_db_unlock(db);
    bkv_event_wait(&w->ev, yield);
    bkv_db_lock(db);
}

/* Queues w and waits until it leads the queue (returns 1, db->mu held),
 * or a leader took its batch into a group and tells it to insert the
 * batch or that it is done (returns 0, db->mu not held: a follower has
 * no use for it, and a group's followers all woken at once would only
 * queue for it). REQUIRES: db->mu held. */
static int join_queue(bkv_db *db, bkv_writer *w, const bkv_buf *rep, int sync) {
    BKV_ASSERT_LOCKED(db);
    memset(w, 0, offsetof(bkv_writer, err));
    w->rep = rep;
    w->sync = sync;
    bkv_event_init(&w->ev);
    atomic_fetch_add_explicit(&db->wq.queued, 1, memory_order_relaxed);
    if (db->wq.tail) db->wq.tail->next = w;
    else db->wq.head = w;
    db->wq.tail = w;
    if (db->wq.head == w) return 1;
    int yield = writers_fit(db);
    bkv_db_unlock(db);
    bkv_event_wait(&w->ev, yield);
    if (w->insert || w->done) return 0;
    bkv_db_lock(db);
    return 1;
}

/* Takes w..last off the writers' queue and hands the lead to the next.
 * REQUIRES: db->mu held, by the leader w. */
static void pass_lead(bkv_db *db, const bkv_writer *last) {
    BKV_ASSERT_LOCKED(db);
    int n = 1;
    for (const bkv_writer *x = db->wq.head; x != last; x = x->next) n++;
    atomic_fetch_sub_explicit(&db->wq.queued, n, memory_order_relaxed);
    db->wq.head = last->next;
    if (!db->wq.head) db->wq.tail = NULL;
    else signal_writer(db->wq.head);
}

/* Wakes the writers x passes the outcome on to (finish_group). */
static void wake_children(bkv_writer *x) {
    bkv_writer *a = x->wake[0], *b = x->wake[1]; /* read before either may leave */
    if (a) signal_writer(a);
    if (b) signal_writer(b);
}

/* Waking a sleeping writer is a system call of a few microseconds, so a
 * group's writers wake one another: the leader w wakes two, and each
 * woken writer two more, in the order they queued (a binary tree laid
 * out breadth first), and a group of n is woken in about log2(n) steps
 * rather than n steps all taken by the leader. Sets every wake[] of
 * w..last. REQUIRES: none of w's followers woken since its last wait. */
static void plan_wakes(bkv_writer *w, const bkv_writer *last) {
    bkv_writer *child = w == last ? NULL : w->next;
    for (bkv_writer *parent = w; parent; parent = parent == last ? NULL : parent->next)
        for (int i = 0; i < 2; i++) {
            parent->wake[i] = child;
            child = child && child != last ? child->next : NULL;
        }
}

/* Hands the outcome to the writers the leader w took, through last (the
 * links among them stay as they were queued). They are off every list
 * and wait for this alone, so it needs no mutex. */
static void finish_group(bkv_writer *w, bkv_writer *last, int rc, const bkv_err *e) {
    for (bkv_writer *x = w; x != last;) {
        x = x->next;
        x->rc = rc;
        if (rc) x->err = *e;
        x->done = 1;
    }
    plan_wakes(w, last);
    wake_children(w);
}

/* Waits until every group past the WAL is in the memtable and published:
 * before the memtable is switched, and before writes are held.
 * REQUIRES: db->mu held, by the leader w. */
static void await_inserts(bkv_db *db, bkv_writer *w) {
    while (db->wq.inserting_head) {
        db->wq.drain_waiter = w;
        await_signal(db, w);
    }
}

void bkv_db_hold_writes(bkv_db *db, bkv_writer *w) {
    (void)join_queue(db, w, NULL, 0); /* a writer without a batch is never taken into a group: it leads */
    await_inserts(db, w);
}

void bkv_db_release_writes(bkv_db *db, bkv_writer *w) {
    pass_lead(db, w);
}

/* Waits until every immutable memtable is in a table: BKV_OK, or the
 * background error. REQUIRES: db->mu held (released while waiting). */
static int await_flushes(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    while ((bkv_mems_immutable(db) > 0 || bkv_sched_flushing(db)) && !db->bg_error) bkv_db_wait(db, &db->bg_cv);
    return db->bg_error ? bkv_db_bg_status(db, e) : BKV_OK;
}

int bkv_db_flush_held(bkv_db *db, bkv_err *e) {
    BKV_ASSERT_LOCKED(db);
    int rc = make_room_for_write(db, NULL, 1, e);
    return rc ? rc : await_flushes(db, e);
}

/* Makes visible, in sequence order, every group at the front of the
 * inserting list whose inserts are done, and wakes their leaders.
 * REQUIRES: db->mu held. */
static void publish_inserted(bkv_db *db, const bkv_writer *self) {
    BKV_ASSERT_LOCKED(db);
    bkv_writer *g;
    while ((g = db->wq.inserting_head) && g->inserted) {
        db->wq.inserting_head = g->next_inserting;
        if (!db->wq.inserting_head) db->wq.inserting_tail = NULL;
        atomic_fetch_sub_explicit(&db->wq.groups_inserting, 1, memory_order_release);
        /* Past a failed insert nothing is published: a reader would see
         * the sequences of a batch only partly inserted. */
        if (db->wq.insert_failed) g->publish_failed = 1;
        else atomic_store_explicit(&db->visible_sequence, g->last_seq, memory_order_release);
        g->published = 1;
        if (g != self) signal_writer(g);
    }
    if (!db->wq.inserting_head && db->wq.drain_waiter) {
        signal_writer(db->wq.drain_waiter);
        db->wq.drain_waiter = NULL;
    }
}

/* Enters the group led by w in the publishing order. REQUIRES: db->mu
 * held, by w. */
static void enter_publishing(bkv_db *db, bkv_writer *w) {
    if (db->wq.inserting_tail) db->wq.inserting_tail->next_inserting = w;
    else db->wq.inserting_head = w;
    db->wq.inserting_tail = w;
    atomic_fetch_add_explicit(&db->wq.groups_inserting, 1, memory_order_relaxed);
}

/* Enters the group w..last in the publishing order, tells followers to
 * insert their own batches, and passes the lead on. While the writers can
 * run side by side, every follower inserts its own batch, even one asleep
 * (they wake one another: plan_wakes): an insert into a large memtable
 * costs a few cache misses per level, more than a wake-up on an idle
 * processor, and a leader that inserted its sleeping followers' batches
 * made a group's inserts serial (16 writers on 16 processors wrote no
 * faster than one). Past that a woken writer only takes a processor from
 * another: the leader inserts the batches of those asleep.
 * REQUIRES: db->mu held, by the leader w. */
static void hand_out_inserts(bkv_db *db, bkv_writer *w, bkv_writer *last, bkv_memtable *mem) {
    enter_publishing(db, w);
    int every = writers_fit(db), handed = 0;
    for (bkv_writer *x = w; x != last;) {
        x = x->next;
        if (!every && bkv_event_sleeping(&x->ev)) continue;
        x->insert = 1;
        x->mem = mem;
        x->leader = w;
        handed++;
    }
    atomic_fetch_add_explicit(&w->pending, handed, memory_order_relaxed);
    if (every) {
        plan_wakes(w, last);
        wake_children(w);
    } else {
        for (bkv_writer *x = w; x != last;) {
            x = x->next;
            if (x->insert) signal_writer(x); /* spinning: no system call */
        }
    }
    pass_lead(db, last);
}

#define CONTENDED_SEQS 256

/* Inserts the group w..last, already in the WAL as sequences first..
 * last_seq, into mem and publishes it. The lead passes to the next group
 * first (unless the writers have one processor: writer_cpus), so its WAL
 * write overlaps these inserts; followers still spinning insert their own
 * batches beside the leader's (the memtable takes concurrent adds), and
 * the leader inserts those of followers asleep, as waking one costs more
 * than its insert. REQUIRES: db->mu not held; held on return. */
static int insert_group(bkv_db *db, bkv_writer *w, bkv_writer *last, bkv_memtable *mem, uint64_t first,
                        uint64_t last_seq, bkv_err *e) {
    w->last_seq = last_seq;
    w->inserted = w->published = w->publish_failed = 0;
    w->next_inserting = NULL;
    atomic_store_explicit(&w->pending, 1, memory_order_relaxed); /* the leader's own part */
    uint64_t seq = first;
    for (bkv_writer *x = w;; x = x->next) {
        x->seq = seq; /* read by a follower only once it is told to insert, under db->mu */
        seq += bkv_batch_rep_count(x->rep->data);
        if (x == last) break;
    }
    /* The lead passes early while other writers are about: one queued or
     * inserting now, or seen queued within the last CONTENDED_SEQS
     * sequences (a writer between two writes is in neither place, and
     * judged only by the instant, two writers settle into taking turns).
     * A writer alone gains nothing from it and would pay a round of the
     * mutex; it also adds without the memtable's concurrency costs, as no
     * other insert can start before it passes the lead (an earlier group
     * still inserting entered the publishing order before it passed the
     * lead here, so groups_inserting shows it). A writer arriving
     * meanwhile waits for this insert.
     * When the background leaves the writers one processor, the lead is
     * kept through the inserts too, unless a group is still inserting:
     * the leader inserts every batch of its group on the plain path, and
     * the writers, which could only take turns on that processor, do not
     * also contend for the memtable's cache lines and the mutex. */
    int queued = w != last || atomic_load_explicit(&db->wq.queued, memory_order_relaxed) > 1;
    if (queued) atomic_store_explicit(&db->wq.contended_until, last_seq + CONTENDED_SEQS, memory_order_relaxed);
    int early = atomic_load_explicit(&db->wq.groups_inserting, memory_order_acquire) > 0 ||
                ((queued || first <= atomic_load_explicit(&db->wq.contended_until, memory_order_relaxed)) &&
                 writer_cpus(db) > 1);
    if (early) {
        bkv_db_lock(db);
        hand_out_inserts(db, w, last, mem);
        bkv_db_unlock(db);
    }

    int rc = BKV_OK;
    for (bkv_writer *x = w; !rc; x = x->next) {
        if (!x->insert) rc = insert_batch(mem, x->rep, x->seq, early, e);
        if (x == last) break;
    }

    bkv_db_lock(db);
    if (!early) {
        enter_publishing(db, w); /* the leader inserted every batch itself */
        pass_lead(db, last);
    }
    if (atomic_fetch_sub_explicit(&w->pending, 1, memory_order_acq_rel) != 1) await_signal(db, w);
    if (early) bkv_memtable_count_added(mem, last_seq - first + 1); /* concurrent adds leave it to us */
    for (bkv_writer *x = w; !rc && x != last;) {
        x = x->next;
        if (x->insert && x->insert_rc) {
            rc = x->insert_rc;
            *e = x->insert_err;
        }
    }
    if (rc) {
        db->wq.insert_failed = 1;
        bkv_db_set_bg_error(db, rc, e); /* the WAL has the group, but reads would not */
    }
    w->inserted = 1;
    publish_inserted(db, w);
    while (!w->published) await_signal(db, w);
    if (!rc && w->publish_failed) rc = bkv_db_bg_status(db, e);
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
    if (!join_queue(db, &w, rep, wo && wo->sync)) {
        if (w.insert) {
            /* Told to insert its own batch: it first wakes the next
             * writers of the group, then inserts beside them. The leader
             * waits for every insert, then tells each writer of the group
             * its outcome. */
            wake_children(&w);
            w.insert_rc = insert_batch(w.mem, rep, w.seq, 1, &w.insert_err);
            if (atomic_fetch_sub_explicit(&w.leader->pending, 1, memory_order_acq_rel) == 1) signal_writer(w.leader);
            /* Exactly one signal comes: done. Every signal must be waited
             * for, never inferred from the state it publishes, or it would
             * land on this stack frame's next use. */
            bkv_event_wait(&w.ev, writers_fit(db));
        }
        wake_children(&w);
        return bkv_db_error(db, w.rc, &w.err);
    }

    /* Leader. */
    bkv_err e;
    bkv_err_clear(&e);
    int rc = make_room_for_write(db, &w, rep == NULL, &e);
    bkv_writer *last = &w;
    if (rc == BKV_OK && rep) {
        bkv_buf *g = &db->wq.group;
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
            bkv_memtable *mem = bkv_mems_active(db);
            bkv_db_unlock(db);

            rc = bkv_db_mark_log(db, sync, first - 1, &e);
            /* Unsynced writes still reach the OS before returning, so they
             * survive a crash of this process. */
            if (!rc) rc = bkv_db_wal_append(db, g->data, g->len, sync, &e);
            BKV_COUNT(db, bytes_written, g->len);
            BKV_COUNT(db, writes, count);
            if (sync) BKV_COUNT(db, syncs, 1);
            if (!rc) {
                rc = insert_group(db, &w, last, mem, first, first + count - 1, &e);
                /* Written only when the coarse clock moved: every writer
                 * would otherwise take the line from the others. */
                uint64_t now = bkv_coarse_nanos();
                if (atomic_load_explicit(&db->last_write_nanos, memory_order_relaxed) != now)
                    atomic_store_explicit(&db->last_write_nanos, now, memory_order_relaxed);
                bkv_db_unlock(db);
                finish_group(&w, last, rc, &e);
                return bkv_db_error(db, rc, &e);
            }
            bkv_db_lock(db);
            bkv_db_set_bg_error(db, rc, &e);
        }
    }

    pass_lead(db, last);
    bkv_db_unlock(db);
    finish_group(&w, last, rc, &e);
    return bkv_db_error(db, rc, &e);
}

int bkv_write(bkv_db *db, const bkv_write_options *wo, const bkv_batch *batch) {
    if (!db || !batch) return bkv_db_arg_error(db, "bkv_write");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_write");
    if (bkv_batch_count(batch) == 0) return BKV_OK;
    return write_internal(db, wo, &batch->rep);
}

static int write_one(bkv_db *db, const bkv_write_options *wo, unsigned type, const void *key, size_t klen,
                     const void *val, size_t vlen) {
    if (!db) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"write: NULL database handle"});
    if (db->opts.read_only) return bkv_db_read_only_error(db, type == BKV_TYPE_VALUE ? "bkv_put" : "bkv_delete");
    bkv_batch b;
    uint8_t mem[512];
    bkv_buf_init_with(&b.rep, mem, sizeof mem);
    uint8_t h[BKV_BATCH_HEADER] = {0};
    (void)!bkv_buf_append(&b.rep, h, sizeof h); /* fits in mem */
    bkv_err e;
    int rc = bkv_batch_add(&b, type, key, klen, val, vlen, &e);
    rc = rc ? bkv_db_error(db, rc, &e) : write_internal(db, wo, &b.rep);
    bkv_buf_free(&b.rep);
    return rc;
}

int bkv_put(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen, const void *val, size_t vlen) {
    return write_one(db, wo, BKV_TYPE_VALUE, key, klen, val, vlen);
}

int bkv_delete(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen) {
    return write_one(db, wo, BKV_TYPE_DELETION, key, klen, NULL, 0);
}

/* Whether table f lies wholly inside t's range. */
static int table_inside(const bkv_file_meta *f, const bkv_range_tombstone *t) {
    return bkv_user_key_compare(f->smallest, f->smallest_len - BKV_IKEY_TRAILER, t->begin, t->begin_len) >= 0 &&
           (t->unbounded ||
            bkv_user_key_compare(f->largest, f->largest_len - BKV_IKEY_TRAILER, t->end, t->end_len) < 0);
}

int bkv_delete_range(bkv_db *db, const bkv_write_options *wo, const void *begin, size_t blen, const void *end,
                     size_t elen) {
    (void)wo; /* a manifest record is synced whatever wo says */
    bkv_err e;
    bkv_err_clear(&e);
    if (!db || (!begin && blen) || (!end && elen)) return bkv_db_arg_error(db, "bkv_delete_range");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_delete_range");
    if (blen > BKV_MAX_KEY_SIZE || elen > BKV_MAX_KEY_SIZE)
        return bkv_db_error(db, bkv_fail(&e, BKV_INVALID, "bkv_delete_range: a key over %u bytes",
                                         (unsigned)BKV_MAX_KEY_SIZE), &e);
    if (!begin) begin = "";
    if (end && bkv_user_key_compare(begin, blen, end, elen) >= 0) return BKV_OK; /* an empty range */
    bkv_writer w;
    bkv_db_lock(db);
    bkv_db_hold_writes(db, &w); /* no group in flight: the deletion's sequence follows every write before it */
    int rc = db->bg_error ? bkv_db_bg_status(db, &e) : BKV_OK;
    if (!rc && db->last_sequence >= BKV_MAX_SEQ) rc = bkv_fail(&e, BKV_INVALID, "sequence numbers exhausted");
    uint64_t seq = db->last_sequence + 1;
    bkv_range_tombstone *t = rc ? NULL : bkv_range_tombstone_new(begin, blen, end, elen, seq, bkv_mems_active_log(db));
    if (!rc && !t) rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
    bkv_version_edit edit;
    bkv_edit_init(&edit);
    if (!rc && bkv_edit_add_tombstone(&edit, t)) rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
    /* Tables all of whose entries it covers go now, unless a snapshot may
     * still read them (or a compaction is rewriting them). */
    int snapshots = db->snapshots.next != &db->snapshots;
    const bkv_tree_version *v = bkv_vset_current(&db->vset);
    for (int l = 0; !rc && !snapshots && l < BKV_MAX_LEVELS; l++)
        for (size_t i = 0; !rc && i < v->nfiles[l]; i++) {
            const bkv_file_meta *f = v->files[l][i];
            if (!f->being_compacted && table_inside(f, t) && bkv_edit_delete_file(&edit, l, f->number))
                rc = bkv_fail(&e, BKV_NOMEM, "out of memory");
        }
    if (!rc) {
        db->last_sequence = seq; /* written to the manifest with the edit */
        rc = bkv_db_commit_edit(db, &edit, 0, &e);
        if (!rc) atomic_store_explicit(&db->visible_sequence, seq, memory_order_release);
    }
    /* The value index lets the dropped tables go on the background thread
     * (clearing a bit-sliced index's columns took a FLUSHALL of 2 M rows
     * most of its time); a search skips them meanwhile. */
    if (!rc && bkv_db_has_value_index(db) && edit.ndeleted) bkv_db_value_leave_later(db, &edit);
    bkv_edit_free(&edit);
    bkv_range_tombstone_unref(t);
    bkv_sched_wake(db); /* tables it dropped may change what is due */
    bkv_db_release_writes(db, &w);
    bkv_db_unlock(db);
    return bkv_db_error(db, rc, &e);
}

int bkv_flush(bkv_db *db) {
    if (!db) return bkv_db_arg_error(db, "bkv_flush");
    if (db->opts.read_only) return bkv_db_read_only_error(db, "bkv_flush");
    int rc = write_internal(db, NULL, NULL);
    if (rc) return rc;
    bkv_db_lock(db);
    bkv_err e;
    bkv_err_clear(&e);
    rc = await_flushes(db, &e);
    bkv_db_unlock(db);
    return bkv_db_error(db, rc, &e);
}

void bkv_write_queue_init(bkv_write_queue *wq) {
    /* The processors the opening thread may run on (threads started later
     * inherit its set), not those online: a server pinned to 2 of 16
     * processors has 2. */
    long cpus = 0;
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
#endif
    if (cpus <= 0) cpus = sysconf(_SC_NPROCESSORS_ONLN);
    wq->cpus = cpus > 0 ? (int)cpus : 1;
    bkv_buf_init(&wq->group);
}

void bkv_write_queue_free(bkv_write_queue *wq) { bkv_buf_free(&wq->group); }
