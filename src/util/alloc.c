#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

void *bkv_alloc_pages(size_t len) {
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void bkv_free_pages(void *p, size_t len) {
    if (p) munmap(p, len ? len : 1);
}

void *bkv_alloc_probe_region(size_t len) {
    size_t align = len >= 2 * HUGE_PAGE ? HUGE_PAGE : 64;
    size_t size = (len + align - 1) & ~(align - 1);
    if (size == 0) size = align;
    void *p = aligned_alloc(align, size);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    /* Advice only: failure leaves ordinary pages, which still work. */
    if (align == HUGE_PAGE) (void)madvise(p, size, MADV_HUGEPAGE);
#endif
    memset(p, 0, size);
    return p;
}
