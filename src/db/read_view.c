#include "db/read_view.h"

#include <sched.h>
#include <stdlib.h>

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
    bkv_read_view *v = db->mem ? malloc(sizeof *v) : NULL;
    if (v) bkv_read_state_acquire_locked(db, NULL, &v->state);
    bkv_read_view *old = atomic_exchange(&db->view, v);
    if (old) {
        old->next_retired = db->retired_views;
        db->retired_views = old;
        pthread_cond_broadcast(&db->work_cv); /* a background thread reclaims it */
    }
}

void bkv_view_enter(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs, bkv_view_section *sec) {
    sec->stripe = bkv_stripe_index();
    sec->parity = atomic_load(&db->view_epoch) & 1;
    atomic_fetch_add(&db->view_readers[sec->stripe].n[sec->parity], 1);
    bkv_read_view *v = atomic_load(&db->view);
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
    atomic_fetch_sub_explicit(&db->view_readers[sec->stripe].n[sec->parity], 1, memory_order_release);
}

static void wait_for_parity(bkv_db *db, unsigned parity) {
    for (;;) {
        long active = 0;
        for (int s = 0; s < BKV_STRIPES; s++) active += atomic_load(&db->view_readers[s].n[parity]);
        if (active == 0) return;
        sched_yield();
    }
}

/* A reader counted under either parity may hold a retired view (it read
 * the epoch before a flip and the view after), so both must drain: flip,
 * wait for the old parity, flip again, wait for the other. Readers that
 * start after a flip count under the new parity and load the new view. */
static void grace_period(bkv_db *db) {
    unsigned e = atomic_load(&db->view_epoch);
    atomic_store(&db->view_epoch, e + 1);
    wait_for_parity(db, e & 1);
    atomic_store(&db->view_epoch, e + 2);
    wait_for_parity(db, (e + 1) & 1);
}

int bkv_view_reclaim(bkv_db *db) {
    pthread_mutex_lock(&db->grace_mu); /* one grace period at a time: they flip the same epoch */
    bkv_db_lock(db);
    bkv_read_view *list = db->retired_views;
    db->retired_views = NULL;
    bkv_db_unlock(db);
    int had = list != NULL;
    if (had) grace_period(db);
    pthread_mutex_unlock(&db->grace_mu);
    while (list) {
        bkv_read_view *next = list->next_retired;
        view_free(list);
        list = next;
    }
    return had;
}

void bkv_view_free_all(bkv_db *db) {
    bkv_read_view *v = atomic_exchange(&db->view, NULL);
    if (v) view_free(v);
    while (db->retired_views) {
        bkv_read_view *next = db->retired_views->next_retired;
        view_free(db->retired_views);
        db->retired_views = next;
    }
}
