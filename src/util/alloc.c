#include "util/alloc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Under AddressSanitizer, the filter pool's free slots are poisoned, so
 * a read past a filter still reports as it would past its own malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define BKV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BKV_ASAN 1
#endif
#endif
#ifdef BKV_ASAN
#include <sanitizer/asan_interface.h>
#define BKV_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define BKV_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define BKV_POISON(p, n) ((void)(p), (void)(n))
#define BKV_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define HUGE_PAGE (2u << 20)

void *bkv_alloc_pages(size_t len) {
    void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

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
    void *p = bkv_alloc_pages(len);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    if (len >= 2 * HUGE_PAGE && len <= SCRATCH_HUGE_MAX) (void)madvise(p, len, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
    /* One call faults the whole range in, instead of a trap per page as
     * the build first touches it. Advice only: older kernels refuse it. */
    (void)madvise(p, len, MADV_POPULATE_WRITE);
#endif
    return p;
}

void bkv_free_scratch(void *p, size_t len) {
    if (len < SCRATCH_MAP_MIN) free(p);
    else bkv_free_pages(p, len);
}

/* The filter pool. A chunk is one 2 MiB huge page of 256-byte slots, with
 * two bitmaps beside it: the slots in use, and the first slot of each
 * allocation, so a free needs no length (an allocation runs from its
 * first slot to the next free slot or the next first slot). Allocations
 * above a quarter chunk get their own region, as bkv_alloc_random_access
 * gives. Chunks are kept sorted by address under one mutex: filters are
 * allocated and freed as tables open and close, never while probed. A
 * chunk left empty is given back at once. */
#define SLOT 256u
#define SLOTS (HUGE_PAGE / SLOT)
#define POOL_MAX (HUGE_PAGE / 4)

typedef struct pool_chunk {
    uint8_t *base;
    size_t free_slots;
    uint64_t used[SLOTS / 64], first[SLOTS / 64];
} pool_chunk;

static struct {
    pthread_mutex_t mu;
    pool_chunk **chunks; /* sorted by base */
    size_t n, cap, used_bytes;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int slot_used(const uint64_t *bits, size_t i) { return (int)(bits[i / 64] >> (i % 64) & 1); }
static void slot_set(uint64_t *bits, size_t i, int on) {
    if (on) bits[i / 64] |= UINT64_C(1) << (i % 64);
    else bits[i / 64] &= ~(UINT64_C(1) << (i % 64));
}

/* The first run of k free slots in c, or SLOTS. */
static size_t find_run(const pool_chunk *c, size_t k) {
    size_t run = 0;
    for (size_t i = 0; i < SLOTS; i++) {
        if (i % 64 == 0 && c->used[i / 64] == UINT64_MAX) { /* a full word: skip it whole */
            run = 0;
            i += 63;
            continue;
        }
        run = slot_used(c->used, i) ? 0 : run + 1;
        if (run == k) return i + 1 - k;
    }
    return SLOTS;
}

/* A 2 MiB-aligned chunk: twice the length mapped, the ends trimmed. */
static pool_chunk *chunk_new(void) {
    pool_chunk *c = calloc(1, sizeof *c);
    uint8_t *m = c ? mmap(NULL, 2 * HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (m == MAP_FAILED) {
        free(c);
        return NULL;
    }
    uintptr_t start = ((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    size_t head = start - (uintptr_t)m;
    if (head) munmap(m, head);
    munmap((uint8_t *)start + HUGE_PAGE, HUGE_PAGE - head);
    c->base = (uint8_t *)start;
    c->free_slots = SLOTS;
#ifdef MADV_HUGEPAGE
    (void)madvise(c->base, HUGE_PAGE, MADV_HUGEPAGE);
#endif
    BKV_POISON(c->base, HUGE_PAGE);
    return c;
}

/* Index of the chunk holding p, or pool.n. REQUIRES: pool.mu held. */
static size_t chunk_of(const void *p) {
    size_t lo = 0, hi = pool.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((const uint8_t *)p < pool.chunks[mid]->base) hi = mid;
        else if ((const uint8_t *)p >= pool.chunks[mid]->base + HUGE_PAGE) lo = mid + 1;
        else return mid;
    }
    return pool.n;
}

/* Adds c in address order; 0 when the array cannot grow. */
static int chunk_insert(pool_chunk *c) {
    if (pool.n == pool.cap) {
        size_t cap = pool.cap ? 2 * pool.cap : 8;
        pool_chunk **grown = realloc(pool.chunks, cap * sizeof *grown);
        if (!grown) return 0;
        pool.chunks = grown;
        pool.cap = cap;
    }
    size_t at = 0;
    while (at < pool.n && pool.chunks[at]->base < c->base) at++;
    memmove(pool.chunks + at + 1, pool.chunks + at, (pool.n - at) * sizeof *pool.chunks);
    pool.chunks[at] = c;
    pool.n++;
    return 1;
}

void *bkv_alloc_filter_memory(size_t len) {
    if (len > POOL_MAX) return bkv_alloc_random_access(len);
    size_t k = len ? (len + SLOT - 1) / SLOT : 1;
    pthread_mutex_lock(&pool.mu);
    pool_chunk *c = NULL;
    size_t at = SLOTS;
    for (size_t i = 0; i < pool.n && at == SLOTS; i++)
        if (pool.chunks[i]->free_slots >= k && (at = find_run(pool.chunks[i], k)) < SLOTS) c = pool.chunks[i];
    if (!c) {
        c = chunk_new();
        if (c && !chunk_insert(c)) {
            BKV_UNPOISON(c->base, HUGE_PAGE);
            munmap(c->base, HUGE_PAGE);
            free(c);
            c = NULL;
        }
        at = 0;
    }
    void *p = NULL;
    if (c) {
        for (size_t i = at; i < at + k; i++) slot_set(c->used, i, 1);
        slot_set(c->first, at, 1);
        c->free_slots -= k;
        pool.used_bytes += k * SLOT;
        p = c->base + at * SLOT;
        BKV_UNPOISON(p, len);
    }
    pthread_mutex_unlock(&pool.mu);
    return p;
}

void bkv_free_filter_memory(void *p) {
    if (!p) return;
    pthread_mutex_lock(&pool.mu);
    size_t ci = chunk_of(p);
    if (ci == pool.n) { /* not the pool's: its own region */
        pthread_mutex_unlock(&pool.mu);
        free(p);
        return;
    }
    pool_chunk *c = pool.chunks[ci];
    size_t at = (size_t)((uint8_t *)p - c->base) / SLOT, i = at;
    slot_set(c->first, at, 0);
    do {
        slot_set(c->used, i++, 0);
    } while (i < SLOTS && slot_used(c->used, i) && !slot_used(c->first, i));
    c->free_slots += i - at;
    pool.used_bytes -= (i - at) * SLOT;
    BKV_POISON(p, (i - at) * SLOT);
    if (c->free_slots == SLOTS) {
        memmove(pool.chunks + ci, pool.chunks + ci + 1, (pool.n - ci - 1) * sizeof *pool.chunks);
        pool.n--;
        BKV_UNPOISON(c->base, HUGE_PAGE); /* the addresses may be mapped again */
        munmap(c->base, HUGE_PAGE);
        free(c);
    }
    pthread_mutex_unlock(&pool.mu);
}

void bkv_filter_memory_usage(size_t *held, size_t *used) {
    pthread_mutex_lock(&pool.mu);
    *held = pool.n * (size_t)HUGE_PAGE;
    *used = pool.used_bytes;
    pthread_mutex_unlock(&pool.mu);
}
