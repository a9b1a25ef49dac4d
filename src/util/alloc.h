/* Allocation helpers. */
#ifndef BKV_UTIL_ALLOC_H
#define BKV_UTIL_ALLOC_H

#include <stddef.h>

/* Zeroed memory aligned to 64 bytes, freed with free(). Regions of several
 * MiB are 2 MiB aligned and offered to the kernel as transparent huge
 * pages: a large filter is probed at random, and with 4 KiB pages nearly
 * every probe would also miss the TLB and wait for a page walk. */
void *bkv_alloc_probe_region(size_t len);

/* The same placement without the zeroing: scratch arrays that a filter
 * build reads and writes at random, such as a fuse filter's cell counts. */
void *bkv_alloc_random_access(size_t len);

/* Zeroed pages straight from the system (a private anonymous map), given
 * back as soon as they are freed with bkv_free_pages(p, len): for the
 * memtable's arena blocks, which malloc kept in its heaps after their
 * memtable was flushed (6-8 MB more resident memory at 2 M keys). They
 * are faulted in up front, as the arena fills every block it takes. NULL
 * when out of memory. */
void *bkv_alloc_pages(size_t len);
void bkv_free_pages(void *p, size_t len);

/* A build's scratch array, its contents undefined, its pages faulted in
 * up front (a Ribbon build sweeps them in order, so the TLB matters less
 * than the faults); freed with bkv_free_scratch(p, len). */
void *bkv_alloc_scratch(size_t len);
void bkv_free_scratch(void *p, size_t len);

#endif
