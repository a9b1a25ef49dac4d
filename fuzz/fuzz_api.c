/* Fuzz target, differential: the input is a program of database operations
 * (put, delete, batch, get, scan, find by value, flush, compact, reopen) run
 * against bloomkv and against an in-memory model; any difference aborts.
 * Tiny memtables and tables make flushes and compactions frequent. */
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bloomkv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NKEYS 64

static char dir[256];

static void fail(const char *what, int k) {
    fprintf(stderr, "fuzz_api: %s (key %d)\n", what, k);
    abort();
}

static void key_of(char *b, int k) { snprintf(b, 16, "key%03d", k); }
static void val_of(char *b, int v) { snprintf(b, 48, "value-%03d-%s", v, v % 2 ? "odd" : "even-and-longer"); }

typedef struct found {
    int keys[NKEYS];
    int n;
} found;

static int on_found(void *arg, const void *key, size_t klen, const void *val, size_t vlen) {
    (void)val, (void)vlen;
    found *f = arg;
    if (klen != 6 || f->n >= NKEYS) fail("find_value returned a bad key", -1);
    f->keys[f->n++] = atoi((const char *)key + 3);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Without a shell per input: the directory is recreated for every one. */
static void remove_dir(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static bkv_db *open_db(int shape) {
    bkv_options o;
    bkv_options_init(&o);
    o.write_buffer_size = 1024;
    o.target_file_size = 2048;
    o.max_bytes_for_level_base = 8192;
    o.block_size = 128;
    o.block_cache_size = 0;
    o.max_background_jobs = 1;
    o.value_index = shape;
    o.value_index_reshape = 1; /* reopens switch shapes on purpose */
    o.value_filter_bits = 256;
    o.value_partition_entries = 4;
    bkv_db *db;
    if (bkv_open(dir, &o, &db) != BKV_OK) fail("open", -1);
    return db;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        /* In memory when there is a tmpfs: every input creates a database. */
        const char *t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/bkv-fuzz-api-%d", t && *t ? t : "/tmp", (int)getpid());
    }
    remove_dir();
    int shape = size ? 1 + data[0] % 3 : 1;
    bkv_db *db = open_db(shape);
    int model[NKEYS];
    for (int i = 0; i < NKEYS; i++) model[i] = -1;
    bkv_batch *batch = bkv_batch_create();
    char k[16], v[48];
    for (size_t at = 1; at + 1 < size; at += 2) {
        int op = data[at] % 10, key = data[at + 1] % NKEYS, val = data[at + 1] / NKEYS + data[at] / 10 * 4;
        key_of(k, key);
        switch (op) {
        case 0: case 1: case 2:
            val_of(v, val);
            if (bkv_put(db, NULL, k, strlen(k), v, strlen(v))) fail("put", key);
            model[key] = val;
            break;
        case 3:
            if (bkv_delete(db, NULL, k, strlen(k))) fail("delete", key);
            model[key] = -1;
            break;
        case 4: { /* a batch of three puts and a delete, all or nothing */
            bkv_batch_clear(batch);
            for (int j = 0; j < 3; j++) {
                key_of(k, (key + j * 7) % NKEYS);
                val_of(v, val + j);
                bkv_batch_put(batch, k, strlen(k), v, strlen(v));
            }
            key_of(k, (key + 30) % NKEYS);
            bkv_batch_delete(batch, k, strlen(k));
            if (bkv_write(db, NULL, batch)) fail("write", key);
            for (int j = 0; j < 3; j++) model[(key + j * 7) % NKEYS] = val + j;
            model[(key + 30) % NKEYS] = -1;
            break;
        }
        case 5: {
            void *got;
            size_t n;
            int rc = bkv_get(db, NULL, k, strlen(k), &got, &n);
            if (model[key] < 0 ? rc != BKV_NOTFOUND : rc != BKV_OK) fail("get status", key);
            if (rc == BKV_OK) {
                val_of(v, model[key]);
                if (n != strlen(v) || memcmp(got, v, n) != 0) fail("get value", key);
                bkv_free(got);
            }
            break;
        }
        case 6: { /* find by value, against the model */
            found f = {.n = 0};
            val_of(v, val);
            if (bkv_find_value(db, NULL, v, strlen(v), on_found, &f, NULL)) fail("find_value", key);
            int want = 0;
            for (int i = 0; i < NKEYS; i++)
                if (model[i] == val) {
                    if (want >= f.n || f.keys[want] != i) fail("find_value result", i);
                    want++;
                }
            if (want != f.n) fail("find_value count", f.n);
            break;
        }
        case 7: { /* full scan */
            bkv_iter *it;
            if (bkv_iter_create(db, NULL, &it)) fail("iter", key);
            int expect = 0;
            for (bkv_iter_seek_to_first(it); bkv_iter_valid(it); bkv_iter_next(it)) {
                size_t kl;
                const char *ik = bkv_iter_key(it, &kl);
                int i = atoi(ik + 3);
                while (expect < i && model[expect] < 0) expect++;
                if (expect != i || model[i] < 0) fail("scan order, a missing key or a deleted one", expect);
                size_t vl;
                const char *iv = bkv_iter_value(it, &vl);
                val_of(v, model[i]);
                if (vl != strlen(v) || memcmp(iv, v, vl) != 0) fail("scan value", i);
                expect++;
            }
            while (expect < NKEYS && model[expect] < 0) expect++;
            if (expect != NKEYS || bkv_iter_status(it)) fail("scan end", expect);
            bkv_iter_destroy(it);
            break;
        }
        case 8:
            if ((key & 1 ? bkv_flush(db) : bkv_compact(db))) fail("flush/compact", key);
            break;
        case 9:
            if (bkv_close(db)) fail("close", key);
            db = open_db(1 + key % 3);
            break;
        }
    }
    bkv_batch_destroy(batch);
    bkv_close(db);
    remove_dir();
    return 0;
}
