/*
 * What a get reads, without the db mutex: the memtables and the version,
 * published as one immutable "read view" whenever any of them changes
 * (RocksDB calls it a super version), and reclaimed with a sleepable
 * read-copy-update scheme.
 *
 * A get enters a read section (one atomic add on a counter of its own
 * stripe, a cache line no other thread writes), loads the published view
 * and uses it without taking references, then leaves. Publishing swaps the
 * pointer under the db mutex and hands the old view to the background
 * threads, which wait for a grace period (every read section that could
 * have loaded it has ended: the epoch is flipped twice, each time waiting
 * for the readers counted under the previous parity) and only then drop
 * its references. Before this, every get took the db mutex and bumped
 * shared reference counts, and a second reading thread made both slower.
 *
 * Iterators and searches by value, which hold their state for long, keep
 * taking references under the mutex (bkv_read_state_acquire).
 */
#ifndef BKV_DB_READ_VIEW_H
#define BKV_DB_READ_VIEW_H

#include "db/db_int.h"

/* Publishes the current memtables and version as the view gets read,
 * retiring the old one. REQUIRES: db->mu held. Out of memory, no view is
 * published and gets take the mutex until the next publish succeeds. */
void bkv_view_publish(bkv_db *db);

/* A get's read section: *rs is the published view (no references taken)
 * with the read snapshot, or filled by bkv_read_state_acquire when no view
 * is published (then with references). Leave with bkv_view_leave. */
typedef struct bkv_view_section {
    unsigned stripe, parity;
    int referenced; /* rs holds references (the slow path) */
} bkv_view_section;
void bkv_view_enter(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs, bkv_view_section *sec);
void bkv_view_leave(bkv_db *db, bkv_read_state *rs, const bkv_view_section *sec);

/* Frees retired views once no read section can still use them. Called by a
 * background thread without db->mu; returns whether there was any. */
int bkv_view_reclaim(bkv_db *db);
/* At close, with no reader left: frees every view, published or retired. */
void bkv_view_free_all(bkv_db *db);

/* The part's life: init at open; destroy (every view freed) at close.
 * retired: whether views wait for reclaiming (REQUIRES: db->mu held).
 * Around fork: the grace mutex held across it, made anew in the child
 * (bkv_fork_*, which takes it before every other lock). */
void bkv_views_init(bkv_db *db);
void bkv_views_destroy(bkv_db *db);
int bkv_views_retired(const bkv_db *db);
void bkv_views_fork_prepare(bkv_db *db);
void bkv_views_fork_parent(bkv_db *db);
void bkv_views_fork_child(bkv_db *db);

#endif
