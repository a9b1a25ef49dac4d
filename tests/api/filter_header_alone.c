/* bloomkv_filter.h on its own: the filter library needs no engine header. */
#include "bloomkv_filter.h"

int bkv_headers_alone_filter(void);
int bkv_headers_alone_filter(void) {
    bkv_filter_spec spec = {.type = BKV_FILTER_BLOCKED_BLOOM, .bits_per_key = 10};
    return spec.type == BKV_FILTER_BLOCKED_BLOOM ? BKV_OK : BKV_INVALID;
}
