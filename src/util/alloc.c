#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

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
