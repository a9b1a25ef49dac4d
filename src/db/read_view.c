#include "db/read_view.h"

#include <sched.h>
#include <stdlib.h>

#include "db/memtables.h"
#include "db/scheduler.h"

struct bkv_read_view {
    bkv_read_state state; /* with references; its snapshot is not used */
    struct bkv_read_view *next_retired;
};

static void view_free(bkv_read_view *v) {
    bkv_read_state_release(&v->state);
    free(v);
}

void bkv_view_publish(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    bkv_read_view *v = bkv_mems_active(db) ? malloc(sizeof *v) : NULL;
    if (v) bkv_read_state_acquire_locked(db, NULL, &v->state);
    bkv_read_view *old = atomic_exchange(&db->views.published, v);
    if (old) {
        old->next_retired = db->views.retired;
        db->views.retired = old;
        bkv_sched_wake(db); /* a background thread reclaims it */
    }
}

void bkv_view_enter(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs, bkv_view_section *sec) {
    sec->stripe = bkv_stripe_index();
    sec->parity = atomic_load(&db->views.epoch) & 1;
    atomic_fetch_add(&db->views.readers[sec->stripe].n[sec->parity], 1);
    bkv_read_view *v = atomic_load(&db->views.published);
    sec->referenced = v == NULL;
    if (!v) {
        bkv_read_state_acquire(db, ro, rs);
        return;
    }
    *rs = v->state;
    rs->snapshot = ro && ro->snapshot ? ro->snapshot->seq
                                      : atomic_load_explicit(&db->visible_sequence, memory_order_acquire);
}

void bkv_view_leave(bkv_db *db, bkv_read_state *rs, const bkv_view_section *sec) {
    if (sec->referenced) bkv_read_state_release(rs);
    atomic_fetch_sub_explicit(&db->views.readers[sec->stripe].n[sec->parity], 1, memory_order_release);
}

static void wait_for_parity(bkv_db *db, unsigned parity) {
    for (;;) {
        long active = 0;
        for (int s = 0; s < BKV_STRIPES; s++) active += atomic_load(&db->views.readers[s].n[parity]);
        if (active == 0) return;
        sched_yield();
    }
}

/* A reader counted under either parity may hold a retired view (it read
 * the epoch before a flip and the view after), so both must drain: flip,
 * wait for the old parity, flip again, wait for the other. Readers that
 * start after a flip count under the new parity and load the new view. */
static void grace_period(bkv_db *db) {
    unsigned e = atomic_load(&db->views.epoch);
    atomic_store(&db->views.epoch, e + 1);
    wait_for_parity(db, e & 1);
    atomic_store(&db->views.epoch, e + 2);
    wait_for_parity(db, (e + 1) & 1);
}

int bkv_view_reclaim(bkv_db *db) {
    pthread_mutex_lock(&db->views.grace_mu); /* one grace period at a time: they flip the same epoch */
    bkv_db_lock(db);
    bkv_read_view *list = db->views.retired;
    db->views.retired = NULL;
    bkv_db_unlock(db);
    int had = list != NULL;
    if (had) grace_period(db);
    pthread_mutex_unlock(&db->views.grace_mu);
    while (list) {
        bkv_read_view *next = list->next_retired;
        view_free(list);
        list = next;
    }
    return had;
}

void bkv_view_free_all(bkv_db *db) {
    bkv_read_view *v = atomic_exchange(&db->views.published, NULL);
    if (v) view_free(v);
    while (db->views.retired) {
        bkv_read_view *next = db->views.retired->next_retired;
        view_free(db->views.retired);
        db->views.retired = next;
    }
}

void bkv_views_init(bkv_db *db) { pthread_mutex_init(&db->views.grace_mu, NULL); }

void bkv_views_destroy(bkv_db *db) {
    bkv_view_free_all(db);
    pthread_mutex_destroy(&db->views.grace_mu);
}

int bkv_views_retired(const bkv_db *db) { return db->views.retired != NULL; }

void bkv_views_fork_prepare(bkv_db *db) { pthread_mutex_lock(&db->views.grace_mu); }
void bkv_views_fork_parent(bkv_db *db) { pthread_mutex_unlock(&db->views.grace_mu); }
void bkv_views_fork_child(bkv_db *db) { pthread_mutex_init(&db->views.grace_mu, NULL); }

void bkv_read_state_acquire(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs) {
    bkv_db_lock(db);
    bkv_read_state_acquire_locked(db, ro, rs);
    bkv_db_unlock(db);
}

void bkv_read_state_acquire_locked(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs) {
    BKV_ASSERT_LOCKED(db);
    rs->mem = bkv_mems_active(db);
    bkv_memtable_ref(rs->mem);
    rs->nimm = bkv_mems_ref_immutable(db, rs->imm);
    rs->version = bkv_vset_current(&db->vset);
    atomic_fetch_add_explicit(&rs->version->refs, 1, memory_order_relaxed);
    rs->snapshot = ro && ro->snapshot ? ro->snapshot->seq
                                      : atomic_load_explicit(&db->visible_sequence, memory_order_acquire);
}

void bkv_read_state_release(bkv_read_state *rs) {
    bkv_memtable_unref(rs->mem);
    for (int i = 0; i < rs->nimm; i++) bkv_memtable_unref(rs->imm[i]);
    bkv_tree_version_unref(rs->version);
}

uint64_t bkv_db_oldest_snapshot(bkv_db *db) {
    BKV_ASSERT_LOCKED(db);
    /* Without snapshots, what reads see now: a sequence handed out but not
     * yet visible (a range deletion or ingest whose edit is being logged)
     * is not yet known to every reader. */
    return db->snapshots.next != &db->snapshots ? db->snapshots.next->seq
                                                : atomic_load_explicit(&db->visible_sequence, memory_order_acquire);
}
