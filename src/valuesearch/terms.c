#include "valuesearch/terms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#define TOKEN_MAX 255
#define BUILTIN_VERSION 1
#define JSON_PATH_MAX 255

typedef struct terms_arg {
    int kind;          /* WORDS, FIELD, PREFIX, JSON */
    unsigned char sep;
    unsigned n;        /* field number, prefix bytes, or path segments */
    char path[JSON_PATH_MAX + 1]; /* JSON: the segments, each ended by a NUL */
} terms_arg;

enum { WORDS, FIELD, PREFIX, JSON };

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

static void emit_text(json_object *o, bkv_term_emit_fn emit, void *ctx) {
    size_t len;
    const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    if (text) emit(ctx, text, len);
}

/* A scalar's term: a string's bytes (not its JSON form, so "ann" finds
 * {"user":"ann"}); true and false as written; a number with a fraction or
 * an exponent as written (json-c keeps its source text: 1.50 is "1.50");
 * an integer by its value in decimal, and zero by both "0" and "-0" (one
 * integer, however it was written). An integer at or past the 64-bit
 * limits gives no term: json-c holds it clamped, and the clamped text
 * would match another number. null, objects and arrays give none. */
static void emit_scalar(json_object *o, bkv_term_emit_fn emit, void *ctx) {
    switch (json_object_get_type(o)) {
    case json_type_string:
        emit(ctx, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        break;
    case json_type_int:
        if (json_object_get_int64(o) == 0 && json_object_get_uint64(o) == 0) {
            emit(ctx, "0", 1);
            emit(ctx, "-0", 2);
        } else if (json_object_get_int64(o) != INT64_MIN && json_object_get_uint64(o) != UINT64_MAX) {
            emit_text(o, emit, ctx); /* within range, json-c's text is the value's */
        }
        break;
    case json_type_double:
    case json_type_boolean:
        emit_text(o, emit, ctx);
        break;
    default:
        break;
    }
}

/* The field at a dotted path of a JSON object value: a scalar gives its
 * term, an array one term per scalar element (a list of tags). A value that
 * is not one complete JSON text, or lacks the field, gives none. */
static void json_field(const terms_arg *a, const unsigned char *v, size_t vlen, bkv_term_emit_fn emit, void *ctx) {
    if (vlen > INT32_MAX) return;
    json_tokener *tok = json_tokener_new();
    if (!tok) return;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(tok, (const char *)v, (int)vlen);
    size_t end = root ? json_tokener_get_parse_end(tok) : 0;
    while (end < vlen && (v[end] == ' ' || v[end] == '\t' || v[end] == '\n' || v[end] == '\r')) end++;
    int complete = root && end == vlen;
    json_tokener_free(tok);
    json_object *o = complete ? root : NULL;
    const char *seg = a->path;
    for (unsigned i = 0; o && i < a->n; i++, seg += strlen(seg) + 1)
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, seg, &o)) o = NULL;
    if (o && json_object_is_type(o, json_type_array)) {
        size_t n = json_object_array_length(o);
        for (size_t i = 0; i < n; i++) emit_scalar(json_object_array_get_idx(o, i), emit, ctx);
    } else if (o) {
        emit_scalar(o, emit, ctx);
    }
    json_object_put(root);
}

static void extract(void *arg, const void *val, size_t vlen, bkv_term_emit_fn emit, void *ctx) {
    const terms_arg *a = arg;
    const unsigned char *v = val ? val : (const unsigned char *)"";
    if (a->kind == JSON) {
        json_field(a, v, vlen, emit, ctx);
    } else if (a->kind == WORDS) {
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
    } else if (len > 5 && memcmp(spec, "json:", 5) == 0) {
        a.kind = JSON;
        size_t plen = len - 5;
        if (plen > JSON_PATH_MAX)
            return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": the field path is at most %d bytes", spec,
                            JSON_PATH_MAX);
        memcpy(a.path, spec + 5, plen);
        a.n = 1;
        for (size_t i = 0; i < plen; i++)
            if (a.path[i] == '.') a.path[i] = '\0', a.n++;
        for (size_t i = 0, seg = 0; i <= plen; i++) {
            if (i < plen && a.path[i]) continue;
            if (i == seg)
                return bkv_fail(e, BKV_INVALID, "terms extractor \"%s\": json:FIELD takes a field name, or names "
                                                "joined by dots, none empty", spec);
            seg = i + 1;
        }
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
