#include "valueindex/terms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_MAX 255
#define BUILTIN_VERSION 1

typedef struct terms_arg {
    int kind;          /* WORDS, FIELD, PREFIX */
    unsigned char sep;
    unsigned n;        /* field number, or prefix bytes */
} terms_arg;

enum { WORDS, FIELD, PREFIX };

static int word_byte(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static void words(const unsigned char *v, size_t n, bkv_term_emit_fn emit, void *ctx) {
    unsigned char token[TOKEN_MAX];
    size_t len = 0, i = 0;
    for (;;) {
        int in_word = i < n && word_byte(v[i]);
        if (in_word) {
            unsigned char c = v[i];
            if (len < TOKEN_MAX) token[len++] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        } else if (len) {
            emit(ctx, token, len);
            len = 0;
        }
        if (i++ == n) break;
    }
}

static void extract(void *arg, const void *val, size_t vlen, bkv_term_emit_fn emit, void *ctx) {
    const terms_arg *a = arg;
    const unsigned char *v = val ? val : (const unsigned char *)"";
    if (a->kind == WORDS) {
        words(v, vlen, emit, ctx);
    } else if (a->kind == FIELD) {
        size_t start = 0;
        unsigned field = 1;
        for (size_t i = 0; i <= vlen; i++) {
            if (i < vlen && v[i] != a->sep) continue;
            if (field == a->n) {
                emit(ctx, v + start, i - start);
                return;
            }
            field++;
            start = i + 1;
        }
    } else {
        emit(ctx, v, vlen);
        for (size_t len = 1; len <= a->n && len < vlen; len++) emit(ctx, v, len);
    }
}

/* A decimal number in 1..max spanning exactly [s, end). */
static int parse_count(const char *s, const char *end, unsigned max, unsigned *out) {
    if (s == end || end - s > 9) return 0;
    unsigned v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v < 1 || v > max) return 0;
    *out = v;
    return 1;
}

int bkv_terms_builtin(const char *spec, bkv_terms_fn *fn, void **arg, char *canonical, size_t cap, bkv_err *e) {
    size_t len = strlen(spec);
    const char *slash = strrchr(spec, '/');
    unsigned version = BUILTIN_VERSION;
    if (slash) {
        if (!parse_count(slash + 1, spec + len, 1000000, &version)) return BKV_NOTFOUND;
        len = (size_t)(slash - spec);
    }
    terms_arg a = {0};
    const char *end = spec + len;
    if (len == 5 && memcmp(spec, "words", 5) == 0) {
        a.kind = WORDS;
    } else if (len > 6 && memcmp(spec, "field:", 6) == 0) {
        a.kind = FIELD;
        const char *sep = spec + 6, *colon = memchr(sep, ':', (size_t)(end - sep));
        if (!colon) return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": field:SEP:N needs a separator and N", spec);
        size_t sl = (size_t)(colon - sep);
        if (sl == 3 && memcmp(sep, "tab", 3) == 0) a.sep = '\t';
        else if (sl == 5 && memcmp(sep, "space", 5) == 0) a.sep = ' ';
        else if (sl == 1) a.sep = (unsigned char)*sep;
        else return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": the separator is one byte, tab or space", spec);
        if (!parse_count(colon + 1, end, 1000000, &a.n))
            return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": the field number is 1..1000000", spec);
    } else if (len > 7 && memcmp(spec, "prefix:", 7) == 0) {
        a.kind = PREFIX;
        if (!parse_count(spec + 7, end, TOKEN_MAX, &a.n))
            return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": prefix:N takes N in 1..%d", spec, TOKEN_MAX);
    } else {
        return BKV_NOTFOUND;
    }
    if (version != BUILTIN_VERSION)
        return bkv_fail(e, BKV_INVALID,
                        "terms extractor \"%.*s\" version %u is not in this release (it has version %d)", (int)len,
                        spec, version, BUILTIN_VERSION);
    if ((size_t)snprintf(canonical, cap, "%.*s/%d", (int)len, spec, BUILTIN_VERSION) >= cap)
        return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": name too long", spec);
    terms_arg *held = malloc(sizeof *held);
    if (!held) return bkv_fail(e, BKV_NOMEM, "out of memory");
    *held = a;
    *fn = extract;
    *arg = held;
    return BKV_OK;
}
