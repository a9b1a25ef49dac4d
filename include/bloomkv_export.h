/* Symbol visibility for the shared library: it is built with
 * -fvisibility=hidden, and only what is marked BKV_EXPORT is public. */
#ifndef BLOOMKV_EXPORT_H
#define BLOOMKV_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define BKV_EXPORT __attribute__((visibility("default")))
#else
#define BKV_EXPORT
#endif

#define BKV_VERSION_MAJOR 0
#define BKV_VERSION_MINOR 1
#define BKV_VERSION_PATCH 0
#define BKV_VERSION_NUMBER (BKV_VERSION_MAJOR * 10000 + BKV_VERSION_MINOR * 100 + BKV_VERSION_PATCH)

#endif
