/* Writes, reads back and checks a database through the installed API. */
#include <stdio.h>
#include <string.h>

#include <bloomkv.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (bkv_library_version() != BKV_VERSION_NUMBER) {
        fprintf(stderr, "built against %d, running with %d\n", BKV_VERSION_NUMBER, bkv_library_version());
        return 1;
    }
    bkv_db *db;
    if (bkv_open(argv[1], NULL, &db) != BKV_OK) {
        fprintf(stderr, "open: %s\n", bkv_errmsg(NULL));
        return 1;
    }
    void *v = NULL;
    size_t vl = 0;
    int ok = bkv_put(db, NULL, "key", 3, "value", 5) == BKV_OK && bkv_get(db, NULL, "key", 3, &v, &vl) == BKV_OK &&
             vl == 5 && memcmp(v, "value", 5) == 0;
    bkv_free(v);
    ok = bkv_close(db) == BKV_OK && ok && bkv_check(argv[1], NULL, NULL) == BKV_OK;
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
