/* Each public header compiles on its own, first in its file, under the
 * strictest warnings the tree uses: a program that includes bloomkv.h
 * needs nothing else (no stdio, no filter library header) to set every
 * option, and bloomkv_filter.h likewise. Building this file is the test. */
#include "bloomkv.h"

int bkv_headers_alone_engine(void);
int bkv_headers_alone_engine(void) {
    bkv_options o;
    bkv_options_init(&o);
    o.filter_type = BKV_FILTER_RIBBON;
    return o.filter_type == BKV_FILTER_RIBBON ? BKV_OK : BKV_INVALID;
}
