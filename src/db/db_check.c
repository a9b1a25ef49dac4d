/* Offline verification and dumping of database files (bkv_check,
 * bkv_dump_table), for `bloomkv check` and `bloomkv dump-sst`. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "db/db_int.h"
#include "db/filename.h"
#include "db/repair.h"
#include "db/version.h"
#include "db/version_set.h"
#include "valuesearch/table_values.h"
#include "db/write_batch.h"
#include "util/coding.h"
#include "util/ikey.h"
#include "util/iterator.h"

typedef struct checker {
    void (*fn)(void *arg, const char *problem);
    void *arg;
    int problems;
    int whole_values;   /* the manifest's value index indexes whole values */
    bkv_tree_version *live; /* the manifest's tables, replayed */
    uint64_t log_number;    /* the oldest WAL the manifest still needs */
    int has_log_number;
    int wal_marks;          /* the manifest's WALs are synced lazily (log_sync.c) */
    uint64_t newest_marked; /* the newest WAL holding a durable mark, or 0 */
} checker;

static void report(checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(checker *c, const char *fmt, ...) {
    char line[BKV_ERR_LEN + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->problems++;
    if (c->fn) c->fn(c->arg, line);
}

typedef struct part_check {
    const bkv_vf_set *vf;
    const uint64_t *bits;
    int whole_values;
    const bkv_filter *summary; /* version 2 blocks: it must hold every value too */
    uint64_t entries, missing, missing_summary;
    const uint8_t *tags;       /* the partition's value tags, one per entry in order; NULL: none */
    uint64_t ntags, wrong_tags;
} part_check;

static int check_part_entry(void *arg, const uint8_t *ikey, size_t ilen, const uint8_t *val, size_t vlen) {
    part_check *pc = arg;
    if (pc->tags) {
        int value = ilen >= BKV_IKEY_TRAILER && bkv_ikey_type(ikey, ilen) == BKV_TYPE_VALUE;
        uint16_t want = value ? bkv_vt_tag(bkv_vf_term_hash(&pc->vf->params, val, vlen)) : 0;
        pc->wrong_tags += pc->entries >= pc->ntags || bkv_get_u16(pc->tags + 2 * pc->entries) != want;
    }
    pc->entries++;
    if (pc->whole_values && ilen >= BKV_IKEY_TRAILER && bkv_ikey_type(ikey, ilen) == BKV_TYPE_VALUE) {
        uint64_t h = bkv_vf_term_hash(&pc->vf->params, val, vlen);
        bkv_vf_probe pr;
        bkv_vf_probe_from_hash(&pr, &pc->vf->params, h);
        pc->missing += !bkv_vf_test(pc->bits, &pr);
        pc->missing_summary += pc->summary && !bkv_filter_may_contain(pc->summary, h);
    }
    return 0;
}

/* The value tags, when the table has them: an index naming the value
 * filters' partitions, and for each a block whose counts are its data
 * blocks' entries. The tags themselves are compared with the entries by
 * check_part_entry. */
static int open_value_tags(checker *c, bkv_table *t, const char *path, const bkv_vf_set *vf, bkv_vt_index *tix) {
    bkv_err e = {{0}};
    int rc = bkv_vs_tags_index(t, tix, &e);
    if (rc == BKV_NOTFOUND) return 0;
    if (rc) {
        report(c, "%s (value searches read whole partitions instead)", e.msg);
        return 0;
    }
    int ok = tix->n == vf->nparts;
    for (uint32_t i = 0; ok && i < vf->nparts; i++)
        ok = tix->first_block[i] == vf->parts[i].first_block && tix->first_block[i + 1] == vf->parts[i].last_block + 1;
    bkv_handle th = {0, 0};
    if (!ok) {
        bkv_vs_tags_handle(t, &th);
        report(c, "%s: value tags index at offset %llu does not match the value filters' partitions", path,
               (unsigned long long)th.offset);
        bkv_vt_index_free(tix);
    }
    return ok;
}

/* Partition i's entries, block by block against its tags block's counts. */
static int scan_tagged_part(checker *c, bkv_table *t, const char *path, const bkv_vt_index *tix, uint32_t i,
                            part_check *pc, bkv_err *e) {
    uint8_t *tags;
    if (bkv_vs_tags_part(t, tix, i, &tags, e)) {
        report(c, "%s (value searches read the whole partition instead)", e->msg);
        return bkv_table_scan_blocks(t, tix->first_block[i], tix->first_block[i + 1] - 1, 0, NULL, check_part_entry,
                                     pc, e);
    }
    uint32_t nb = tix->first_block[i + 1] - tix->first_block[i];
    pc->tags = tags + 4 * (size_t)nb;
    pc->ntags = (tix->size[i] - 4 * (size_t)nb) / 2;
    int rc = 0;
    uint32_t bad_counts = 0;
    for (uint32_t b = 0; b < nb && !rc; b++) {
        uint64_t before = pc->entries;
        rc = bkv_table_scan_blocks(t, tix->first_block[i] + b, tix->first_block[i] + b, 0, NULL, check_part_entry, pc, e);
        bad_counts += !rc && pc->entries - before != bkv_get_u32(tags + 4 * (size_t)b);
    }
    if (!rc && (bad_counts || pc->wrong_tags))
        report(c, "%s: value tags of partition %u at offset %llu: %u block counts and %llu tags do not match the "
                  "entries (searches could skip a block holding a value)",
               path, i, (unsigned long long)tix->offset[i], bad_counts, (unsigned long long)pc->wrong_tags);
    pc->tags = NULL;
    free(tags);
    return rc;
}

/* Each partition holds the entries its directory says, and (for whole
 * values) its filter holds every value in it, and its tags every entry's:
 * a search could miss none. */
static void check_value_filters(checker *c, bkv_table *t, const char *path) {
    bkv_handle vh;
    if (!bkv_vs_filter_handle(t, &vh)) return;
    bkv_vf_set vf;
    bkv_err e = {{0}};
    if (bkv_vs_table_filters(t, &vf, &e)) {
        report(c, "%s (value searches scan the whole table instead)", e.msg);
        return;
    }
    bkv_filter *summary = NULL;
    int src = bkv_vs_summary(t, &summary, &e);
    if (src && src != BKV_NOTFOUND) report(c, "%s (value searches read every row of the table instead)", e.msg);
    bkv_vt_index tix;
    int tagged = open_value_tags(c, t, path, &vf, &tix);
    uint64_t missing_summary = 0;
    for (uint32_t i = 0; i < vf.nparts; i++) {
        part_check pc = {&vf, bkv_vf_part_bits(&vf, i), c->whole_values, summary, 0, 0, 0, NULL, 0, 0};
        int rc = tagged ? scan_tagged_part(c, t, path, &tix, i, &pc, &e)
                        : bkv_table_scan_blocks(t, vf.parts[i].first_block, vf.parts[i].last_block, 0, NULL,
                                                check_part_entry, &pc, &e);
        if (rc) break; /* the data block problem is reported by the entry scan */
        if (pc.entries != vf.parts[i].entries)
            report(c, "%s: value filter partition %u covers %llu entries, its directory says %u", path, i,
                   (unsigned long long)pc.entries, vf.parts[i].entries);
        if (pc.missing)
            report(c, "%s: value filter partition %u lacks %llu of its values (searches would miss them)", path, i,
                   (unsigned long long)pc.missing);
        missing_summary += pc.missing_summary;
    }
    if (missing_summary)
        report(c, "%s: value summary lacks %llu of the table's values (searches would miss them)", path,
               (unsigned long long)missing_summary);
    if (tagged) bkv_vt_index_free(&tix);
    bkv_filter_destroy(summary);
    bkv_vf_set_free(&vf);
}

/* Reads every entry of a table in order, checking order and types. */
static void check_table(checker *c, const char *path, uint64_t number) {
    bkv_table_stats st = {0};
    bkv_table *t;
    bkv_err e = {{0}};
    if (bkv_table_open(bkv_env_posix(), path, number, NULL, &st, &t, &e)) {
        report(c, "%s", e.msg);
        return;
    }
    const bkv_table_props *p = bkv_table_properties(t);
    int range_damaged = p->range_filter_bytes && !bkv_table_has_range_filter(t);
    if (st.filter_corrupt > (uint64_t)range_damaged)
        report(c, "%s: filter block damaged (reads will treat it as \"maybe\")", path);
    if (range_damaged)
        report(c, "%s: range filter block at offset %llu damaged (range reads will treat it as \"maybe\")", path,
               (unsigned long long)p->range_filter_offset);
    for (uint32_t i = 0; i < bkv_table_filter_partitions(t); i++) {
        bkv_filter *f;
        if (bkv_table_filter_partition(t, i, &f, &e)) report(c, "%s (reads will treat it as \"maybe\")", e.msg);
        bkv_filter_destroy(f);
    }
    bkv_ikey_iter *it;
    if (bkv_table_iter_new(t, BKV_READ_BULK, NULL, &it)) {
        bkv_table_close(t);
        report(c, "%s: out of memory", path);
        return;
    }
    bkv_buf prev;
    bkv_buf_init(&prev);
    uint64_t n = 0, dels = 0, keys = 0, range_missing = 0;
    int stopped = 0;
    for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it), n++) {
        size_t kl;
        const uint8_t *k = bkv_ikey_iter_key(it, &kl);
        if (kl < BKV_IKEY_TRAILER) {
            report(c, "%s: entry %llu has a key shorter than its trailer", path, (unsigned long long)n);
            stopped = 1;
            break;
        }
        unsigned type = bkv_ikey_type(k, kl);
        if (type != BKV_TYPE_VALUE && type != BKV_TYPE_DELETION)
            report(c, "%s: entry %llu has unknown type %u", path, (unsigned long long)n, type);
        dels += type == BKV_TYPE_DELETION;
        int new_key = !prev.len || bkv_user_key_compare(prev.data, prev.len - BKV_IKEY_TRAILER, k, kl - BKV_IKEY_TRAILER) != 0;
        keys += new_key;
        /* A range read trusts the range filter's "no": it must hold every key. */
        range_missing += new_key && !bkv_table_range_may_intersect(t, k, kl - BKV_IKEY_TRAILER, k, kl - BKV_IKEY_TRAILER);
        if (prev.len && bkv_ikey_compare(prev.data, prev.len, k, kl) >= 0)
            report(c, "%s: entry %llu is out of order", path, (unsigned long long)n);
        if (bkv_buf_set(&prev, k, kl)) {
            report(c, "%s: cannot check past entry %llu: out of memory", path, (unsigned long long)n);
            stopped = 1;
            break;
        }
    }
    if (bkv_ikey_iter_status(it, &e)) report(c, "%s", e.msg);
    if (range_missing)
        report(c, "%s: range filter lacks %llu of the table's keys (range reads would skip them)", path,
               (unsigned long long)range_missing);
    if (!stopped && !bkv_ikey_iter_status(it, NULL) && (p->num_entries != n || p->num_deletions != dels))
        report(c, "%s: properties say %llu entries, %llu deletions; found %llu, %llu", path,
               (unsigned long long)p->num_entries, (unsigned long long)p->num_deletions, (unsigned long long)n,
               (unsigned long long)dels);
    /* Searches by value trust it: one version per key lets a result skip its re-read. */
    if (!stopped && !bkv_ikey_iter_status(it, NULL) && p->num_keys && p->num_keys != keys)
        report(c, "%s: properties say %llu distinct keys; found %llu", path, (unsigned long long)p->num_keys,
               (unsigned long long)keys);
    bkv_buf_free(&prev);
    bkv_ikey_iter_destroy(it);
    check_value_filters(c, t, path);
    bkv_table_close(t);
}

/* newest: the log may end in a torn write or without an end record (the
 * manifest; the newest WAL holding anything; WALs the manifest no longer
 * needs, which the next open deletes). number: a WAL's number. Returns the
 * number of the next WAL as this one's end record names it (0: none
 * named). */
static uint64_t check_log(checker *c, const char *path, uint64_t number, int newest, int is_manifest) {
    if (is_manifest) c->whole_values = 0;
    uint8_t *data;
    size_t len;
    bkv_err e = {{0}};
    uint64_t next_wal = 0;
    if (bkv_env_read_all(bkv_env_posix(), path, &data, &len, &e)) {
        report(c, "%s", e.msg);
        return 0;
    }
    /* Cut by a power loss before it was synced: no later WAL is marked. */
    int unsynced = !is_manifest && !newest && c->wal_marks && number >= c->newest_marked;
    bkv_log_reader r;
    bkv_log_reader_init(&r, path, data, len, newest || unsynced);
    int rc, ended = 0;
    while ((rc = bkv_log_read_record(&r, &e)) == BKV_OK) {
        if (ended) report(c, "%s: record at offset %llu follows the log's end record", path, (unsigned long long)r.record_offset);
        if (is_manifest) {
            bkv_version_edit ed;
            if (bkv_edit_decode(&ed, r.record.data, r.record.len, path, r.record_offset, &e) == BKV_OK) {
                if (ed.has_value_index) c->whole_values = ed.value_index.terms_name[0] == 0;
                if (ed.has_log_number) c->log_number = ed.log_number, c->has_log_number = 1;
                if (ed.wal_marks) c->wal_marks = 1;
                bkv_tree_version *next;
                if (c->live && bkv_tree_version_apply(c->live, &ed, &next) == BKV_OK) {
                    bkv_tree_version_unref(c->live);
                    c->live = next;
                } else if (c->live) {
                    report(c, "%s: record at offset %llu does not apply to the tables before it", path,
                           (unsigned long long)r.record_offset);
                }
                bkv_edit_free(&ed);
            } else {
                report(c, "%s", e.msg);
            }
        } else if (bkv_batch_is_log_end(r.record.data, r.record.len)) {
            ended = 1;
            next_wal = bkv_log_end_next(r.record.data, r.record.len);
        } else if (bkv_batch_is_log_mark(r.record.data, r.record.len)) {
        } else if (bkv_batch_iterate(r.record.data, r.record.len, NULL, NULL, path, r.record_offset, &e)) {
            report(c, "%s", e.msg);
        }
    }
    if (rc != BKV_NOTFOUND) report(c, "%s", e.msg);
    else if (unsynced && !ended)
        report(c, "%s: cut short at offset %llu before it was synced, by a power loss (no later WAL holds a "
               "durable mark): an open keeps the writes before it and drops the later WALs", path,
               (unsigned long long)(len - r.dropped_bytes));
    else if (!is_manifest && !newest && !ended)
        report(c, "%s: truncated at offset %llu (a newer log exists, but this one lacks its end record)", path,
               (unsigned long long)len);
    else if (r.dropped_bytes) report(c, "%s: torn tail of %llu bytes at the end (dropped at open)", path, (unsigned long long)r.dropped_bytes);
    bkv_log_reader_free(&r);
    free(data);
    return next_wal;
}

typedef struct live_wal {
    uint64_t number, next; /* next: as its end record names it, or 0 */
    int empty;             /* no bytes: checked once it is known to be named */
    int newest;            /* check_log's newest */
} live_wal;

static int cmp_live_wal(const void *a, const void *b) {
    uint64_t x = ((const live_wal *)a)->number, y = ((const live_wal *)b)->number;
    return x < y ? -1 : x > y;
}

/* A WAL missing from between two live ones lost its writes; the end
 * record of the one before it names it. An empty WAL that neither an end
 * record nor the manifest names is a spare a memtable switch overtook
 * (log_sync.c), left by a crash: it holds nothing, and is passed over as
 * recovery does. */
static void check_wal_chain(checker *c, const char *dir, live_wal *w, size_t n) {
    qsort(w, n, sizeof *w, cmp_live_wal);
    char p[BKV_PATH_MAX];
    size_t last = n; /* the previous WAL that counts */
    for (size_t i = 0; i < n; i++) {
        int named = (last < n && w[last].next == w[i].number) || w[i].number == c->log_number;
        if (w[i].empty && !named) continue;
        bkv_wal_name(p, dir, w[i].number);
        if (w[i].empty) (void)check_log(c, p, w[i].number, w[i].newest, 0); /* named: cut short unless newest */
        if (last < n && w[last].next && !named) {
            bkv_wal_name(p, dir, w[last].next);
            if (c->wal_marks && c->newest_marked < w[last].next) /* as recovery judges it */
                report(c, "%s: lost before its name was synced, by a power loss (no later WAL holds a durable "
                       "mark): an open keeps the writes before it and drops %06llu.log and later WALs", p,
                       (unsigned long long)w[i].number);
            else
                report(c, "%s: missing (offset 0): %06llu.log's end record names it as next, and %06llu.log follows",
                       p, (unsigned long long)w[last].number, (unsigned long long)w[i].number);
        }
        last = i;
    }
}

/* Every table the manifest lists, and the oldest WAL it still needs, must
 * exist: a lost file is lost data that no checksum can notice. */
static void check_files_present(checker *c, const char *dir, const char *manifest) {
    const bkv_env *env = bkv_env_posix();
    char p[BKV_PATH_MAX];
    for (int level = 0; level < BKV_MAX_LEVELS; level++)
        for (size_t i = 0; i < c->live->nfiles[level]; i++) {
            bkv_table_name(p, dir, c->live->files[level][i]->number);
            if (!env->file_exists(env, p)) report(c, "%s: missing (%s lists it at level %d)", p, manifest, level);
        }
    if (!c->has_log_number) {
        report(c, "%s/%s: no edit names the oldest live WAL (offset 0)", dir, manifest);
        return;
    }
    bkv_wal_name(p, dir, c->log_number);
    if (!env->file_exists(env, p)) report(c, "%s: missing (%s names it as the oldest live WAL)", p, manifest);
}

static int check_locked(const char *path, checker *c);

/* A shared lock: checks may run side by side, but never beside a writer,
 * whose unsynced tail would read as damage. */
int bkv_check(const char *path, void (*fn)(void *arg, const char *problem), void *arg) {
    bkv_err e = {{0}};
    if (!path || !*path) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_check: no path given"});
    if (strlen(path) > BKV_PATH_MAX - 64)
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_check: path too long"});
    const bkv_env *env = bkv_env_posix();
    struct stat st;
    if (stat(path, &st) != 0) {
        bkv_fail(&e, BKV_INVALID, "%s: %s", path, errno == ENOENT ? "does not exist" : strerror(errno));
        return bkv_db_error(NULL, BKV_INVALID, &e);
    }
    if (!S_ISDIR(st.st_mode)) return bkv_db_error(NULL, bkv_fail(&e, BKV_INVALID, "%s: not a directory", path), &e);
    char current[BKV_PATH_MAX];
    bkv_current_name(current, path);
    /* Nothing of a database: a wrong path, not damage. (Tables without a
     * CURRENT are a database that lost it: checked, and reported.) */
    if (!env->file_exists(env, current) && !bkv_count_tables(env, path, NULL, 0))
        return bkv_db_error(NULL, bkv_fail(&e, BKV_INVALID, "%s: no database here (no CURRENT, no table)", path), &e);
    void *lock;
    int rc = env->lock_dir(env, path, 0644, 1, &lock, &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    checker c = {.fn = fn, .arg = arg};
    rc = check_locked(path, &c);
    env->unlock_dir(env, lock);
    if (rc == BKV_CORRUPTION)
        bkv_db_error(NULL, rc, &(bkv_err){"problems found (each was reported)"});
    return rc;
}

static int check_locked(const char *path, checker *c) {
    const bkv_env *env = bkv_env_posix();
    char p[BKV_PATH_MAX];
    bkv_err e = {{0}};
    uint64_t manifest = 0;
    int rc = bkv_read_current(env, path, &manifest, &e);
    if (rc) {
        report(c, "%s", e.msg);
        if (rc != BKV_CORRUPTION) return BKV_CORRUPTION; /* unreadable: nothing more to check */
    }
    char **names;
    size_t n;
    if (env->list_dir(env, path, &names, &n, &e)) {
        report(c, "%s", e.msg);
        return BKV_CORRUPTION;
    }
    if (!(c->live = bkv_tree_version_new())) {
        bkv_env_free_list(names, n);
        return BKV_NOMEM;
    }
    int manifest_found = 0;
    uint64_t newest_log = 0; /* the newest WAL holding anything */
    live_wal *wals = malloc((n ? n : 1) * sizeof *wals); /* NULL: the chain goes unchecked */
    size_t nwals = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t num;
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (bkv_parse_file_name(names[i], &num) == BKV_FILE_LOG && num > newest_log && stat(p, &st) == 0 && st.st_size > 0)
            newest_log = num;
    }
    /* The manifest first: it says what the tables' value filters hold, and
     * which tables are live. Others are leftovers of an interrupted flush or
     * compaction, deleted at the next open: not checked while the manifest
     * is sound. */
    int manifest_sound = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            uint64_t num;
            int kind = bkv_parse_file_name(names[i], &num);
            snprintf(p, sizeof p, "%s/%s", path, names[i]);
            if (pass == 0 && kind == BKV_FILE_MANIFEST && num == manifest) {
                int before = c->problems;
                (void)check_log(c, p, num, 1, 1);
                check_files_present(c, path, names[i]);
                manifest_found = 1;
                manifest_sound = c->problems == before;
            }
            if (pass == 1 && kind == BKV_FILE_TABLE && (!manifest_sound || bkv_tree_version_has_table(c->live, num)))
                check_table(c, p, num);
            if (pass == 1 && kind == BKV_FILE_LOG && c->wal_marks && num > c->newest_marked &&
                bkv_wal_has_mark(env, p))
                c->newest_marked = num;
        }
    /* WALs last: whether one was cut by a power loss depends on the marks
     * of the others. */
    for (size_t i = 0; i < n; i++) {
        uint64_t num;
        if (bkv_parse_file_name(names[i], &num) != BKV_FILE_LOG) continue;
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        int newest = num >= newest_log || num < c->log_number;
        struct stat st;
        int empty = num >= c->log_number && wals && stat(p, &st) == 0 && st.st_size == 0;
        uint64_t next = empty ? 0 : check_log(c, p, num, newest, 0);
        if (num >= c->log_number && wals) wals[nwals++] = (live_wal){num, next, empty, newest};
    }
    if (wals) check_wal_chain(c, path, wals, nwals);
    free(wals);
    if (manifest && !manifest_found) {
        bkv_manifest_name(p, path, manifest);
        report(c, "%s: missing (CURRENT names it)", p);
    }
    bkv_env_free_list(names, n);
    bkv_tree_version_unref(c->live);
    return c->problems ? BKV_CORRUPTION : BKV_OK;
}

static void put_escaped(FILE *out, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') fputc(p[i], out);
        else fprintf(out, "\\x%02x", p[i]);
    }
}

/* A JSON string of bytes: printable ASCII as is, anything else as \u00XX
 * (one code point per byte, so that every string parses). */
static void put_json(FILE *out, const uint8_t *p, size_t n) {
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\') fprintf(out, "\\%c", p[i]);
        else if (p[i] >= 0x20 && p[i] < 0x7f) fputc(p[i], out);
        else fprintf(out, "\\u%04x", p[i]);
    }
    fputc('"', out);
}

static void put_json_text(FILE *out, const char *text) { put_json(out, (const uint8_t *)text, strlen(text)); }

/* What a table's description says, gathered once and printed as text or
 * as JSON. A part that could not be read keeps its reason in *_err. */
typedef struct table_summary {
    const bkv_table_props *p;
    int filter_damaged;          /* the whole filter block */
    int has_filter;
    bkv_filter_info filter;      /* the filter, or the first partition when partitioned */
    uint32_t partitions, damaged_partitions;
    int has_vf;
    char vf_err[BKV_ERR_LEN];    /* non-empty: the value filters are damaged */
    bkv_vf_params vparams;
    uint32_t vf_parts;
    uint64_t vf_filter_bytes, vf_block_bytes;
    int range_filter;            /* 0: none; 1: there; -1: damaged (read as "maybe") */
    double vf_bits_set;          /* percent */
    int has_summary;
    char summary_err[BKV_ERR_LEN];
    bkv_filter_info summary;
    int has_tags;
    char tags_err[BKV_ERR_LEN];
    uint32_t tag_parts;
    uint64_t tag_bytes;
} table_summary;

static void summarize(bkv_table *t, uint64_t filter_corrupt, table_summary *ts) {
    memset(ts, 0, sizeof *ts);
    const bkv_table_props *p = ts->p = bkv_table_properties(t);
    bkv_err e = {{0}};
    ts->range_filter = !p->range_filter_bytes ? 0 : bkv_table_has_range_filter(t) ? 1 : -1;
    ts->filter_damaged = filter_corrupt > (ts->range_filter < 0);
    ts->has_filter = !filter_corrupt && p->filter_bytes;
    if (ts->has_filter && (ts->partitions = bkv_table_filter_partitions(t))) {
        /* The first partition stands for the type; every partition is read to count. */
        for (uint32_t i = 0; i < ts->partitions; i++) {
            bkv_filter *f;
            if (bkv_table_filter_partition(t, i, &f, &e)) {
                ts->damaged_partitions++;
                continue;
            }
            if (!ts->filter.encoded_bytes) bkv_filter_get_info(f, &ts->filter);
            bkv_filter_destroy(f);
        }
    } else if (ts->has_filter) {
        bkv_filter_get_info(bkv_table_filter(t), &ts->filter);
    }
    bkv_handle vh, th;
    if (!bkv_vs_filter_handle(t, &vh)) return;
    ts->has_vf = 1;
    ts->vf_block_bytes = vh.size;
    bkv_vf_set vf;
    if (bkv_vs_table_filters(t, &vf, &e)) {
        snprintf(ts->vf_err, sizeof ts->vf_err, "%s", e.msg);
    } else {
        uint64_t ones = 0, words = (uint64_t)vf.nparts * bkv_vf_words(&vf.params);
        for (uint64_t i = 0; i < words; i++) ones += (uint64_t)__builtin_popcountll(vf.bits[i]);
        ts->vparams = vf.params;
        ts->vf_parts = vf.nparts;
        ts->vf_filter_bytes = words * 8;
        ts->vf_bits_set = words ? 100.0 * (double)ones / (double)(words * 64) : 0.0;
        bkv_vf_set_free(&vf);
        bkv_filter *summary;
        int src = bkv_vs_summary(t, &summary, &e);
        if (src == BKV_OK) {
            ts->has_summary = 1;
            bkv_filter_get_info(summary, &ts->summary);
            bkv_filter_destroy(summary);
        } else if (src != BKV_NOTFOUND) {
            ts->has_summary = 1;
            snprintf(ts->summary_err, sizeof ts->summary_err, "%s", e.msg);
        }
    }
    bkv_vt_index tix;
    int trc = bkv_vs_tags_index(t, &tix, &e);
    if (trc == BKV_OK) {
        ts->has_tags = 1;
        ts->tag_parts = tix.n;
        ts->tag_bytes = bkv_vs_tags_handle(t, &th) ? th.size : 0;
        for (uint32_t i = 0; i < tix.n; i++) ts->tag_bytes += tix.size[i];
        bkv_vt_index_free(&tix);
    } else if (trc != BKV_NOTFOUND) {
        ts->has_tags = 1;
        snprintf(ts->tags_err, sizeof ts->tags_err, "%s", e.msg);
    }
}

static void print_text(FILE *out, const char *file, const table_summary *ts) {
    const bkv_table_props *p = ts->p;
    fprintf(out, "table %s\n", file);
    fprintf(out, "  entries %llu (deletions %llu), data blocks %llu, data bytes %llu\n",
            (unsigned long long)p->num_entries, (unsigned long long)p->num_deletions,
            (unsigned long long)p->num_data_blocks, (unsigned long long)p->data_bytes);
    fprintf(out, "  raw key bytes %llu, raw value bytes %llu, compression %d, created %llu\n",
            (unsigned long long)p->raw_key_bytes, (unsigned long long)p->raw_value_bytes, p->compression,
            (unsigned long long)p->creation_time);
    if (p->smallest && p->largest) {
        fprintf(out, "  smallest ");
        put_escaped(out, p->smallest, p->smallest_len - BKV_IKEY_TRAILER);
        fprintf(out, " @%llu\n  largest  ", (unsigned long long)bkv_ikey_seq(p->smallest, p->smallest_len));
        put_escaped(out, p->largest, p->largest_len - BKV_IKEY_TRAILER);
        fprintf(out, " @%llu\n", (unsigned long long)bkv_ikey_seq(p->largest, p->largest_len));
    }
    const bkv_filter_info *fi = &ts->filter;
    fprintf(out, "  filter: ");
    if (ts->filter_damaged) fprintf(out, "DAMAGED (read as \"maybe\")\n");
    else if (!ts->has_filter) fprintf(out, "none\n");
    else if (ts->partitions)
        fprintf(out, "%s, k %u, %u partitions%s, %llu bytes, %.2f bits/key, model fpr %.4f%%\n",
                fi->encoded_bytes ? bkv_filter_type_name(fi->type) : "?", fi->k, ts->partitions,
                ts->damaged_partitions ? " (some DAMAGED, read as \"maybe\")" : "", (unsigned long long)p->filter_bytes,
                p->num_entries ? 8.0 * (double)p->filter_bytes / (double)p->num_entries : 0.0,
                (double)p->filter_fpr_ppb / 1e7);
    else
        fprintf(out, "%s, k %u, %llu keys, %llu positions, %.2f bits/key, %zu bytes, model fpr %.4f%%\n",
                bkv_filter_type_name(fi->type), fi->k, (unsigned long long)fi->num_keys, (unsigned long long)fi->num_bits,
                fi->bits_per_key, fi->encoded_bytes, 100 * fi->expected_fpr);
    if (ts->range_filter)
        fprintf(out, "  range filter: %s%llu bytes, %.2f bits/key, keys read from byte %llu\n",
                ts->range_filter < 0 ? "DAMAGED (read as \"maybe\"), " : "", (unsigned long long)p->range_filter_bytes,
                p->num_keys ? 8.0 * (double)p->range_filter_bytes / (double)p->num_keys : 0.0,
                (unsigned long long)p->range_filter_skip);
    if (ts->has_vf && *ts->vf_err) {
        fprintf(out, "  value filters: DAMAGED (searches scan the whole table): %s\n", ts->vf_err);
    } else if (ts->has_vf) {
        fprintf(out,
                "  value filters: %u partitions (P %u), m %u bits, k %u%s, %llu bytes of filters, block %llu bytes, "
                "%.1f%% of bits set\n",
                ts->vf_parts, ts->vparams.partition_entries, ts->vparams.m_bits, ts->vparams.k,
                ts->vparams.words == BKV_VF_TWO_WORDS ? " in two words" : "", (unsigned long long)ts->vf_filter_bytes,
                (unsigned long long)ts->vf_block_bytes, ts->vf_bits_set);
    }
    if (ts->has_summary && *ts->summary_err)
        fprintf(out, "  value summary: DAMAGED (searches read the rows): %s\n", ts->summary_err);
    else if (ts->has_summary)
        fprintf(out, "  value summary: %s, %llu distinct terms, %zu bytes, %.2f bits/term, model fpr %.4f%%\n",
                bkv_filter_type_name(ts->summary.type), (unsigned long long)ts->summary.num_keys,
                ts->summary.encoded_bytes, ts->summary.bits_per_key, 100 * ts->summary.expected_fpr);
    if (ts->has_tags && *ts->tags_err)
        fprintf(out, "  value tags: DAMAGED (searches read whole partitions): %s\n", ts->tags_err);
    else if (ts->has_tags)
        fprintf(out, "  value tags: %u partitions, %llu bytes (%.2f bytes/entry)\n", ts->tag_parts,
                (unsigned long long)ts->tag_bytes,
                p->num_entries ? (double)ts->tag_bytes / (double)p->num_entries : 0.0);
}

/* One JSON object: the fields of the text form, named; a damaged part is
 * {"damaged": reason}. */
static void print_json(FILE *out, const char *file, const table_summary *ts) {
    const bkv_table_props *p = ts->p;
    fprintf(out, "{\"table\":");
    put_json_text(out, file);
    fprintf(out, ",\"entries\":%llu,\"deletions\":%llu,\"data_blocks\":%llu,\"data_bytes\":%llu,"
                 "\"raw_key_bytes\":%llu,\"raw_value_bytes\":%llu,\"compression\":%d,\"created\":%llu",
            (unsigned long long)p->num_entries, (unsigned long long)p->num_deletions,
            (unsigned long long)p->num_data_blocks, (unsigned long long)p->data_bytes,
            (unsigned long long)p->raw_key_bytes, (unsigned long long)p->raw_value_bytes, p->compression,
            (unsigned long long)p->creation_time);
    if (p->smallest && p->largest) {
        fprintf(out, ",\"smallest\":");
        put_json(out, p->smallest, p->smallest_len - BKV_IKEY_TRAILER);
        fprintf(out, ",\"smallest_seq\":%llu,\"largest\":", (unsigned long long)bkv_ikey_seq(p->smallest, p->smallest_len));
        put_json(out, p->largest, p->largest_len - BKV_IKEY_TRAILER);
        fprintf(out, ",\"largest_seq\":%llu", (unsigned long long)bkv_ikey_seq(p->largest, p->largest_len));
    }
    const bkv_filter_info *fi = &ts->filter;
    fprintf(out, ",\"filter\":");
    if (ts->filter_damaged) fprintf(out, "{\"damaged\":\"read as maybe\"}");
    else if (!ts->has_filter) fprintf(out, "null");
    else
        fprintf(out, "{\"type\":\"%s\",\"k\":%u,\"partitions\":%u,\"damaged_partitions\":%u,\"bytes\":%llu,"
                     "\"bits_per_key\":%.3f,\"model_fpr\":%.6g}",
                fi->encoded_bytes ? bkv_filter_type_name(fi->type) : "?", fi->k, ts->partitions,
                ts->damaged_partitions, (unsigned long long)p->filter_bytes,
                ts->partitions ? (p->num_entries ? 8.0 * (double)p->filter_bytes / (double)p->num_entries : 0.0)
                               : fi->bits_per_key,
                ts->partitions ? (double)p->filter_fpr_ppb / 1e9 : fi->expected_fpr);
    if (ts->range_filter)
        fprintf(out, ",\"range_filter\":{\"damaged\":%s,\"bytes\":%llu,\"bits_per_key\":%.3f,\"skip\":%llu}",
                ts->range_filter < 0 ? "true" : "false", (unsigned long long)p->range_filter_bytes,
                p->num_keys ? 8.0 * (double)p->range_filter_bytes / (double)p->num_keys : 0.0,
                (unsigned long long)p->range_filter_skip);
    if (ts->has_vf) {
        fprintf(out, ",\"value_filters\":");
        if (*ts->vf_err) {
            fprintf(out, "{\"damaged\":");
            put_json_text(out, ts->vf_err);
            fputc('}', out);
        } else {
            fprintf(out, "{\"partitions\":%u,\"partition_entries\":%u,\"m_bits\":%u,\"k\":%u,\"two_words\":%s,"
                         "\"filter_bytes\":%llu,\"block_bytes\":%llu,\"bits_set_percent\":%.2f}",
                    ts->vf_parts, ts->vparams.partition_entries, ts->vparams.m_bits, ts->vparams.k,
                    ts->vparams.words == BKV_VF_TWO_WORDS ? "true" : "false", (unsigned long long)ts->vf_filter_bytes,
                    (unsigned long long)ts->vf_block_bytes, ts->vf_bits_set);
        }
    }
    if (ts->has_summary) {
        fprintf(out, ",\"value_summary\":");
        if (*ts->summary_err) {
            fprintf(out, "{\"damaged\":");
            put_json_text(out, ts->summary_err);
            fputc('}', out);
        } else {
            fprintf(out, "{\"type\":\"%s\",\"terms\":%llu,\"bytes\":%zu,\"bits_per_term\":%.3f,\"model_fpr\":%.6g}",
                    bkv_filter_type_name(ts->summary.type), (unsigned long long)ts->summary.num_keys,
                    ts->summary.encoded_bytes, ts->summary.bits_per_key, ts->summary.expected_fpr);
        }
    }
    if (ts->has_tags) {
        fprintf(out, ",\"value_tags\":");
        if (*ts->tags_err) {
            fprintf(out, "{\"damaged\":");
            put_json_text(out, ts->tags_err);
            fputc('}', out);
        } else {
            fprintf(out, "{\"partitions\":%u,\"bytes\":%llu}", ts->tag_parts, (unsigned long long)ts->tag_bytes);
        }
    }
    fprintf(out, "}\n");
}

static int dump_table(const char *file, int flags, FILE *out) {
    bkv_table_stats st = {0};
    bkv_table *t;
    bkv_err e = {{0}};
    int rc = bkv_table_open(bkv_env_posix(), file, 1, NULL, &st, &t, &e);
    if (rc) return bkv_db_error(NULL, rc, &e);
    int json = flags & BKV_DUMP_JSON;
    table_summary ts;
    summarize(t, st.filter_corrupt, &ts);
    if (json) print_json(out, file, &ts);
    else print_text(out, file, &ts);
    if (flags & BKV_DUMP_ENTRIES) {
        bkv_ikey_iter *it;
        if (bkv_table_iter_new(t, BKV_READ_BULK, NULL, &it) == BKV_OK) {
            for (bkv_ikey_iter_first(it); bkv_ikey_iter_valid(it); bkv_ikey_iter_next(it)) {
                size_t kl, vl;
                const uint8_t *k = bkv_ikey_iter_key(it, &kl), *v = bkv_ikey_iter_value(it, &vl);
                bkv_parsed_ikey pk = bkv_ikey_parse(k, kl);
                int value = pk.type == BKV_TYPE_VALUE;
                if (json) {
                    fprintf(out, "{\"key\":");
                    put_json(out, pk.ukey, pk.ulen);
                    fprintf(out, ",\"seq\":%llu,\"type\":\"%s\"", (unsigned long long)pk.seq, value ? "value" : "deletion");
                    if (value) {
                        fprintf(out, ",\"value\":");
                        put_json(out, v, vl);
                    }
                    fprintf(out, "}\n");
                    continue;
                }
                fprintf(out, "  '");
                put_escaped(out, pk.ukey, pk.ulen);
                fprintf(out, "' @%llu %s", (unsigned long long)pk.seq, value ? "=> '" : "deleted");
                if (value) {
                    put_escaped(out, v, vl);
                    fputc('\'', out);
                }
                fputc('\n', out);
            }
            if (bkv_ikey_iter_status(it, &e)) rc = bkv_db_error(NULL, BKV_CORRUPTION, &e);
            bkv_ikey_iter_destroy(it);
        }
    }
    bkv_table_close(t);
    return rc;
}

/* The description is printed with stdio into a stream whose writes go to
 * the caller's function, so no stdio type crosses the public header. */
typedef struct dump_sink {
    int (*write)(void *arg, const char *text, size_t len);
    void *arg;
} dump_sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
    const dump_sink *sink = cookie;
    return sink->write(sink->arg, buf, n) ? -1 : (ssize_t)n;
}

int bkv_dump_table(const char *file, int flags, int (*write)(void *arg, const char *text, size_t len), void *arg) {
    if (!file || !write) return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_dump_table: file or write is NULL"});
    if (flags & ~(BKV_DUMP_ENTRIES | BKV_DUMP_JSON))
        return bkv_db_error(NULL, BKV_INVALID, &(bkv_err){"bkv_dump_table: unknown flags"});
    dump_sink sink = {write, arg};
    FILE *out = fopencookie(&sink, "w", (cookie_io_functions_t){.write = sink_write});
    if (!out) return bkv_db_error(NULL, BKV_NOMEM, NULL);
    int rc = dump_table(file, flags, out);
    /* A description cut short by its output (a full disk, a closed pipe)
     * is an error, not a table that reads short. */
    int cut = fflush(out) != 0 || ferror(out);
    fclose(out);
    if (cut && rc == BKV_OK)
        rc = bkv_db_error(NULL, BKV_IOERROR, &(bkv_err){"bkv_dump_table: could not write the description"});
    return rc;
}

int bkv_check_one_table(const char *path, uint64_t number, int whole_values, void (*fn)(void *arg, const char *problem),
                        void *arg) {
    checker c = {.fn = fn, .arg = arg, .whole_values = whole_values};
    check_table(&c, path, number);
    return c.problems;
}
