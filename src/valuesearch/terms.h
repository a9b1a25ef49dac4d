/*
 * Built-in terms extractors: named, versioned functions a database records
 * at creation (manifest, value index record), so that any process, the
 * bloomkv tool included, can reopen it without the caller's code. A spec
 * names one, optionally with its version:
 *
 *   words          lower-cased word tokens (ASCII letters and digits, and
 *                  every byte >= 0x80, so UTF-8 letters stay in words);
 *                  a token is cut at 255 bytes
 *   field:SEP:N    the N-th (from 1) field of the value split at the byte
 *                  SEP ("tab" and "space" name those two)
 *   prefix:N       the whole value and its prefixes of 1..N bytes (N <= 255),
 *                  so a search for "abc" finds every value starting so
 *   json:PATH      the field at PATH (a name, or names joined by dots for
 *                  nested objects) of a value that is one JSON object: a
 *                  string's bytes, a number or boolean as written, each
 *                  scalar of an array; nothing for other values (parsed
 *                  by json-c, strictly, UTF-8 checked)
 *
 * and is recorded canonically as "<spec>/<version>" ("words/1").
 */
#ifndef BKV_VALUESEARCH_TERMS_H
#define BKV_VALUESEARCH_TERMS_H

#include <stddef.h>

#include "bloomkv.h"
#include "util/status.h"

/* Resolves spec: BKV_OK with the extractor's function, its argument
 * (malloc'd: free it when the database closes) and the canonical name
 * written to canonical (cap bytes); BKV_NOTFOUND when spec names no
 * built-in; BKV_INVALID, described in e, when it names one wrongly (bad
 * parameters, or a version this release does not have). */
int bkv_terms_builtin(const char *spec, bkv_terms_fn *fn, void **arg, char *canonical, size_t cap, bkv_err *e);

#endif
