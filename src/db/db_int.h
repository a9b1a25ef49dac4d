/* The database object's internals, shared by the db module's files and by
 * white-box tests. */
#ifndef BKV_DB_INT_H
#define BKV_DB_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bloomkv.h"
#include "db/version.h"
#include "util/clock.h"
#include "memtable/memtable.h"
#include "table/cache.h"
#include "table/table.h"
#include "util/env.h"
#include "util/event.h"
#include "valuesearch/vindex.h"
#include "log/log.h"
#include "db/log_sync.h"
#include "db/version_set.h"

#include "util/check.h"

#define BKV_MAX_BACKGROUND_JOBS 16
#define BKV_MAX_SUBCOMPACTIONS 8
#define BKV_DEFAULT_SUBCOMPACTIONS 2
#define BKV_DEFAULT_VALUE_SUMMARY_BITS 7

/* A caller waiting in, or leading, the write queue (db_write.c). */
typedef struct bkv_writer bkv_writer;
struct bkv_writer {
    const bkv_buf *rep;        /* NULL: a flush request, or a caller holding writes back */
    int sync;
    int done;                      /* rc and err hold its outcome (written before ev is set) */
    int rc;
    bkv_event ev;                  /* done, leading, told to insert, or (a leader) its group inserted */
    bkv_writer *wake[2];           /* once done: the writers of its group it wakes next (finish_group) */
    bkv_writer *next;
    /* Every writer of a group gets its first sequence (seq) from the
     * leader; a follower told to insert its own batch, after the WAL
     * write, beside the leader's, inserts into mem (set under db->mu),
     * and insert_rc and insert_err are the outcome. */
    int insert;
    bkv_memtable *mem;
    uint64_t seq;
    bkv_writer *leader;
    int insert_rc;
    /* A leader whose group is in the WAL and going into the memtable:
     * pending counts the inserts not finished (its own part included);
     * last_seq is what becomes visible once this group and every group
     * before it are in (the db's inserting list, under db->mu). */
    atomic_int pending;
    uint64_t last_seq;
    int inserted, published, publish_failed;
    bkv_writer *next_inserting;
    /* Last: each is written only with a failure (rc, insert_rc) and read
     * only after one, so joining the queue clears the fields before them
     * alone, not these 640 bytes a write. */
    bkv_err err;
    bkv_err insert_err;
};
typedef struct bkv_read_view bkv_read_view;

struct bkv_snapshot {
    uint64_t seq;
    const bkv_db *db;          /* the database it belongs to: a foreign snapshot is refused */
    bkv_snapshot *prev, *next; /* the db's list, oldest first */
};

/* Counters behind "bloomkv.counter.<name>"; relaxed atomics. */
typedef struct bkv_db_counters {
    atomic_uint_fast64_t gets, key_hashes, filter_probes, filter_negatives, filter_false_positives,
        memtable_filter_negatives, bytes_written, writes, syncs, flushes, write_stalls, write_slowdowns,
        tables_consulted, flush_bytes_written, compactions, trivial_moves, summary_rewrites, compaction_bytes_read,
        compaction_bytes_written, value_searches, value_index_updates, value_index_nodes_recomputed,
        value_index_update_micros, value_index_locked_micros, value_filters_unusable, value_candidates_proven,
        seek_compactions, subcompactions, range_filter_probes, range_filter_negatives;
} bkv_db_counters;


/* Counters every read bumps live in stripes a cache line apart (or more),
 * each thread writing its own: two threads reading never write the same
 * line, which with one shared set cost more than the reads themselves.
 * A counter's value is the sum of its stripes. */
#define BKV_STRIPES 64
typedef struct bkv_counter_stripe {
    _Alignas(64) bkv_db_counters c;
    bkv_table_stats t;
} bkv_counter_stripe;

/* Read sections under way per stripe and epoch parity (read_view.c). */
typedef struct bkv_view_stripe {
    _Alignas(64) atomic_long n[2];
} bkv_view_stripe;

/* The write queue: an owned part whose fields only db_write.c touches
 * (under mu unless noted). */
typedef struct bkv_write_queue {
    bkv_writer *head, *tail;       /* writers waiting, the leader first */
    atomic_int queued;             /* in that queue (changed under mu, read without it) */
    int cpus;                      /* processors the database may use, seen at open (db_write.c) */
    atomic_uint_fast64_t contended_until; /* groups pass the lead early up to this sequence */
    bkv_buf group;                 /* the leader's group batch */
    /* Groups past the WAL whose inserts run while the next group writes
     * the WAL, oldest first: they are published in this order. */
    bkv_writer *inserting_head, *inserting_tail;
    atomic_int groups_inserting;   /* in that list (changed under mu, read without it) */
    bkv_writer *drain_waiter;      /* a leader waiting for inserting to empty */
    int insert_failed;             /* sticky: a memtable insert failed, so nothing later is published */
} bkv_write_queue;
/* At open and close (db_write.c). */
void bkv_write_queue_init(bkv_write_queue *wq);
void bkv_write_queue_free(bkv_write_queue *wq);

/* The read views (read_view.h): an owned part whose fields only
 * read_view.c touches. */
typedef struct bkv_read_views {
    _Atomic(bkv_read_view *) published; /* what gets read: published under mu, read without it */
    bkv_read_view *retired;             /* under mu: published before, freed after a grace period */
    atomic_uint epoch;
    pthread_mutex_t grace_mu;           /* one grace period at a time */
    bkv_view_stripe readers[BKV_STRIPES];
} bkv_read_views;

/* The calling thread's stripe. Threads are numbered in the order they
 * first ask, so up to BKV_STRIPES threads started together (a server's
 * pool) each get a stripe of their own; a hash of a thread-local's
 * address, used before, put two of 16 threads on one stripe about as
 * often as not. */
extern _Thread_local unsigned bkv_stripe_plus_one; /* db_stats.c; 0: none yet */
unsigned bkv_stripe_assign(void);
static inline unsigned bkv_stripe_index(void) {
    unsigned s = bkv_stripe_plus_one;
    return __builtin_expect(s != 0, 1) ? s - 1 : bkv_stripe_assign();
}

/* The memtables (memtables.h): an owned part whose fields only
 * memtables.c and its header touch. Under mu. */
typedef struct bkv_memtables {
    bkv_memtable *active;           /* written by the write leader only */
    uint64_t active_log;            /* the WAL holding its entries */
    bkv_memtable *imm[BKV_MAX_IMM]; /* immutable memtables, oldest first */
    uint64_t imm_log[BKV_MAX_IMM];
    int nimm;
    bkv_arena_pool *arena_pool;     /* freed memtables' arena blocks, for the next ones */
} bkv_memtables;

/* The value index's state: an owned part whose fields only value_index.c
 * touches. The index (NULL when there is none) covers every table of the
 * current version (see bkv_db_value_index_add). An update (flush or
 * compaction) holds update_mu throughout, and the index takes lock for
 * writing only to publish (never with mu held); a search takes it for
 * reading before mu. */
typedef struct bkv_value_state {
    int has_rec;                   /* the database has a value index */
    bkv_value_index_rec rec;       /* its parameters (manifest tag 6) */
    bkv_vf_params params;
    bkv_vindex *index;
    pthread_rwlock_t lock;
    pthread_mutex_t update_mu;
    void *terms_arg;               /* a built-in terms extractor's argument, or NULL */
    uint64_t *leaving;             /* under mu: tables a range deletion dropped, for the background thread */
    size_t nleaving, cap_leaving;  /* to take out of the index */
} bkv_value_state;

/* The background scheduler (scheduler.h): an owned part whose fields
 * only scheduler.c and background.c touch. */
typedef struct bkv_scheduler {
    pthread_cond_t work_cv;        /* wakes the background threads */
    pthread_t threads[BKV_MAX_BACKGROUND_JOBS];
    int nthreads;                  /* started */
    int next_index;                /* under mu: each thread's index, taken as it starts */
    atomic_int shutting_down;      /* set under mu; compactions poll it without */
    int flushing;                  /* under mu: a flush is in progress */
    int compactions;               /* under mu: compactions the background threads are running */
    int held;                      /* under mu: compactions kept off (an ingest placing tables, or a
                                    * compaction a caller runs itself) */
    atomic_int working;            /* background threads at a flush or compaction, helpers included */
} bkv_scheduler;

struct bkv_db {
    char *path;
    const bkv_env *env;
    bkv_options opts;
    void *lock;                    /* the LOCK file */

    pthread_mutex_t mu;            /* guards everything below unless noted; take it with bkv_db_lock */
    atomic_uintptr_t mu_owner;     /* debug builds: the thread holding mu (a thread token), else 0 */
    pthread_cond_t bg_cv;          /* background progress (waited on by stalled writers, flush, close) */
    bkv_scheduler sched;           /* the background threads and what they run (scheduler.h) */
    int ingesting_unsequenced;     /* an ingest at sequence 0 is installing: snapshots wait */
    bkv_buf compact_pointer[BKV_MAX_LEVELS]; /* leveled: where the next compaction of a level starts */
    bkv_level_options level_options[BKV_MAX_LEVELS]; /* opts.level_options points here (db_open.c) */
    bkv_file_owner owner;          /* deletes tables compactions made obsolete */

    bkv_memtables mems;            /* the active and immutable memtables (memtables.h) */

    bkv_wal_set wals;              /* the active WAL and those behind it (log_sync.h) */
    bkv_write_queue wq;            /* writers waiting, the group being written, groups inserting (db_write.c) */

    bkv_version_set vset;          /* current version, file numbers, manifest (version_set.h) */
    uint64_t last_sequence;        /* assigned to writes */
    atomic_uint_fast64_t visible_sequence; /* inserted into the memtable; what reads see */
    atomic_uint_fast64_t last_write_nanos; /* when a write group last went in (bkv_db_charge_seeks) */

    int bg_error;                  /* sticky: writes fail once a WAL/manifest/flush write failed */
    char bg_msg[BKV_ERR_LEN];

    atomic_int pinned_tables;      /* tables pinned in their file metadata (at most max_open_files) */
    bkv_read_views views;          /* what gets read without the mutex (read_view.h) */
    bkv_cache *block_cache;        /* may be NULL */
    bkv_cache *table_cache;        /* open tables, charge 1 each */
    bkv_counter_stripe stripes[BKV_STRIPES]; /* bkv_db is allocated 64-byte aligned for them */

    bkv_snapshot snapshots;        /* sentinel of the live snapshot list */
    atomic_int live_iters;         /* iterators and value searches not yet destroyed: bkv_close refuses */
    struct bkv_db *next_open;      /* the registry of open handles (db_open.c) */

    bkv_value_state values;        /* the value index and its parameters (value_index.c) */
    struct bkv_repair_state *repair; /* only in bkv_repair's open: what it salvages (repair.h) */
    pthread_mutex_t catch_up_mu;   /* one bkv_try_catch_up at a time (read-only handles) */
};

#define BKV_COUNT(db, name, n) \
    atomic_fetch_add_explicit(&(db)->stripes[bkv_stripe_index()].c.name, (n), memory_order_relaxed)
/* The table counters this thread bumps. */
static inline bkv_table_stats *bkv_db_tstats(bkv_db *db) { return &db->stripes[bkv_stripe_index()].t; }

/* The db mutex, and the check that a function's caller holds it (the
 * REQUIRES: db->mu of its comment), in debug builds: the owner is recorded
 * on every lock, wait and unlock. Release builds pay nothing. */
#ifdef BKV_CHECK_INVARIANTS
uintptr_t bkv_thread_token(void);
#define BKV_NOTE_OWNER(db, t) atomic_store_explicit(&(db)->mu_owner, (t), memory_order_relaxed)
#else
#define BKV_NOTE_OWNER(db, t) ((void)0)
#endif
#define BKV_ASSERT_LOCKED(db) \
    BKV_ASSERT(atomic_load_explicit(&(db)->mu_owner, memory_order_relaxed) == bkv_thread_token())
#define BKV_ASSERT_UNLOCKED(db) \
    BKV_ASSERT(atomic_load_explicit(&(db)->mu_owner, memory_order_relaxed) != bkv_thread_token())

static inline void bkv_db_lock(bkv_db *db) {
    pthread_mutex_lock(&db->mu);
    BKV_NOTE_OWNER(db, bkv_thread_token());
}
static inline void bkv_db_unlock(bkv_db *db) {
    BKV_NOTE_OWNER(db, 0);
    pthread_mutex_unlock(&db->mu);
}
static inline void bkv_db_wait(bkv_db *db, pthread_cond_t *cv) {
    BKV_NOTE_OWNER(db, 0);
    pthread_cond_wait(cv, &db->mu);
    BKV_NOTE_OWNER(db, bkv_thread_token());
}

/* What a read holds on to while it works without the mutex. */
typedef struct bkv_read_state {
    bkv_memtable *mem;
    bkv_memtable *imm[BKV_MAX_IMM]; /* oldest first */
    int nimm;
    bkv_tree_version *version;
    uint64_t snapshot;
} bkv_read_state;

/* Takes references to the memtables and current version, and fixes the
 * sequence to read at (ro's snapshot, or everything written so far). */
void bkv_read_state_acquire(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs);
/* The same with db->mu already held. */
void bkv_read_state_acquire_locked(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs);
void bkv_read_state_release(bkv_read_state *rs);
/* An iterator reading at rs, which it takes over (released with the
 * iterator, or at once when creation fails). */
int bkv_iter_create_at(bkv_db *db, const bkv_read_options *ro, bkv_read_state *rs, bkv_iter **out);
/* The open table for f through the table cache (release the entry with
 * bkv_cache_release(db->table_cache, ...)). */
int bkv_db_get_table(bkv_db *db, const bkv_file_meta *f, bkv_cache_entry **entry, bkv_err *e);
/* Opens a table just written, as LevelDB does after a flush or
 * compaction: a table that cannot be read back never replaces what it was
 * written from, and the thread that wrote it reads its index and filters,
 * not the first get or range read that needs it. BKV_OK without a table
 * cache (a scratch database). */
int bkv_db_open_new_table(bkv_db *db, const bkv_file_meta *f, bkv_err *e);

/* A point read at rs (its memtables, version and snapshot): BKV_OK with a
 * malloc'd *val, BKV_NOTFOUND, or an error described in e. */
int bkv_db_get_at(bkv_db *db, const bkv_read_options *ro, const bkv_read_state *rs, const void *key, size_t klen,
                  void **val, size_t *vlen, bkv_err *e);

/* bkv_db_get_at over the sources newer than table stop_file only (file
 * numbers start at 1; 0 reads them all). *reached is set to 1, with
 * BKV_NOTFOUND, when none of them holds a version of the key the snapshot
 * sees, so that the newest one is in stop_file or older. */
int bkv_db_get_before(bkv_db *db, const bkv_read_options *ro, const bkv_read_state *rs, const void *key, size_t klen,
                      uint64_t stop_file, int *reached, void **val, size_t *vlen, bkv_err *e);

/* Value index (value_index.c). setup fixes the parameters (after the manifest
 * is read, before any table is written); open builds the index over the
 * current tables. A flush or compaction calls add before it installs its
 * edit and finish after (installed or not). REQUIRES: db->mu not held. */
int bkv_db_value_index_setup(bkv_db *db, bkv_err *e);
/* The value filter parameters o asks for, for an index whose terms come
 * from the extractor recorded as terms_name ("" or NULL: whole values);
 * 0 when o asks for no value index. */
int bkv_value_params(const bkv_options *o, const char *terms_name, bkv_vf_params *out);
int bkv_db_value_index_open(bkv_db *db, bkv_err *e);
void bkv_db_value_index_add(bkv_db *db, const bkv_version_edit *edit);
void bkv_db_value_index_finish(bkv_db *db, const bkv_version_edit *edit, int installed);
/* Takes tables no version holds any longer out of the value index (a
 * search skips them meanwhile): the background thread's share of a range
 * deletion, whose caller does not wait for it. Without db->mu. */
void bkv_db_value_index_forget(bkv_db *db, const uint64_t *numbers, size_t n);
/* At open and close (and around fork: its locks, after the WAL set's and
 * before the db mutex). */
void bkv_db_value_state_init(bkv_db *db);
void bkv_db_value_state_free(bkv_db *db);
void bkv_db_value_fork_prepare(bkv_db *db);
void bkv_db_value_fork_parent(bkv_db *db);
void bkv_db_value_fork_child(bkv_db *db);
/* The database's value index record and filter parameters, fixed at
 * open; NULL when it has no value index. No lock needed after open. */
const bkv_value_index_rec *bkv_db_value_rec(const bkv_db *db);
const bkv_vf_params *bkv_db_value_params(const bkv_db *db);
/* A manifest being read names the database's value index (recovery). */
void bkv_db_value_rec_recovered(bkv_db *db, const bkv_value_index_rec *rec);
/* A catch-up's scratch handle reads the WALs as db does: db's filter
 * parameters; and whether its manifest's value index is db's. */
void bkv_db_value_copy_params(bkv_db *to, const bkv_db *from);
int bkv_db_value_same_index(const bkv_db *a, const bkv_db *b);
/* Whether an index is kept (not only a record of one); and its
 * description, 0 when there is none. */
int bkv_db_has_value_index(const bkv_db *db);
int bkv_db_value_index_info(bkv_db *db, bkv_vindex_info *in);
/* Hands the tables edit deleted to the background thread, to take out of
 * the index; out of memory, takes them out now. REQUIRES: db->mu. */
void bkv_db_value_leave_later(bkv_db *db, const bkv_version_edit *edit);
/* The background thread's share: 1 if it took tables out of the index
 * (db->mu released meanwhile), 0 when none were waiting. REQUIRES: db->mu. */
int bkv_db_value_forget_leaving(bkv_db *db);
/* A search of an in-memory index: the read lock first (the version it
 * then picks has all its tables in the index until the probe is done),
 * whether the index is broken (out of memory in an update: every table is
 * then a candidate), and the probe. */
void bkv_db_value_index_read_lock(bkv_db *db);
void bkv_db_value_index_read_unlock(bkv_db *db);
int bkv_db_value_index_broken(const bkv_db *db);
int bkv_db_value_index_search(bkv_db *db, const bkv_vf_probe *probe, bkv_vindex_hit_fn fn, void *arg,
                              bkv_find_stats *st);

/* Installs a version edit (commit.c): logged and applied by the version
 * set, published to reads, the value index kept in step (reindex: the
 * edit adds or drops tables; 0 for a move that keeps every table): added
 * tables enter the index before the version is installed, dropped ones
 * leave after. REQUIRES: db->mu held; drops it while updating the index. */
int bkv_db_commit_edit(bkv_db *db, bkv_version_edit *edit, int reindex, bkv_err *e);

/* Holding every write back (db_write.c): hold waits until w leads the
 * write queue, so no write is applied until release; the holder may then
 * drop and retake db->mu. flush_held, by the holder, writes every memtable
 * to level 0 and waits for it. REQUIRES: db->mu held. */
void bkv_db_hold_writes(bkv_db *db, bkv_writer *w);
void bkv_db_release_writes(bkv_db *db, bkv_writer *w);
int bkv_db_flush_held(bkv_db *db, bkv_err *e);

/* The table read flags (BKV_READ_*) ro asks for; NULL: fill the cache. */
int bkv_db_read_flags(const bkv_read_options *ro);
/* A scratch handle for reading a manifest (and WALs) outside an open
 * database: zeroed, 64-byte aligned, with env and path (not copied) set;
 * the caller sets what else it reads and frees it with free(). NULL when
 * out of memory. */
bkv_db *bkv_db_scratch(const bkv_env *env, const char *path);
/* bkv_table_range_may_intersect of ro's bounds, counted in the
 * range-filter counters (1, uncounted, when t has no range filter). */
int bkv_db_range_may_intersect(bkv_db *db, const struct bkv_table *t, const bkv_read_options *ro);
/* Counts one range filter's answer (maybe 0: it ruled the range out) the
 * same way; returns maybe. */
int bkv_db_range_counted(bkv_db *db, int maybe);

/* Copies a caller's options struct (whose first field is its size) over
 * dst, which holds defaults and is dst_size bytes (options.c says how
 * other sizes are treated); BKV_INVALID described in e. */
int bkv_adopt_options(void *dst, size_t dst_size, const void *src, const char *what, bkv_err *e);
/* The largest size an options struct may claim (every struct is far below). */
#define BKV_OPTIONS_SIZE_MAX 4096
/* BKV_INVALID, naming the option and its allowed range, unless o is valid. */
int bkv_check_options(const bkv_options *o, bkv_err *e);
/* Copies o's per-level policy into own (the defaults past its count) and
 * points o at the copy, so o no longer refers to the caller's array. */
void bkv_options_own_levels(bkv_options *o, bkv_level_options own[BKV_MAX_LEVELS]);
/* Level level's key filter type and bits per key under o; whether its
 * bits per key are set for it (then a filter budget leaves it alone). */
int bkv_level_filter_type(const bkv_options *o, int level);
double bkv_level_bits_per_key(const bkv_options *o, int level);
/* The range filter's bits per key for tables written at level (0: none). */
double bkv_level_range_filter_bits(const bkv_options *o, int level);
int bkv_level_sets_bits(const bkv_options *o, int level);
/* The mode of a directory the engine creates for file_mode: search
 * permission wherever it grants read (0644 -> 0755, 0600 -> 0700). */
unsigned bkv_dir_mode(unsigned file_mode);

/* The read options to use for a call given ro (NULL stays NULL): ro
 * itself, or its fields adopted into *local when it has another layout.
 * BKV_INVALID (described in e) for a bad size or a snapshot of another
 * database. */
int bkv_db_read_options(const bkv_db *db, const bkv_read_options **ro, bkv_read_options *local, bkv_err *e);

/* The oldest sequence any reader reads at: the oldest live snapshot, or
 * what reads see now. REQUIRES: db->mu. */
uint64_t bkv_db_oldest_snapshot(bkv_db *db);

/* Compaction (compaction.c). REQUIRES db->mu for pick; run drops it while
 * it merges. */
typedef struct bkv_compaction bkv_compaction;
bkv_compaction *bkv_pick_compaction(bkv_db *db);
void bkv_run_compaction(bkv_db *db, bkv_compaction *c);
/* Deletes an obsolete table file (the bkv_file_owner callback). */
void bkv_db_table_obsolete(void *db, uint64_t number);

/* Puts the database into its read-only error state (first error wins).
 * REQUIRES: db->mu. Returns rc. */
int bkv_db_set_bg_error(bkv_db *db, int rc, const bkv_err *e);
/* Creates a write-ahead log file, mapped when the options allow. */
int bkv_db_new_wal(bkv_db *db, const char *path, unsigned mode, bkv_wfile **out, bkv_err *e);
/* Lazily synced WALs (log_sync.c). retire: the leader hands over a WAL it
 * ended, next the number of the WAL it started after it (numbers are not
 * consecutive: tables share the counter). REQUIRES: db->mu not held.
 * sync_retired: syncs and closes every retired WAL, then the directory;
 * BKV_OK when there were none. Any thread, without db->mu. */
int bkv_db_retire_log(bkv_db *db, bkv_wfile *f, uint64_t next, bkv_err *e);
int bkv_db_sync_retired_logs(bkv_db *db, bkv_err *e);
/* The spare WAL (log_sync.c), made by the first background thread only.
 * want: whether it should make one now. make: creates it (a failure only leaves the next switch
 * to create its own); REQUIRES: db->mu held, released meanwhile. take:
 * hands the spare to a memtable switch, or returns NULL; either way its
 * number becomes the newest WAL. REQUIRES: db->mu held. drop: closes and
 * removes it; REQUIRES: no background thread running. */
int bkv_db_want_spare_log(const bkv_db *db);
void bkv_db_make_spare_log(bkv_db *db);
bkv_wfile *bkv_db_take_spare_log(bkv_db *db, uint64_t *number);
void bkv_db_drop_spare_log(bkv_db *db);
/* Frees what is left of the WAL set with its handle: retired WALs a
 * failed sync left are closed unsynced, the spare is removed.
 * REQUIRES: no background thread. */
void bkv_db_free_wals(bkv_db *db);
/* Closes a WAL nothing was written to and removes its file. */
void bkv_db_discard_wal(bkv_db *db, bkv_wfile *f, uint64_t number);
/* Whether the WAL at path holds a durable mark; one that cannot be read
 * counts as marked (open and check then refuse rather than drop). */
int bkv_wal_has_mark(const bkv_env *env, const char *path);
/* The write leader's durable mark in the active WAL (docs/format.md,
 * "Durable mark"), once every older WAL is durable: sync set, it makes
 * them so first. A no-op when the mark is there or cannot be written yet.
 * sequence: the last one written (the mark's header holds it).
 * REQUIRES: db->mu not held, the caller leads the writers (or closes). */
int bkv_db_mark_log(bkv_db *db, int sync, uint64_t sequence, bkv_err *e);
/* The active WAL (the write leader's, an open's or a close's): f (NULL:
 * none, after a failed switch) becomes it, unmarked; the one it was is
 * the caller's to end and retire first. */
void bkv_db_wal_install(bkv_db *db, bkv_wfile *f);
bkv_wfile *bkv_db_wal_active(const bkv_db *db);
/* Appends one record to the active WAL, then syncs it (sync) or hands it
 * to the OS, so that a crash of the process cannot lose it. */
int bkv_db_wal_append(bkv_db *db, const void *record, size_t len, int sync, bkv_err *e);
/* Closes the active WAL, if any: with e, the error of the close (NULL:
 * closed whatever happens, as when an open fails). */
int bkv_db_wal_close(bkv_db *db, bkv_err *e);
/* The read-only error state as a status described in e. REQUIRES: db->mu. */
int bkv_db_bg_status(const bkv_db *db, bkv_err *e);
/* Records err as this thread's last error on db (NULL: a call without a
 * handle); returns rc. */
int bkv_db_error(bkv_db *db, int rc, const bkv_err *err);
/* BKV_INVALID for public call `call` given a NULL handle or pointer where
 * it needs one, with a message saying so (never an earlier call's). */
int bkv_db_arg_error(bkv_db *db, const char *call);
/* An options struct of the caller's size (its first field), filled from
 * this library's defaults (own bytes): what both know copied, the rest of
 * a newer caller's struct zeroed, and size stamped (options.c). */
void bkv_init_sized(void *dst, size_t size, const void *defaults, size_t own);
/* BKV_INVALID, with a message saying call would change db, which was
 * opened read-only (bkv_options.read_only). */
int bkv_db_read_only_error(bkv_db *db, const char *call);

/* Without value_terms of the caller's, o gets the built-in extractor its
 * value_terms_name names, else the one recorded (a database's manifest;
 * "" for none): BKV_OK, with *arg to free after o's last use (NULL when
 * none was resolved) and *name set to the canonical name to record;
 * BKV_INVALID, described in e, when value_terms_name names no built-in or
 * a malformed one (value_index.c). */
int bkv_resolve_builtin_terms(bkv_options *o, const char *recorded, void **arg, const char **name, char *canonical,
                              size_t cap, bkv_err *e);

/* Writes mem to a new level-0 table numbered number (no table when mem is
 * empty: *out stays NULL), synced and with its directory entry durable;
 * budget_bits as for bkv_table_file_open. Called without db->mu held. */
int bkv_db_write_memtable(bkv_db *db, bkv_memtable *mem, uint64_t number, double budget_bits, bkv_file_meta **out,
                          bkv_err *e);
/* A read's charge of seeks (db_read.c) to the tables it paid to pass (see
 * bkv_tree_version_charge_seeks), waking the compactions when that makes
 * one due. Leveled with compact_for_reads only, and once writes have
 * paused for a second: a compaction for reads takes background time that
 * writes would need. Takes db->mu when it wakes them, so the caller must
 * not hold it. */
void bkv_db_charge_seeks(bkv_db *db, bkv_tree_version *v, const void *key, size_t klen, int seeks);

/* A table writer with an explicit env (tests inject faults through it). */
int bkv_table_writer_create_env(const bkv_options *opts, const char *path, const bkv_env *env,
                                bkv_table_writer **out);
/* Opens with an explicit env (tests inject faults through it). */
int bkv_open_env(const char *path, const bkv_options *opts, const bkv_env *env, bkv_db **dbp);

#endif
