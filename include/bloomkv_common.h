/*
 * bloomkv_common.h — what the engine (bloomkv.h) and the filter library
 * (bloomkv_filter.h) share: symbol visibility, the library version and the
 * status codes. Included by both; there is no need to include it directly.
 */
#ifndef BLOOMKV_COMMON_H
#define BLOOMKV_COMMON_H

/* The shared library is built with -fvisibility=hidden: only what is
 * marked BKV_EXPORT is public. */
#if defined(__GNUC__) || defined(__clang__)
#define BKV_EXPORT __attribute__((visibility("default")))
#else
#define BKV_EXPORT
#endif

/* The version of these headers; bkv_library_version() gives the library's
 * (BKV_VERSION_NUMBER as it was built), so a program can tell when it runs
 * against another release than it was compiled with. */
#define BKV_VERSION_MAJOR 0
#define BKV_VERSION_MINOR 3
#define BKV_VERSION_PATCH 0
#define BKV_VERSION_NUMBER (BKV_VERSION_MAJOR * 10000 + BKV_VERSION_MINOR * 100 + BKV_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes of every call that returns an int status. Errors are
 * negative, non-error outcomes positive. */
enum {
    BKV_OK = 0,
    BKV_NOTFOUND = 1,
    BKV_CORRUPTION = -1,  /* stored bytes are damaged or truncated */
    BKV_IOERROR = -2,
    BKV_INVALID = -3,     /* bad argument, or well-formed but unsupported input */
    BKV_NOMEM = -4,
    BKV_BUSY = -5,        /* the database is in use (locked by another handle or process) */
    BKV_FULL = -6         /* a filter has no room for the key (nothing was changed) */
};

/* Filter types: the filter library's (bloomkv_filter.h) and the engine's
 * key filters (bkv_options.filter_type). */
enum {
    BKV_FILTER_NONE = 0,          /* no filter: every probe answers "maybe" */
    BKV_FILTER_BLOOM = 1,         /* standard Bloom, k probes over all m bits */
    BKV_FILTER_BLOCKED_BLOOM = 2, /* all k probes of a key in one 64-byte line */
    /* Static: built once over all keys (bkv_filter_build), never added to. */
    BKV_FILTER_RIBBON = 3,        /* standard Ribbon, 128-bit bands: fpr 2^-r in ~1.0x r bits */
    BKV_FILTER_FUSE8 = 4,         /* binary fuse, 8-bit fingerprints: fpr 1/256, ~9 bits/key */
    BKV_FILTER_FUSE16 = 5,        /* binary fuse, 16-bit fingerprints */
    BKV_FILTER_XOR8 = 6,          /* xor filter, 8-bit fingerprints: ~9.8 bits/key */
    /* Deletable: bkv_filter_delete removes a key added before. */
    BKV_FILTER_CUCKOO8 = 7,       /* cuckoo, 4-slot buckets, 8/12/16-bit fingerprints */
    BKV_FILTER_CUCKOO12 = 8,
    BKV_FILTER_CUCKOO16 = 9,
    BKV_FILTER_COUNTING = 10,     /* counting Bloom, 4-bit saturating counters */
    BKV_FILTER_RANGE = 11         /* range filter over 64-bit keys (bkv_filter_build_range) */
};

/* A readable name for a status code; a static string, never NULL. */
BKV_EXPORT const char *bkv_strerror(int rc);

/* BKV_VERSION_NUMBER of the library actually linked. */
BKV_EXPORT int bkv_library_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BLOOMKV_COMMON_H */
