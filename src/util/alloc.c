#include "util/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

/* Pages from the system, faulted in by one call where the first touches
 * would trap once per page. huge: offered as transparent huge pages first,
 * so that they are faulted in as such. */
static void *map_pages(size_t len, int huge) {
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, len, MADV_HUGEPAGE);
#else
    (void)huge;
#endif
#ifdef MADV_POPULATE_WRITE
    /* Advice only: older kernels refuse it, and the pages fault in as used. */
    (void)madvise(p, len ? len : 1, MADV_POPULATE_WRITE);
#endif
    return p;
}

void *bkv_alloc_pages(size_t len) { return map_pages(len, 0); }

void bkv_free_pages(void *p, size_t len) {
    if (p) munmap(p, len ? len : 1);
}

/* Random-access regions of several MiB are 2 MiB aligned and whole huge
 * pages long; smaller ones are rounded to a cache line. */
static size_t random_access_align(size_t len) { return len >= 2 * HUGE_PAGE ? HUGE_PAGE : 64; }

static size_t random_access_size(size_t len) {
    size_t align = random_access_align(len);
    size_t size = (len + align - 1) & ~(align - 1);
    return size ? size : align;
}

void *bkv_alloc_random_access(size_t len) {
    if (len > SIZE_MAX / 2) return NULL; /* rounding up would wrap */
    size_t align = random_access_align(len), size = random_access_size(len);
    void *p = aligned_alloc(align, size);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: failure leaves ordinary pages, which still work. */
    if (align == HUGE_PAGE) (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
}

void *bkv_alloc_probe_region(size_t len) {
    void *p = bkv_alloc_random_access(len);
    if (p) memset(p, 0, random_access_size(len));
    return p;
}

/* Huge pages hold a build's scratch steadily below this size; above it,
 * 10 M-key Ribbon builds measured 67-115 ns a key with them (the kernel
 * assembling 2 MiB pages as it faults them in) and 67-70 without. */
#define SCRATCH_HUGE_MAX (64u << 20)

/* Below this, a mapping and its unmapping cost more than the build:
 * 1,000-key Ribbon builds measured 166 ns a key mapped, 76 from malloc. */
#define SCRATCH_MAP_MIN (1u << 20)

void *bkv_alloc_scratch(size_t len) {
    if (len < SCRATCH_MAP_MIN) return aligned_alloc(64, random_access_size(len));
    return map_pages(len, len >= 2 * HUGE_PAGE && len <= SCRATCH_HUGE_MAX);
}

void bkv_free_scratch(void *p, size_t len) {
    if (len < SCRATCH_MAP_MIN) free(p);
    else bkv_free_pages(p, len);
}
