/*
 * bloomkv.h — the bloomkv storage engine's public C API.
 *
 * An embedded, persistent, ordered key-value store: a log-structured merge
 * tree whose reads ask each table's filter before touching it, with each
 * key hashed once per operation.
 *
 * Conventions
 * - Keys and values are byte strings given as (pointer, length); any bytes
 *   are allowed, including NUL. Keys are ordered bytewise. A key holds at
 *   most BKV_MAX_KEY_SIZE bytes and a value at most BKV_MAX_VALUE_SIZE:
 *   every call that stores one (bkv_put, bkv_delete, bkv_batch_put,
 *   bkv_batch_delete, bkv_table_writer_put/_delete) refuses a longer one
 *   with BKV_INVALID and stores nothing, so whatever is accepted can be
 *   flushed, compacted and read back. A read of a longer key finds nothing.
 * - Every fallible function returns an int status: BKV_OK (0), BKV_NOTFOUND
 *   (1, not an error), or a negative error (BKV_CORRUPTION, BKV_IOERROR,
 *   BKV_INVALID, BKV_NOMEM, BKV_BUSY). bkv_strerror() names a status;
 *   bkv_errmsg() gives the detail of this thread's last error (naming the
 *   file and offset for corruption, the option and its allowed range for a
 *   bad option, the system's reason for an I/O error).
 * - Arguments: a NULL handle or a NULL pointer where the call needs one
 *   returns BKV_INVALID (functions returning void do nothing; those
 *   returning a pointer return NULL). Every failing call leaves its own
 *   message for bkv_errmsg.
 * - Lifetimes: iterators (bkv_iter, bkv_find_iter) and snapshots belong to
 *   their database and end before it: bkv_close refuses (BKV_BUSY, nothing
 *   closed) while any is live, and refuses (BKV_INVALID) a handle that is
 *   not open (closed already, or by another thread at the same time). Any
 *   other call on a closed handle is use after free, which no cheap check
 *   can catch. An options struct whose size field is above 4096 is
 *   refused (BKV_INVALID) rather than read.
 * - Ownership: buffers the library returns (values from bkv_get, strings
 *   from bkv_property) are malloc'd and the caller frees them with
 *   bkv_free(). Handles are freed by their *_close / *_destroy function.
 * - Thread safety: a bkv_db may be used by any number of threads at once.
 *   A bkv_batch must not be used by two threads at once.
 * - Durability: a write acknowledged with sync = 1 survives power loss; a
 *   write acknowledged without sync survives a crash of the process (it
 *   reached the operating system before the call returned). After the
 *   first failed WAL or manifest write or sync, the database refuses every
 *   later write with the same error (reads keep working).
 * - One process at a time: a second bkv_open of the same directory, from
 *   this process or another, fails with BKV_BUSY, as does bkv_check while
 *   the database is open. The lock is held on the directory itself (and on
 *   its LOCK file, for tools that look for one), so deleting LOCK does not
 *   let a second writer in.
 * - Files: every file is created new (never truncating an existing one or
 *   following a symbolic link planted in its name) with
 *   bkv_options.file_mode, less the umask.
 */
#ifndef BLOOMKV_H
#define BLOOMKV_H

#include <stddef.h>
#include <stdint.h>

#include "bloomkv_common.h" /* BKV_EXPORT, versions, status codes, filter types */

#ifdef __cplusplus
extern "C" {
#endif

/* The longest key and value the engine stores (see Conventions). */
#define BKV_MAX_KEY_SIZE ((size_t)1 << 20)    /* 1 MiB */
#define BKV_MAX_VALUE_SIZE ((size_t)1 << 28)  /* 256 MiB */

enum { BKV_COMPRESSION_NONE = 0, BKV_COMPRESSION_LZ4 = 1, BKV_COMPRESSION_ZSTD = 2 };
enum { BKV_COMPACTION_LEVELED = 0, BKV_COMPACTION_TIERED = 1 };
/* What an open does with damage in a write-ahead log (bkv_options.wal_recovery).
 * A torn tail (the newest log's end cut short or garbled by a crash, with
 * nothing valid after it) is dropped in every mode: those writes were never
 * acknowledged as synced. Damage with valid records after it, or in an
 * older log, is another matter: */
enum {
    BKV_WAL_RECOVERY_ABSOLUTE = 0,      /* refuse to open (BKV_CORRUPTION naming the file and offset) */
    BKV_WAL_RECOVERY_POINT_IN_TIME = 1, /* recover everything before the first damage, nothing after it
                                           (later records and logs are dropped: a consistent prefix) */
    BKV_WAL_RECOVERY_SKIP_DAMAGED = 2   /* skip damaged records and keep every intact one
                                           (LevelDB's default; batches after the damage survive) */
};
/* Value index shapes (bkv_options.value_index). */
enum {
    BKV_VALUE_INDEX_NONE = 0,      /* no value index (or, at an open, whatever the database has) */
    BKV_VALUE_INDEX_FLAT = 1,      /* every partition's filter is probed in turn (the baseline) */
    BKV_VALUE_INDEX_HIERARCHY = 2, /* a tree of order d whose inner nodes OR their children */
    BKV_VALUE_INDEX_BITSLICED = 3, /* filters stored transposed: k row reads test them all */
    BKV_VALUE_INDEX_PAGED = 4      /* bounded memory: each table keeps a summary filter of its values in
                                      memory (value_summary_bits) and its partition filters on disk,
                                      stored by row: a search reads k rows of the tables whose summary
                                      answers "maybe". Nothing is built at open, nothing to update */
};

/* bkv_options.value_partition_entries by default. */
#define BKV_DEFAULT_VALUE_PARTITION 128

#define BKV_MAX_LEVELS 7

typedef struct bkv_db bkv_db;
typedef struct bkv_batch bkv_batch;

/* One level's filter policy (bkv_options.level_options). */
typedef struct bkv_level_options {
    int    filter_type;   /* a BKV_FILTER_* type, or < 0: bkv_options.filter_type */
    double bits_per_key;  /* <= 0: bkv_options.bits_per_key (or the filter memory budget's) */
    /* The range filter's bits per key at this level: 0, bkv_options'
     * range_filter_bits_per_key; < 0, none; else 3 to 66. */
    double range_filter_bits_per_key;
} bkv_level_options;
typedef struct bkv_snapshot bkv_snapshot;
typedef struct bkv_iter bkv_iter;

/* Maps a key to the length of its prefix (<= klen), or to SIZE_MAX when
 * the key has no prefix. Must be a pure function of the key bytes and stay
 * the same for the life of a database. */
typedef size_t (*bkv_prefix_fn)(const void *key, size_t klen);

/* Maps a value to the terms a value search can find it by (for example the
 * fields of a record), calling emit(ctx, term, len) once per term; the
 * bytes need only live until emit returns. Must be a pure function of the
 * value bytes and stay the same for the life of a database. */
typedef void (*bkv_term_emit_fn)(void *ctx, const void *term, size_t tlen);
typedef void (*bkv_terms_fn)(void *arg, const void *val, size_t vlen, bkv_term_emit_fn emit, void *ctx);

/* The three options structs start with their size, set by their _init
 * function: a program compiled against an older bloomkv.h keeps working
 * with a newer library (fields it does not know keep their defaults), and
 * one compiled against a newer header works with an older library as long
 * as it leaves the fields that library lacks at their defaults (zero); one
 * it sets is refused (BKV_INVALID), never ignored. Always fill a struct
 * with its _init macro (it passes your sizeof), then set fields by name. */
typedef struct bkv_options {            /* bkv_options_init() fills the defaults */
    size_t size;                        /* sizeof(bkv_options) as compiled; set by bkv_options_init */
    int    create_if_missing;           /* create the directory and database; default 1 */
    int    error_if_exists;             /* fail if it already exists; default 0 */
    size_t write_buffer_size;           /* memtable bytes before a flush; default 64 MiB */
    int    max_write_buffer_number;     /* memtables (active + immutable) before writes stop; default 3 */
    size_t block_size;                  /* data block bytes before compression; default 4096, 64..64 MiB */
    size_t block_cache_size;            /* bytes of data blocks cached; default 64 MiB (0: no cache) */
    int    max_open_files;              /* tables kept open; default 1000 */
    int    filter_type;                 /* key filter of new tables; default BKV_FILTER_BLOCKED_BLOOM */
    double bits_per_key;                /* key filter budget; default 10 */
    int    compression;                 /* BKV_COMPRESSION_*; default NONE */
    int    memtable_filter;             /* Bloom filter over each memtable's keys; default 1 */
    bkv_prefix_fn prefix_extractor;     /* when set, table filters also hold each key's prefix,
                                           so prefix-bounded iterators skip tables; default NULL */
    int    wal_recovery;                /* BKV_WAL_RECOVERY_*; default ABSOLUTE. bkv_check reports
                                           such damage whatever the mode */
    unsigned file_mode;                 /* permission bits of every file the database creates (WAL,
                                           tables, manifest, CURRENT, LOCK), less the umask; the
                                           directory gets the same plus search (x) where readable.
                                           0600 keeps the data private whatever the umask;
                                           must include 0600; default 0644 */

    /* Compaction. Leveled (LevelDB/RocksDB style): level 0 holds flushed
     * tables that may overlap; levels 1.. are sorted runs of disjoint
     * tables, each level's target size multiplier times the previous.
     * Tiered (size-tiered / universal): every table is a sorted run in
     * level 0, and runs of similar size are merged when enough pile up. */
    int    compaction_style;            /* BKV_COMPACTION_*; default LEVELED */
    int    level0_compaction_trigger;   /* level-0 tables (tiered: runs) that start a compaction; default 4 */
    int    level0_slowdown_trigger;     /* ... that slow writes by 1 ms each; default 8 */
    int    level0_stop_trigger;         /* ... that stop writes until compaction catches up; default 12 */
    uint64_t max_bytes_for_level_base;  /* level-1 target bytes; default 0: write_buffer_size x
                                           level0_compaction_trigger (256 MiB by default) */
    double level_size_multiplier;       /* default 10 */
    int    level_compaction_dynamic_level_bytes; /* size the levels above the last from the last
                                           (RocksDB's option of that name): ~1.1 space
                                           amplification at any size; default 1 */
    uint64_t target_file_size;          /* leveled output tables are cut at this size; default 16 MiB */
    int    tiered_size_ratio;           /* percent: a run joins a merge if not larger than
                                           (100 + ratio)% of the runs newer than it; default 20 */
    int    tiered_max_size_amplification; /* percent: merge everything when the newer runs exceed
                                           this share of the oldest; default 200 */
    /* Background threads; default 2. The first flushes (and, alone,
     * compacts too); each of the others runs one compaction at a time,
     * beside the others' on tables they do not hold: at 3 or more, a
     * level-0 compaction need not wait behind a long one deeper down.
     * 1..16. */
    int    max_background_jobs;
    /* Per-level filter policy: NULL, or level_options_count entries,
     * entry i for level i; levels past the count keep the defaults, and a
     * count above BKV_MAX_LEVELS is refused. Read by the call the options
     * are given to (bkv_open, bkv_table_writer_create), which keeps a copy:
     * the array need not outlive it. Default NULL, 0. */
    const bkv_level_options *level_options;
    size_t level_options_count;
    int    optimize_filters_for_hits;   /* no key filter on the bottommost level (saves ~90% of
                                           filter memory; misses then cost one block read); default 0 */

    /* Search by value (bkv_find_value). Every table gets Bloom filters
     * over the terms of its values, one per partition of at most
     * value_partition_entries entries, indexed in memory by the chosen
     * shape. m, k, P and the terms extractor are fixed when the index is
     * created and recorded in the manifest: a later open with different
     * ones fails with BKV_INVALID, except that m and k left automatic (0)
     * and P left at its default take the recorded ones (so an index made
     * under older defaults, m = 16384 and P = 512, opens with today's).
     * Opening with value_index NONE keeps the index a database has (an
     * extractor must still be passed). */
    int      value_index;               /* BKV_VALUE_INDEX_*; default NONE */
    uint32_t value_filter_bits;         /* m: bits per partition filter, a multiple of 64; default 0:
                                           32 x P rounded up to a multiple of 64, at most 2^21 (16384
                                           when P = 0) */
    int      value_filter_hashes;       /* k: bits per term, 1..30; default 0: ln 2 x m / P, at most 6
                                           (4 when P = 0); 2 more for a new paged index, whose terms set
                                           their bits in two words of each filter (two rows read per
                                           table instead of k) */
    uint32_t value_partition_entries;   /* P; default 128 (BKV_DEFAULT_VALUE_PARTITION); 0: one filter
                                           per table (the paper's layout). Smaller P scans fewer entries
                                           per match (a value many keys hold costs P entries per key) and
                                           probes more partitions (a search probes every one) */
    int      value_index_order;         /* d of the hierarchy (fan-out d..2d), >= 2; default 4 */
    bkv_terms_fn value_terms;           /* default NULL: a value's one term is the whole value */
    void    *value_terms_arg;
    const char *value_terms_name;       /* names the extractor (required with value_terms; by convention
                                           "name/version", so a changed extractor is refused by name).
                                           Without value_terms it names a built-in one, recorded in the
                                           database so that any process reopens it without passing it:
                                           "words" (lower-cased word tokens), "field:SEP:N" (the N-th field,
                                           from 1, split at byte SEP, or "tab" / "space"), "prefix:N" (the
                                           value and its prefixes of 1..N bytes), "json:FIELD[.FIELD...]"
                                           (a field of JSON object values) */
    int      value_index_reshape;       /* allow opening with another value_index shape than the
                                           database has (the index is rebuilt in it); default 0:
                                           BKV_INVALID naming both */

    /* Key filters when memory is the limit (docs/design.md "Filter memory").
     * Partitioned, a table's filter is split by key hash into partitions
     * of about filter_partition_size bytes that are read on demand through
     * the block cache: an open table keeps only 16 bytes per partition in
     * memory, so the block cache bounds filter memory. Unpartitioned, every
     * open table keeps its whole filter in memory. */
    int    partition_filters;           /* default 0 */
    size_t filter_partition_size;       /* bytes per partition, 64..2^26; default 0: 4096 */
    /* Bytes of key filter for the whole database. When set, the bits per
     * key of each new table follow Monkey's rule: every sorted run (each
     * level-0 table, each deeper level) gets a false-positive rate
     * proportional to its number of keys, which minimizes the expected
     * block reads of a missing get for that memory; re-chosen from the
     * current level sizes for each new table. A level's bits_per_key in
     * level_options wins where set. Range filters (range_filter_bits_per_key)
     * are paid from it first, at their own bits per key for every key of
     * their levels; key filters share the rest (none once range filters
     * take it all). Default 0: bits_per_key everywhere. */
    uint64_t filter_memory_budget;
    /* 1: write-ahead logs are written through a shared map of the file
     * (when the env and the file system allow), so an unsynced write is
     * with the OS, safe from a crash of the process, without a system
     * call; synced writes still fdatasync. 0: one write() per group of
     * writes, as LevelDB. Default 1. */
    int    wal_mmap;
    /* 1: this open removes the database's value index (recorded before
     * the open returns; value_index must be BKV_VALUE_INDEX_NONE). Its
     * tables keep their value filters until compaction rewrites them; a
     * later index with another extractor never trusts them (docs/format.md,
     * "Value filter block"). Default 0. */
    int    value_index_drop;
    /* 1: leveled compaction also compacts a table, into the level below,
     * once reads have paid to look past it more often than it is worth
     * (size / 16 KiB times, at least 100, as LevelDB; sampled), when
     * writes have paused for a second and no level is over its size: a
     * tree that is only read then loses its upper runs. 0: only sizes
     * make compactions due. Default 1. */
    int    compact_for_reads;
    /* 1: a background thread that flushed or compacted hands the C
     * library's free heap memory back to the system (glibc's malloc_trim;
     * nothing elsewhere) once it has had no work for 100 ms, and at most
     * once a second while it has more. Tables are built and read through buffers
     * of 100 KB to 2 MB, which glibc keeps in its heaps once it has seen
     * one freed: at 2 M keys this halved the process's anonymous memory.
     * The call takes about a millisecond, during which other threads'
     * allocations may wait on the heap it is trimming. 0: the allocator
     * is left alone. Default 1. */
    int    release_free_memory;
    /* How much lower the compaction thread's CPU priority is than the
     * opening thread's, in nice steps (Linux), when max_background_jobs
     * >= 2; the first background thread, which flushes, keeps its
     * priority. On a machine with as many busy threads as cores a
     * compaction otherwise preempts the write leader for whole time
     * slices: at 10, a single writer saw half as many writes over 3 ms,
     * but two writers that kept both cores busy starved compaction into
     * more level-0 slowdowns (docs/design.md, 875db2a). 0..19; default
     * 0: not lowered. */
    int    compaction_nice;
    /* A leveled compaction whose inputs span at least four tables of the
     * level below is cut at table boundaries of that level into up to
     * this many key ranges, merged by as many threads at once (the
     * compacting thread and helpers it starts for the compaction). On a
     * machine whose writers leave cores idle while level 0 waits for one
     * compaction thread, this is what lets the background keep up.
     * 1..8; 0 or unset: 2. */
    int    max_subcompactions;
    /* The paged value index (BKV_VALUE_INDEX_PAGED) keeps in memory, per
     * open table, a summary filter over its distinct value terms, about
     * 1.05 x value_summary_bits bits per distinct term: a Ribbon filter
     * for tables of the bottom level (a "maybe" for about one absent term
     * in 2^value_summary_bits), a blocked Bloom filter, cheaper to build
     * and about 3% "maybe" at 7 bits, for tables above it, which
     * compactions soon rewrite; plus
     * 8 bytes per partition: this is its memory budget (0.98 bytes per
     * entry at the defaults with unique values; property
     * "bloomkv.value-index-memory"). More bits: fewer tables' rows read per
     * search. Applies to tables written from then on. 2..16; 0 or unset: 7. */
    int    value_summary_bits;
    /* Open without changing anything (RocksDB's OpenForReadOnly): no LOCK
     * taken, no file created, written or removed, no background thread;
     * the WAL is replayed into memory only. Opens beside a writer in
     * another process (seeing the database as of this open: tables that
     * writer compacts away after it may then fail to read, BKV_IOERROR)
     * and on read-only media. Writes, flush, compaction, ingest and value
     * index builds are refused (BKV_INVALID); a checkpoint works (what
     * the WAL held goes into the copy's WAL). Never
     * creates a database, whatever create_if_missing says; a value index
     * drop or reshape is refused. Default 0. */
    int    read_only;
    /* Range filters: each table written from now on also carries a range
     * filter (bkv_filter_build_range) at this many bits per key over eight
     * bytes of each key (from inside the prefix all the table's keys
     * share), and an iterator with bounds (or
     * bkv_range_empty) skips every table whose filter says the range
     * holds none of its keys, before reading its index. A range of L keys
     * is a false positive with probability at most L / 2^(B-2) at B bits:
     * 18 gives 1.6% at L = 1,024. 0 (the default): none; else 3 to 66.
     * Keys whose eight bytes there are equal look like one key to it.
     * level_options sets it per level. */
    double range_filter_bits_per_key;
} bkv_options;

typedef struct bkv_write_options {       /* bkv_write_options_init() fills the defaults */
    size_t size;                        /* set by bkv_write_options_init */
    int sync;                           /* fsync the WAL before returning; default 0 */
} bkv_write_options;                    /* NULL = defaults */

typedef struct bkv_read_options {       /* bkv_read_options_init() fills the defaults */
    size_t size;                        /* set by bkv_read_options_init */
    int verify_checksums;               /* every block is verified when first read from its file;
                                           1 also re-verifies it on every later read (a cached
                                           block is read from the file again): paranoid, slower;
                                           default 0 */
    int fill_cache;                     /* put blocks read into the block cache; default 1 */
    const bkv_snapshot *snapshot;       /* read the state at this snapshot; NULL = latest */
    /* Iterators only: keys outside [lower_bound, upper_bound) are never
     * returned (NULL = unbounded). The bytes must outlive the iterator. */
    const void *lower_bound;
    size_t      lower_bound_len;
    const void *upper_bound;
    size_t      upper_bound_len;
    /* Iterators only, with a prefix_extractor: after a seek, return only
     * keys with the seek key's prefix; tables whose filter rules that
     * prefix out are never read. */
    int prefix_same_as_start;
    /* Iterators only: pass over what cannot be read (a table, an index or
     * a data block that fails its checksum) instead of stopping there.
     * Every key in a range that could not be read is left out, also
     * where another table holds a version of it (that version may be one
     * the unreadable part overwrote or deleted): what is returned is
     * never wrong, only incomplete. Once a part was skipped,
     * bkv_iter_status answers BKV_CORRUPTION, naming the first and how
     * many; the iterator goes on meanwhile. Default 0. */
    int skip_damaged;
} bkv_read_options;                     /* NULL = defaults */

/* Each _init fills the defaults and stamps size with the caller's own
 * sizeof (the macros pass it): a program built against a newer header
 * that sets a field this library does not know is then refused by name at
 * use, never silently ignored, and a program built against an older header
 * gets no byte written past its struct. The plain functions remain for
 * programs built before the macros (they stamp this library's size). */
BKV_EXPORT void bkv_options_init_sized(bkv_options *opts, size_t size);
BKV_EXPORT void bkv_read_options_init_sized(bkv_read_options *ro, size_t size);
BKV_EXPORT void bkv_write_options_init_sized(bkv_write_options *wo, size_t size);
BKV_EXPORT void bkv_options_init(bkv_options *opts);
BKV_EXPORT void bkv_read_options_init(bkv_read_options *ro);
BKV_EXPORT void bkv_write_options_init(bkv_write_options *wo);
#define bkv_options_init(opts) bkv_options_init_sized((opts), sizeof *(opts))
#define bkv_read_options_init(ro) bkv_read_options_init_sized((ro), sizeof *(ro))
#define bkv_write_options_init(wo) bkv_write_options_init_sized((wo), sizeof *(wo))

/* Opens (or creates) the database in directory path. *dbp is set only on
 * success; on failure bkv_errmsg(NULL) says why ("does not exist (use
 * create_if_missing)", "permission denied", the option at fault, the
 * damaged file and offset, "database in use"). */
BKV_EXPORT int bkv_open(const char *path, const bkv_options *opts /* NULL = defaults */, bkv_db **dbp);
/* Waits for background work to stop and releases everything; unflushed
 * data stays in the WAL and is recovered by the next open. NULL is a no-op.
 * BKV_BUSY (nothing closed) while an iterator, value search or snapshot of
 * db is live; BKV_INVALID for a handle that is not open. */
BKV_EXPORT int bkv_close(bkv_db *db);

/* For a handle opened read_only beside a writer in another process (a
 * secondary, as RocksDB's TryCatchUpWithPrimary): reads the writer's
 * manifest and WALs again and moves the handle to what they hold now, so
 * that later reads see every write the writer had made when the call
 * read them (written to its WAL: synced or not). Iterators created before
 * keep reading the state they started with. *changed (if not NULL) is 1
 * when the handle's state moved. Costs a read of the manifest and of the
 * live WALs, as an open does; the table cache and block cache are kept.
 * Thread-safe: reads run meanwhile; catch-ups run one at a time.
 * Errors: BKV_INVALID (db NULL, or not opened read_only); BKV_BUSY
 * (snapshots are live: the writer may have compacted away what they read;
 * or the manifest moved under every one of 8 tries, or the value index
 * was built, dropped or reshaped since the open: open again); whatever an
 * open returns for damage (BKV_CORRUPTION) or I/O (BKV_IOERROR), with the
 * handle left as it was. */
BKV_EXPORT int bkv_try_catch_up(bkv_db *db, int *changed);

/* Stores val under key (replacing any value), or deletes key (deleting a
 * key that is absent is not an error). The bytes are copied before the
 * call returns. wo NULL: the defaults (no sync). On return the write is
 * visible to every later read, is with the OS (a crash of the process
 * keeps it) and, with wo->sync, on the device (a power loss keeps it).
 * Thread safety: any number of threads may write at once; concurrent
 * writes are grouped into one WAL record.
 * Errors, each with a message for bkv_errmsg(db):
 *   BKV_INVALID   db NULL, a NULL key or value with a length, a key over
 *                 BKV_MAX_KEY_SIZE or a value over BKV_MAX_VALUE_SIZE, an
 *                 uninitialized wo, or a database opened read-only;
 *   BKV_IOERROR   the WAL could not be written or synced (the write may
 *                 or may not survive a crash; from then on every write
 *                 returns this error: the database must be reopened);
 *   BKV_NOMEM     no memory for the write;
 *   any earlier background error (a failed flush or compaction), which
 *                 likewise stops every later write. */
BKV_EXPORT int bkv_put(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen,
                       const void *val, size_t vlen);
BKV_EXPORT int bkv_delete(bkv_db *db, const bkv_write_options *wo, const void *key, size_t klen);

/* Deletes every key in [begin, end) (memcmp order) at once, as RocksDB's
 * DeleteRange: begin NULL (blen 0) is the smallest key, end NULL (elen
 * 0) leaves the range unbounded above. One record, whatever the number of
 * keys: gets, multi-gets, iterators, searches by value and checkpoints
 * read every key in the range written before the call as deleted (a
 * snapshot taken before it still reads them); writes after it are not
 * affected. The deletion is a manifest record, synced before the call
 * returns whatever wo says. Tables wholly inside the range are dropped at
 * once when no snapshot is live; the rest of the space comes back as
 * compactions rewrite what the range covers. Meant for large ranges:
 * each live range deletion is checked by every read, until compaction
 * has removed what it covers. begin >= end: nothing to delete, BKV_OK.
 * Errors, each with a message: BKV_INVALID (db NULL, a NULL key with a
 * length, a key over BKV_MAX_KEY_SIZE, a database opened read-only,
 * sequence numbers exhausted); BKV_IOERROR (the manifest could not be
 * written: writes stop, as for a failed flush); BKV_NOMEM; an earlier
 * background error. */
BKV_EXPORT int bkv_delete_range(bkv_db *db, const bkv_write_options *wo, const void *begin, size_t blen,
                                const void *end, size_t elen);
/* Applies a batch atomically (one WAL record: after a crash, all of it or
 * none of it; readers never see part of it), as bkv_put does one write.
 * An empty batch does nothing and returns BKV_OK. The batch stays the
 * caller's, unchanged. Errors: those of bkv_put (BKV_INVALID also for a
 * NULL batch). */
BKV_EXPORT int bkv_write(bkv_db *db, const bkv_write_options *wo, const bkv_batch *batch);

/* The value of key at ro's snapshot (the latest state when ro or its
 * snapshot is NULL): BKV_OK with *val (malloc'd; free with bkv_free) and
 * *vlen, or BKV_NOTFOUND (*val NULL). Hashes the key once and reads no
 * table block that a table's key filter rules out.
 * Thread safety: any number of threads, beside writers, without a lock.
 * Errors (*val NULL, a message for bkv_errmsg(db)):
 *   BKV_INVALID     db, key (with a length), val or vlen NULL, an
 *                   uninitialized ro, or another database's snapshot;
 *   BKV_CORRUPTION  a block the read needed is damaged (named: file and
 *                   offset); never a wrong value;
 *   BKV_IOERROR     a table could not be read;
 *   BKV_NOMEM       no memory for the value or a block. */
BKV_EXPORT int bkv_get(bkv_db *db, const bkv_read_options *ro, const void *key, size_t klen,
                       void **val, size_t *vlen);

/* Looks up n keys at once: all keys are hashed first, then each table's
 * filter is probed for the whole batch with prefetching before any block
 * is read. statuses[i] receives BKV_OK, BKV_NOTFOUND or an error for key i,
 * and vals[i]/vlens[i] the value (free each with bkv_free). Returns BKV_OK
 * unless the call itself failed (then no value is returned). */
BKV_EXPORT int bkv_multi_get(bkv_db *db, const bkv_read_options *ro, size_t n, const void *const *keys,
                             const size_t *klens, void **vals, size_t *vlens, int *statuses);

BKV_EXPORT void bkv_free(void *p);

/* What one bkv_find_value did (all counts for that call). */
typedef struct bkv_find_stats {
    uint64_t leaves;             /* partition filters in the index (paged: not counted) */
    uint64_t nodes_probed;       /* inner nodes tested (hierarchy), rows read (bit-sliced),
                                    table summaries tested (paged) */
    uint64_t nodes_positive;     /* inner nodes (hierarchy) or summaries (paged) that answered "maybe" */
    uint64_t leaves_probed;      /* partition filters tested (bit-sliced: all, at once) */
    uint64_t leaves_positive;    /* ... that answered "maybe" (or could not be read) */
    uint64_t partitions_scanned;
    uint64_t partitions_matched; /* scanned partitions holding a real match: the rest were false positives */
    uint64_t entries_scanned;
    uint64_t memtable_candidates;
    uint64_t candidates;         /* distinct keys validated with a point read */
    uint64_t results;
    /* The plan: the index (0) or one scan of the whole snapshot (1), and
     * the costs it was chosen by, in units of one entry read from a
     * partition: the index plan's (its partitions, plus 6 per candidate
     * key to validate, projected from the partitions read) against the
     * scan's (3 per entry of the snapshot). */
    uint64_t plan_scan;
    uint64_t index_cost;
    uint64_t scan_cost;
} bkv_find_stats;

/* Calls fn(arg, key, klen, val, vlen) once for each key whose visible
 * value at the read snapshot holds val: equals it, or, with a value_terms
 * extractor, has it among its terms. Keys come in key order, each once;
 * the pointers are valid during the call only. fn returns non-zero to stop
 * early (bkv_find_value then returns BKV_OK). Needs a value index
 * (BKV_INVALID otherwise). stats may be NULL. */
BKV_EXPORT int bkv_find_value(bkv_db *db, const bkv_read_options *ro, const void *val, size_t vlen,
                              int (*fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen),
                              void *arg, bkv_find_stats *stats);

/* Which plan a search runs (bkv_find_options.plan). */
enum {
    BKV_FIND_PLAN_AUTO = 0,  /* the cheaper by the costs reported in bkv_find_stats */
    BKV_FIND_PLAN_INDEX = 1, /* the index's candidate partitions, however many */
    BKV_FIND_PLAN_SCAN = 2   /* one pass over the snapshot */
};

/* How bkv_find_values combines its terms. */
enum {
    BKV_FIND_ALL = 0, /* keys whose value holds every term (an AND) */
    BKV_FIND_ANY = 1  /* keys whose value holds at least one (an OR) */
};

/* bkv_find_value for a query of n terms (1..64), each terms[i] of
 * tlens[i] bytes, combined by mode. With BKV_FIND_ALL the index's answers
 * for the terms are intersected before any partition is read, so a
 * partition is scanned only when its filter may hold every term. */
BKV_EXPORT int bkv_find_values(bkv_db *db, const bkv_read_options *ro, const void *const *terms,
                               const size_t *tlens, size_t n, unsigned mode,
                               int (*fn)(void *arg, const void *key, size_t klen, const void *val, size_t vlen),
                               void *arg, bkv_find_stats *stats);

/* Search by value as an iterator: results come one bkv_find_iter_next at
 * a time, in key order, each key once, as they are validated, so a caller
 * can stop, page (limit, then resume after the last key returned) or
 * count without holding them all. bkv_find_values is this iterator
 * driven by a callback. */
typedef struct bkv_find_iter bkv_find_iter;

typedef struct bkv_find_options {   /* bkv_find_options_init() fills the defaults */
    size_t size;                    /* set by bkv_find_options_init */
    unsigned mode;                  /* BKV_FIND_ALL (default) or BKV_FIND_ANY */
    uint64_t limit;                 /* results at most; default 0: no limit */
    int keys_only;                  /* results carry no value (counting, listing); default 0 */
    /* Resume point: only keys greater than after (e.g. the last key of the
     * previous page) are returned. The bytes are copied. NULL: from the
     * first key. */
    const void *after;
    size_t after_len;
    /* 1: a candidate partition or key that cannot be read (damage, an I/O
     * error) is skipped and the search goes on; once every other result
     * is out, next returns the first such error (naming file and offset,
     * and how many parts were skipped) instead of BKV_NOTFOUND. Default 0:
     * the search fails at the first. The scan plan stops at damage either
     * way (an iterator cannot step over it). */
    int continue_on_error;
    /* BKV_FIND_PLAN_*: default AUTO. Forcing one is for measuring the
     * other, or for a caller who knows the selectivity better. */
    unsigned plan;
} bkv_find_options;

/* Builds the value index over the tables that predate it (a database
 * opened with value_index for the first time, or again after a drop,
 * perhaps with another extractor): each such table is rewritten in place with value filters,
 * one compaction at a time, while reads, writes and searches go on
 * (a search reads a table not yet rewritten whole). Safe to stop at any
 * point, by a crash too: what was rewritten stays, and calling it again
 * finishes the rest. *rewritten (may be NULL) counts tables rewritten.
 * BKV_INVALID without a value index. */
BKV_EXPORT int bkv_value_index_build(bkv_db *db, uint64_t *rewritten);

BKV_EXPORT void bkv_find_options_init_sized(bkv_find_options *fo, size_t size);
BKV_EXPORT void bkv_find_options_init(bkv_find_options *fo);
#define bkv_find_options_init(fo) bkv_find_options_init_sized((fo), sizeof *(fo))
/* Plans the search for n terms (1..64) at the read snapshot (ro's, or the
 * latest), which the iterator holds until destroyed: the index names the
 * candidate partitions, and create reads the first thirty-second of them
 * to learn the rate of candidates; next reads the others as the key order
 * reaches them, and the plan turns to one pass over the snapshot whenever
 * that becomes cheaper (bkv_find_stats). Memory does not grow with the
 * results. *out is set on success; destroy it with bkv_find_iter_destroy
 * before the database closes. The terms are copied; ro's snapshot must
 * outlive the iterator. */
BKV_EXPORT int bkv_find_iter_create(bkv_db *db, const bkv_read_options *ro, const void *const *terms,
                                    const size_t *tlens, size_t n, const bkv_find_options *fo,
                                    bkv_find_iter **out);
/* Moves to the next result: BKV_OK (key and value readable), BKV_NOTFOUND
 * (no more, or the limit is reached), or an error (also kept as the
 * status; the iterator stays at its error). */
BKV_EXPORT int bkv_find_iter_next(bkv_find_iter *it);
/* The current result's key and value (NULL with keys_only), valid until
 * the next call on the iterator; NULL when there is none. */
BKV_EXPORT const void *bkv_find_iter_key(const bkv_find_iter *it, size_t *klen);
BKV_EXPORT const void *bkv_find_iter_value(const bkv_find_iter *it, size_t *vlen);
BKV_EXPORT int bkv_find_iter_status(const bkv_find_iter *it);
/* What the search did so far (counts since create). */
BKV_EXPORT void bkv_find_iter_stats(const bkv_find_iter *it, bkv_find_stats *stats);
BKV_EXPORT void bkv_find_iter_destroy(bkv_find_iter *it);

/* Snapshots: a consistent view of the database at the moment of creation,
 * for gets and iterators (bkv_read_options.snapshot). Compaction keeps
 * every version a live snapshot can see. NULL when db is NULL or memory
 * ran out, the reason then in bkv_errmsg(db) (a status would be
 * BKV_INVALID or BKV_NOMEM). A read
 * with another database's snapshot fails with BKV_INVALID; releasing a
 * snapshot that db does not hold (again, or another database's) does
 * nothing. A snapshot must not be used after its release. */
BKV_EXPORT const bkv_snapshot *bkv_snapshot_create(bkv_db *db);
BKV_EXPORT void bkv_snapshot_release(bkv_db *db, const bkv_snapshot *snap);

/* Iterators over the keys visible at the read options' snapshot (the
 * latest state at creation when none), in key order, hiding older
 * versions and deleted keys. An iterator keeps the files it reads alive;
 * destroy it before closing the database. key() and value() stay valid
 * until the next move or destroy.
 * Thread safety: one iterator is used by one thread at a time (any number
 * of iterators may run at once, beside writers). On an iterator that is
 * not valid, next and prev do nothing, key and value return NULL with a
 * length of 0. After the loop, check bkv_iter_status: an error (damage,
 * out of memory) ends the iteration early rather than skip entries. */
/* Creates an iterator, not yet on an entry: seek first. *out is set only
 * on success; bounds with the lower after the upper give an iterator
 * with no entry. Errors (a message for bkv_errmsg(db)): BKV_INVALID (db
 * or out NULL, an uninitialized ro, another database's snapshot),
 * BKV_NOMEM, BKV_IOERROR or BKV_CORRUPTION (a table could not be opened). */
BKV_EXPORT int bkv_iter_create(bkv_db *db, const bkv_read_options *ro, bkv_iter **out);

/* Whether the database holds no key in [lo, hi) (lo NULL: from the
 * first key; hi NULL: unbounded) at ro's snapshot (ro NULL: latest; its
 * own bounds are replaced): *empty 1 or 0, exact. Tables whose range
 * filter (range_filter_bits_per_key) rules the range out are not read at
 * all; the others are asked as an iterator with these bounds would be.
 * Errors as bkv_iter_create's, and BKV_IOERROR or BKV_CORRUPTION when a
 * table that may hold the range cannot be read (then *empty is 0). */
BKV_EXPORT int bkv_range_empty(bkv_db *db, const bkv_read_options *ro, const void *lo, size_t lolen, const void *hi,
                               size_t hilen, int *empty);
/* Frees it and lets go of what it holds; NULL does nothing. */
BKV_EXPORT void bkv_iter_destroy(bkv_iter *it);
/* Moves: to the first or last key, to the first key >= key, or one step.
 * A move that meets an error leaves the iterator not valid, with the
 * error in bkv_iter_status. */
BKV_EXPORT void bkv_iter_seek_to_first(bkv_iter *it);
BKV_EXPORT void bkv_iter_seek_to_last(bkv_iter *it);
BKV_EXPORT void bkv_iter_seek(bkv_iter *it, const void *key, size_t klen); /* first key >= key */
BKV_EXPORT void bkv_iter_next(bkv_iter *it);
BKV_EXPORT void bkv_iter_prev(bkv_iter *it);
/* 1 when on an entry, 0 past either end or after an error. */
BKV_EXPORT int bkv_iter_valid(const bkv_iter *it);
/* The entry's key and value, owned by the iterator. */
BKV_EXPORT const void *bkv_iter_key(const bkv_iter *it, size_t *klen);
BKV_EXPORT const void *bkv_iter_value(const bkv_iter *it, size_t *vlen);
/* BKV_OK, or the error that ended iteration (detail in bkv_errmsg). */
BKV_EXPORT int bkv_iter_status(const bkv_iter *it);

/* Writes the active memtable to a table and waits for it. */
BKV_EXPORT int bkv_flush(bkv_db *db);
/* Flushes, then runs compactions until none is due (every level within
 * its target), and returns when they are done. */
BKV_EXPORT int bkv_compact(bkv_db *db);

/* Compacts the key range [begin, end] (NULL: unbounded at that end; both
 * NULL: everything) down to the deepest level that holds any of it (tiered:
 * into one run), dropping overwritten versions and tombstones no snapshot
 * needs, and returns when done (after a flush of the memtable). begin
 * after end is BKV_INVALID. */
BKV_EXPORT int bkv_compact_range(bkv_db *db, const void *begin, size_t blen, const void *end, size_t elen);

/* The bytes the tables take for keys in [start, limit) (NULL: unbounded),
 * estimated from their index blocks (no data block is read); memtables are
 * not counted. Like LevelDB's GetApproximateSizes, for planning and
 * splitting, not accounting. */
BKV_EXPORT int bkv_approximate_size(bkv_db *db, const void *start, size_t slen, const void *limit, size_t llen,
                                    uint64_t *bytes);

/* Writes a consistent copy of the database into directory dir, which must
 * not exist (BKV_INVALID otherwise) and should be on the same file system:
 * then tables are hard links and the copy takes almost no space or time
 * (across file systems they are copied). The copy holds every write
 * acknowledged before the call and opens as a database of its own; later
 * writes to either do not reach the other (tables are never modified, and
 * each has its own manifest and WAL). On failure nothing is left in dir. */
BKV_EXPORT int bkv_checkpoint(bkv_db *db, const char *dir);

/* Deletes the database in directory path (closed: BKV_BUSY while it is
 * open anywhere): every file named as the engine names its files, then
 * the directory unless other files are in it (they are left alone). A
 * missing path is BKV_OK. Refused with BKV_INVALID, nothing removed, when
 * path is a symbolic link or not a database (no CURRENT naming a manifest
 * that reads whole). */
BKV_EXPORT int bkv_destroy(const char *path);

/* Repairs the database in directory path (closed: BKV_BUSY while it is
 * open anywhere), keeping every row that can still be read:
 * - a lost or damaged CURRENT is pointed at the newest manifest that
 *   reads whole (preferring one whose tables all exist; an older one is
 *   taken only when every newer one is not intact: it was never named by
 *   CURRENT);
 * - a table that manifest names but that is gone is dropped from it;
 * - a damaged table is rewritten from its intact data blocks (a damaged
 *   key or value filter: rebuilt, every row kept; a table whose footer or
 *   index cannot be read: its rows are lost);
 * - a damaged WAL is replayed around the damage.
 * The originals of what was rewritten or read around are moved (tables)
 * or copied (WALs) into path/lost/, never deleted. Rows read from
 * intact blocks keep their values: a repair never yields a wrong value.
 * The repair opens the database with default options, so a WAL is
 * flushed into a table. done (if not NULL) gets what was done, each
 * file named, in done_len bytes ("nothing to repair: ..." when nothing
 * was). BKV_OK when repaired or nothing needed it; BKV_CORRUPTION when
 * no manifest reads whole (nothing written); BKV_INVALID (path missing,
 * not a directory, a symbolic link); BKV_IOERROR, BKV_NOMEM. */
BKV_EXPORT int bkv_repair(const char *path, char *done, size_t done_len);

/* ---- Bulk load: tables written outside the database, then ingested ----
 *
 * A table writer builds one table file from keys given in strictly
 * increasing order (memcmp), with no WAL, memtable or compaction; the
 * table is laid out by opts (filter, block size, compression, prefix
 * extractor, value index: give the options the database is opened with).
 * bkv_ingest then adds finished tables to a database atomically: every
 * key of every table at once, as one write newer than all before it.
 * Ingesting costs one read of each table (every block and the filter are
 * verified) and a copy, or a hard link with BKV_INGEST_MOVE; writes wait
 * only while the tables are placed, plus a flush when a memtable holds
 * keys in their ranges (format notes in docs/format.md, "Manifest
 * records", tag 7). A writer is used by one thread at a time; failures
 * are described in bkv_errmsg(NULL). */
typedef struct bkv_table_writer bkv_table_writer;

/* Creates the file at path (which must not exist). */
BKV_EXPORT int bkv_table_writer_create(const bkv_options *opts /* NULL = defaults */, const char *path,
                                       bkv_table_writer **out);
/* BKV_INVALID, the table unchanged, when key is not greater than the last
 * key added. Other failures abandon the file (later calls are refused). */
BKV_EXPORT int bkv_table_writer_put(bkv_table_writer *w, const void *key, size_t klen, const void *val, size_t vlen);
/* A tombstone: the key is deleted when the table is ingested. */
BKV_EXPORT int bkv_table_writer_delete(bkv_table_writer *w, const void *key, size_t klen);
BKV_EXPORT uint64_t bkv_table_writer_entries(const bkv_table_writer *w);
/* Writes the rest of the table, syncs and closes it; a table with no
 * entries is refused (and removed). */
BKV_EXPORT int bkv_table_writer_finish(bkv_table_writer *w);
/* Frees the writer; a file not finished is removed. */
BKV_EXPORT void bkv_table_writer_destroy(bkv_table_writer *w);

#define BKV_INGEST_MOVE 1u /* hard-link the files in (copy across file systems), and remove them after */
/* Ingests n table files made by table writers. Their key ranges must not
 * overlap one another. A table written by anything else, damaged, or laid
 * out without the database's value index or prefix extractor is refused
 * before the database changes. The files are left as they were unless
 * BKV_INGEST_MOVE. */
BKV_EXPORT int bkv_ingest(bkv_db *db, const char *const *paths, size_t n, unsigned flags);

/* For a process that forks while the database is open and reads it in
 * the child (a Redis module saving a snapshot, say): call prepare just
 * before fork() and parent/child just after, in the process each names
 * (pthread_atfork handlers fit). The child then sees the database as it
 * was at the fork and may read it (gets, multi-gets, iterators, searches
 * by value) but not write, flush, compact or close it: the engine's
 * threads do not exist there. */
BKV_EXPORT void bkv_fork_prepare(bkv_db *db);
BKV_EXPORT void bkv_fork_parent(bkv_db *db);
BKV_EXPORT void bkv_fork_child(bkv_db *db);

/* A malloc'd text (free with bkv_free), or NULL for an unknown name; a
 * name that starts "leveldb." reads as "bloomkv." (LevelDB's names):
 *   "bloomkv.stats"                  readable report
 *   "bloomkv.last-sequence"          the sequence number of the last write reads see (decimal)
 *   "bloomkv.num-files-at-level<N>"  decimal
 *   "bloomkv.range-deletions"        range deletions still checked by reads (decimal): each
 *                                    leaves once compaction removed what it covers
 *   "bloomkv.sstables"               each level's tables: number:size[smallest .. largest]
 *   "bloomkv.bytes-at-level<N>"      decimal
 *   "bloomkv.entries-at-level<N>"    decimal: entries in its tables (every version and tombstone counts)
 *   "bloomkv.write-amplification"    table bytes written per user byte written
 *   "bloomkv.space-amplification"    table bytes per byte of the last level (tiered: oldest run)
 *   "bloomkv.read-amplification"     tables consulted per get
 *   "bloomkv.counter.<name>"         decimal; names: gets, key-hashes,
 *       filter-probes, filter-negatives, filter-false-positives,
 *       filter-corrupt, memtable-filter-negatives, blocks-read (data
 *       blocks read by gets, iterators and searches; not by compactions,
 *       see compaction-bytes-read), cache-hits,
 *       cache-misses, bytes-written, writes, syncs, flushes, write-stalls,
 *       write-slowdowns, tables-consulted, flush-bytes-written, compactions,
 *       trivial-moves, summary-rewrites (tables rewritten instead of
 *       moved into the bottom level, to give them the bottom's value
 *       summary), seek-compactions (compactions of a table that
 *       reads paid to look past, once writes had paused and no level was
 *       over its size),
 *       compaction-bytes-read, compaction-bytes-written, value-searches,
 *       value-index-updates, value-index-nodes-recomputed,
 *       value-index-update-micros, value-index-locked-micros (the part of
 *       index updates searches had to wait for), value-filters-unusable,
 *       value-candidates-proven (search results taken from the partition
 *       that named them, no newer source holding their key)
 *   "bloomkv.counters"               every counter, one "name value" line each
 *   "bloomkv.value-index"            the value index's shape, parameters and size ("" if none)
 *   "bloomkv.value-terms"            the recorded terms extractor ("words/1", "prefix:3/1"; "" if none
 *                                    or the caller's own without a name)
 *   "bloomkv.memtable-entries"       rows in the memtables (puts and deletions; after a read_only
 *                                    open, what the WAL replayed)
 *   "bloomkv.estimate-live-keys"     rows of the memtables and tables less twice each table's
 *                                    deletions (as RocksDB's estimate-num-keys; a key overwritten in
 *                                    two levels counts twice, a deletion still in a memtable counts
 *                                    as a row); opens every table
 *   "bloomkv.filter-memory"          bytes of key filters of open tables
 *   "bloomkv.value-index-memory"     bytes the value index keeps in memory (paged: the summaries and
 *                                    partition starts of open tables; NULL without an index) */
BKV_EXPORT char *bkv_property(bkv_db *db, const char *name);

/* This thread's last error message, kept per thread like errno (any
 * number of threads): with a db, the last error of a call on that db (""
 * if this thread's last error came from elsewhere); with NULL, the last
 * error of any call, including a failed bkv_open, bkv_check or
 * bkv_dump_table. Valid until this thread's next failing call. */
BKV_EXPORT const char *bkv_errmsg(bkv_db *db);

/* Write batches. */
/* A batch: writes collected in memory, applied by bkv_write at once. It
 * belongs to no database, is owned by its creator (free it with
 * bkv_batch_destroy; NULL does nothing) and is used by one thread at a
 * time. bkv_batch_create returns NULL when out of memory; clear empties a
 * batch for reuse. */
BKV_EXPORT bkv_batch *bkv_batch_create(void);
BKV_EXPORT void bkv_batch_destroy(bkv_batch *b);
BKV_EXPORT void bkv_batch_clear(bkv_batch *b);
/* Adds a put or a delete, copying the bytes; later operations on the same
 * key win. Errors (a message for bkv_errmsg(NULL)): BKV_INVALID (b NULL,
 * a NULL key or value with a length, a key or value over its maximum),
 * BKV_NOMEM (the batch is unchanged). */
BKV_EXPORT int bkv_batch_put(bkv_batch *b, const void *key, size_t klen, const void *val, size_t vlen);
BKV_EXPORT int bkv_batch_delete(bkv_batch *b, const void *key, size_t klen);
BKV_EXPORT uint32_t bkv_batch_count(const bkv_batch *b);
/* Adds every operation of src, in order, after dst's (LevelDB's
 * WriteBatch::Append); src is unchanged and may be dst. BKV_NOMEM (dst
 * unchanged) or BKV_INVALID (a NULL batch, or more than 2^32-1
 * operations). */
BKV_EXPORT int bkv_batch_append_batch(bkv_batch *dst, const bkv_batch *src);
/* Bytes the batch adds to the WAL (LevelDB's ApproximateSize); 0 for NULL. */
BKV_EXPORT size_t bkv_batch_approximate_size(const bkv_batch *b);

/* Offline inspection (the database must not be open elsewhere).
 *
 * bkv_check verifies every file of the database in directory path: CURRENT,
 * the manifest, every table it names (footer, index, properties, every
 * data block's checksum and entries, the filter) and every WAL. Each
 * problem is reported to fn as one line naming the file and offset.
 * Returns BKV_OK when nothing was found, BKV_CORRUPTION when a problem was
 * reported, or another error when the check itself could not run
 * (BKV_INVALID: no such directory, or one with neither a CURRENT nor a
 * table; BKV_BUSY: the database is open; the
 * reason in bkv_errmsg(NULL)). Takes a shared lock, so checks may run side
 * by side but never beside a writer. WAL damage that an open would refuse
 * or drop is reported whatever the wal_recovery mode. */
BKV_EXPORT int bkv_check(const char *path, void (*fn)(void *arg, const char *problem), void *arg);

/* bkv_dump_table's flags. */
#define BKV_DUMP_ENTRIES 1 /* every entry too */
#define BKV_DUMP_JSON 2    /* a JSON object, then (with entries) one JSON object a line per entry */

/* Writes a description of one table file through write: properties, key
 * filter, value filters and, with BKV_DUMP_ENTRIES, every entry. As text
 * (keys and values printed with C escapes), or with BKV_DUMP_JSON as one
 * JSON object on its first line and {"key","seq","type","value"} lines
 * after it (bytes outside printable ASCII as \u00XX, one code point a
 * byte); a damaged part reads {"damaged": reason}. Written in pieces of
 * text that end at no particular place. write returns 0, or non-zero to
 * stop the dump, which then fails with BKV_IOERROR. Errors: BKV_INVALID
 * (file or write NULL, an unknown flag), BKV_IOERROR (the file cannot be
 * read, or write failed), BKV_CORRUPTION (the table is damaged: what was
 * written so far stands), BKV_NOMEM; each described in bkv_errmsg(NULL). */
BKV_EXPORT int bkv_dump_table(const char *file, int flags,
                              int (*write)(void *arg, const char *text, size_t len), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* BLOOMKV_H */
