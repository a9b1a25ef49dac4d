/* Scratch directories for tests that touch files. */
#ifndef BKV_TEST_DIR_H
#define BKV_TEST_DIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Creates a fresh directory under $TMPDIR (or /tmp); returns it in buf. */
static inline const char *test_make_dir(char *buf, size_t n, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/bkv-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        abort();
    }
    return buf;
}

/* XORs the byte at offset off of path with mask (twice restores it): the
 * damage of the corruption tests. 0, or -1 when the file cannot be read
 * or written there. */
static inline int test_xor_byte(const char *path, long off, int mask) {
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    int c = fseek(f, off, SEEK_SET) == 0 ? fgetc(f) : EOF;
    int rc = c == EOF || fseek(f, off, SEEK_SET) != 0 || fputc(c ^ mask, f) == EOF ? -1 : 0;
    return fclose(f) == 0 ? rc : -1;
}

static inline void test_remove_dir(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The scratch directory of a test program: `dir`, made by setup and
 * removed by teardown (pass them to cmocka_run_group_tests). */
#define TEST_DIR_FIXTURE(tag)                         \
    static char dir[256];                             \
    static int setup(void **state) {                  \
        (void)state;                                  \
        test_make_dir(dir, sizeof dir, tag);          \
        return 0;                                     \
    }                                                 \
    static int teardown(void **state) {               \
        (void)state;                                  \
        test_remove_dir(dir);                         \
        return 0;                                     \
    }

#endif
