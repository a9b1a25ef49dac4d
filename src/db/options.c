/*
 * Options: defaults, validation, and the size field that lets a program
 * compiled against an older (or newer) bloomkv.h pass its options structs
 * to this library.
 *
 * Each struct starts with its size as the caller's header had it. A
 * smaller struct is an older layout: the fields it lacks keep their
 * defaults. A larger one is a newer layout: accepted only if every byte
 * this library does not know is zero (the caller left the new fields at
 * their defaults), as Linux's copy_struct_from_user does. A size of 0 is a
 * struct that was never initialized.
 */
#include <stdint.h>
#include <string.h>

#include "db/db_int.h"

static void default_options(bkv_options *o) {
    o->create_if_missing = 1;
    o->write_buffer_size = 64u << 20;
    o->max_write_buffer_number = 3;
    o->block_size = 4096;
    o->block_cache_size = 64u << 20;
    o->max_open_files = 1000;
    o->filter_type = BKV_FILTER_BLOCKED_BLOOM;
    o->bits_per_key = 10;
    o->compression = BKV_COMPRESSION_NONE;
    o->memtable_filter = 1;
    o->file_mode = 0644;
    o->compaction_style = BKV_COMPACTION_LEVELED;
    o->level0_compaction_trigger = 4;
    o->level0_slowdown_trigger = 8;
    o->level0_stop_trigger = 12;
    o->max_bytes_for_level_base = 0;
    o->level_size_multiplier = 10;
    o->level_compaction_dynamic_level_bytes = 1;
    o->target_file_size = 16u << 20;
    o->tiered_size_ratio = 20;
    o->tiered_max_size_amplification = 200;
    o->max_background_jobs = 2;
    o->max_subcompactions = BKV_DEFAULT_SUBCOMPACTIONS;
    o->value_summary_bits = BKV_DEFAULT_VALUE_SUMMARY_BITS;
    o->value_filter_bits = 0;
    o->value_partition_entries = BKV_DEFAULT_VALUE_PARTITION;
    o->value_index_order = 4;
    o->wal_mmap = 1;
    o->compact_for_reads = 1;
    o->release_free_memory = 1;
}

void bkv_options_own_levels(bkv_options *o, bkv_level_options own[BKV_MAX_LEVELS]) {
    for (size_t i = 0; i < BKV_MAX_LEVELS; i++)
        own[i] = i < o->level_options_count ? o->level_options[i] : (bkv_level_options){-1, -1, 0};
    o->level_options = own;
    o->level_options_count = BKV_MAX_LEVELS;
}

int bkv_level_filter_type(const bkv_options *o, int level) {
    size_t l = (size_t)level;
    return l < o->level_options_count && o->level_options[l].filter_type >= 0 ? o->level_options[l].filter_type
                                                                              : o->filter_type;
}

double bkv_level_bits_per_key(const bkv_options *o, int level) {
    return bkv_level_sets_bits(o, level) ? o->level_options[level].bits_per_key : o->bits_per_key;
}

int bkv_level_sets_bits(const bkv_options *o, int level) {
    return (size_t)level < o->level_options_count && o->level_options[level].bits_per_key > 0;
}

double bkv_level_range_filter_bits(const bkv_options *o, int level) {
    double b = (size_t)level < o->level_options_count ? o->level_options[level].range_filter_bits_per_key : 0;
    return b < 0 ? 0 : b > 0 ? b : o->range_filter_bits_per_key;
}

void bkv_init_sized(void *dst, size_t size, const void *defaults, size_t own) {
    if (!dst || size < sizeof size) return;
    memset(dst, 0, size);
    memcpy(dst, defaults, size < own ? size : own);
    memcpy(dst, &size, sizeof size);
}

void bkv_options_init_sized(bkv_options *o, size_t size) {
    bkv_options d;
    memset(&d, 0, sizeof d);
    default_options(&d);
    bkv_init_sized(o, size, &d, sizeof d);
}

void bkv_read_options_init_sized(bkv_read_options *ro, size_t size) {
    bkv_read_options d;
    memset(&d, 0, sizeof d);
    d.fill_cache = 1;
    bkv_init_sized(ro, size, &d, sizeof d);
}

void bkv_write_options_init_sized(bkv_write_options *wo, size_t size) {
    bkv_write_options d;
    memset(&d, 0, sizeof d);
    bkv_init_sized(wo, size, &d, sizeof d);
}

/* For programs built before the _init macros: this library's size. */
void(bkv_options_init)(bkv_options *o) { bkv_options_init_sized(o, sizeof *o); }
void(bkv_read_options_init)(bkv_read_options *ro) { bkv_read_options_init_sized(ro, sizeof *ro); }
void(bkv_write_options_init)(bkv_write_options *wo) { bkv_write_options_init_sized(wo, sizeof *wo); }

unsigned bkv_dir_mode(unsigned file_mode) { return file_mode | ((file_mode & 0444) >> 2); }

int bkv_adopt_options(void *dst, size_t dst_size, const void *src, const char *what, bkv_err *e) {
    size_t size;
    memcpy(&size, src, sizeof size);
    /* A size past any struct a release could define is garbage, not a
     * newer caller: reading that far would run past the caller's struct. */
    if (size < sizeof size || size > BKV_OPTIONS_SIZE_MAX)
        return bkv_fail(e, BKV_INVALID, "%s.size is %zu: initialize it with %s_init", what, size, what);
    const uint8_t *bytes = src;
    for (size_t i = dst_size; i < size; i++)
        if (bytes[i])
            return bkv_fail(e, BKV_INVALID,
                            "%s: the caller sets a field this library (bloomkv %d.%d.%d) does not know, at byte %zu",
                            what, BKV_VERSION_MAJOR, BKV_VERSION_MINOR, BKV_VERSION_PATCH, i);
    memcpy((uint8_t *)dst + sizeof size, bytes + sizeof size, (size < dst_size ? size : dst_size) - sizeof size);
    return BKV_OK;
}

/* Each check names the option and what it may be, so a caller learns
 * which field to fix rather than that "an argument" was invalid. */
#define REQUIRE(cond, ...) \
    do { \
        if (!(cond)) return bkv_fail(e, BKV_INVALID, "invalid option: " __VA_ARGS__); \
    } while (0)

static int check_value_options(const bkv_options *o, bkv_err *e) {
    REQUIRE(o->value_summary_bits == 0 || (o->value_summary_bits >= 2 && o->value_summary_bits <= 16),
            "value_summary_bits = %d, must be 2..16 (0: the default, %d)", o->value_summary_bits,
            BKV_DEFAULT_VALUE_SUMMARY_BITS);
    if (o->value_index == BKV_VALUE_INDEX_NONE && !o->value_terms) return BKV_OK;
    REQUIRE(o->value_index >= BKV_VALUE_INDEX_NONE && o->value_index <= BKV_VALUE_INDEX_PAGED,
            "value_index = %d, must be one of BKV_VALUE_INDEX_* (0..4)", o->value_index);
    REQUIRE(o->value_filter_bits == 0 || (o->value_filter_bits >= 64 && o->value_filter_bits % 64 == 0 &&
                                          o->value_filter_bits <= (UINT32_C(1) << 31)),
            "value_filter_bits = %u, must be 0 (automatic) or a multiple of 64 in 64..2^31", o->value_filter_bits);
    REQUIRE(o->value_filter_hashes >= 0 && o->value_filter_hashes <= BKV_VF_MAX_K,
            "value_filter_hashes = %d, must be 0 (automatic) or 1..%d", o->value_filter_hashes, BKV_VF_MAX_K);
    REQUIRE(o->value_index_order >= 2 && o->value_index_order <= 1024, "value_index_order = %d, must be 2..1024",
            o->value_index_order);
    REQUIRE(!o->value_terms || (o->value_terms_name && *o->value_terms_name &&
                                strlen(o->value_terms_name) <= BKV_TERMS_NAME_MAX),
            "value_terms_name must name the value_terms extractor (1..%d bytes)", BKV_TERMS_NAME_MAX);
    return BKV_OK;
}

int bkv_check_options(const bkv_options *o, bkv_err *e) {
    REQUIRE(o->filter_type == BKV_FILTER_NONE || bkv_filter_type_name(o->filter_type),
            "filter_type = %d, must be a BKV_FILTER_* type", o->filter_type);
    REQUIRE(o->filter_type == BKV_FILTER_NONE || (o->bits_per_key > 0 && o->bits_per_key <= 100),
            "bits_per_key = %g, must be in (0, 100]", o->bits_per_key);
    REQUIRE(o->level_options_count <= BKV_MAX_LEVELS, "level_options_count = %zu, must be at most %d (BKV_MAX_LEVELS)",
            o->level_options_count, BKV_MAX_LEVELS);
    REQUIRE(!o->level_options_count || o->level_options, "level_options is NULL with level_options_count %zu",
            o->level_options_count);
    for (size_t i = 0; i < o->level_options_count; i++) {
        const bkv_level_options *l = &o->level_options[i];
        REQUIRE(l->filter_type < 0 || l->filter_type == BKV_FILTER_NONE || bkv_filter_type_name(l->filter_type),
                "level_options[%zu].filter_type = %d, must be < 0 (the default) or a BKV_FILTER_* type", i,
                l->filter_type);
        REQUIRE(l->bits_per_key <= 100, "level_options[%zu].bits_per_key = %g, must be <= 100", i, l->bits_per_key);
        REQUIRE(l->range_filter_bits_per_key <= 0 ||
                    (l->range_filter_bits_per_key >= 3 && l->range_filter_bits_per_key <= 66),
                "level_options[%zu].range_filter_bits_per_key = %g, must be <= 0 (0: the default, < 0: none) or 3..66",
                i, l->range_filter_bits_per_key);
    }
    REQUIRE(o->filter_partition_size == 0 || (o->filter_partition_size >= 64 && o->filter_partition_size <= (1u << 26)),
            "filter_partition_size = %zu, must be 0 (4096) or 64..2^26", o->filter_partition_size);
    REQUIRE(o->wal_mmap == 0 || o->wal_mmap == 1, "wal_mmap = %d, must be 0 or 1", o->wal_mmap);
    REQUIRE(o->compact_for_reads == 0 || o->compact_for_reads == 1, "compact_for_reads = %d, must be 0 or 1",
            o->compact_for_reads);
    REQUIRE(o->release_free_memory == 0 || o->release_free_memory == 1, "release_free_memory = %d, must be 0 or 1",
            o->release_free_memory);
    REQUIRE(o->value_index_drop == 0 || (o->value_index_drop == 1 && o->value_index == BKV_VALUE_INDEX_NONE),
            "value_index_drop = %d, must be 0, or 1 with value_index BKV_VALUE_INDEX_NONE", o->value_index_drop);
    REQUIRE(o->partition_filters == 0 || o->partition_filters == 1, "partition_filters = %d, must be 0 or 1",
            o->partition_filters);
    REQUIRE(o->read_only == 0 || o->read_only == 1, "read_only = %d, must be 0 or 1", o->read_only);
    REQUIRE(o->range_filter_bits_per_key == 0 ||
                (o->range_filter_bits_per_key >= 3 && o->range_filter_bits_per_key <= 66),
            "range_filter_bits_per_key = %g, must be 0 or 3..66", o->range_filter_bits_per_key);
    REQUIRE(!o->read_only || (!o->value_index_drop && !o->value_index_reshape),
            "read_only: dropping or reshaping the value index writes the manifest; open for writing to do it");
    REQUIRE(o->compaction_style == BKV_COMPACTION_LEVELED || o->compaction_style == BKV_COMPACTION_TIERED,
            "compaction_style = %d, must be BKV_COMPACTION_LEVELED or _TIERED", o->compaction_style);
    REQUIRE(o->level0_compaction_trigger >= 2, "level0_compaction_trigger = %d, must be >= 2",
            o->level0_compaction_trigger);
    REQUIRE(o->level0_slowdown_trigger >= o->level0_compaction_trigger,
            "level0_slowdown_trigger = %d, must be >= level0_compaction_trigger (%d)", o->level0_slowdown_trigger,
            o->level0_compaction_trigger);
    REQUIRE(o->level0_stop_trigger >= o->level0_slowdown_trigger,
            "level0_stop_trigger = %d, must be >= level0_slowdown_trigger (%d)", o->level0_stop_trigger,
            o->level0_slowdown_trigger);
    REQUIRE(o->max_bytes_for_level_base == 0 || o->max_bytes_for_level_base >= 1024,
            "max_bytes_for_level_base = %llu, must be 0 (automatic) or >= 1024",
            (unsigned long long)o->max_bytes_for_level_base);
    REQUIRE(o->level_size_multiplier >= 2, "level_size_multiplier = %g, must be >= 2", o->level_size_multiplier);
    REQUIRE(o->target_file_size >= 1024, "target_file_size = %llu, must be >= 1024",
            (unsigned long long)o->target_file_size);
    REQUIRE(o->tiered_size_ratio >= 0, "tiered_size_ratio = %d, must be >= 0", o->tiered_size_ratio);
    REQUIRE(o->tiered_max_size_amplification >= 0, "tiered_max_size_amplification = %d, must be >= 0",
            o->tiered_max_size_amplification);
    REQUIRE(o->max_background_jobs >= 1 && o->max_background_jobs <= BKV_MAX_BACKGROUND_JOBS,
            "max_background_jobs = %d, must be 1..%d", o->max_background_jobs, BKV_MAX_BACKGROUND_JOBS);
    REQUIRE(o->compaction_nice >= 0 && o->compaction_nice <= 19, "compaction_nice = %d, must be 0..19",
            o->compaction_nice);
    REQUIRE(o->max_subcompactions >= 0 && o->max_subcompactions <= BKV_MAX_SUBCOMPACTIONS,
            "max_subcompactions = %d, must be 1..%d (0: the default)", o->max_subcompactions,
            BKV_MAX_SUBCOMPACTIONS);
    REQUIRE(o->write_buffer_size >= 1024, "write_buffer_size = %zu, must be >= 1024", o->write_buffer_size);
    REQUIRE(o->block_size >= 64 && o->block_size <= (1u << 26), "block_size = %zu, must be 64..67108864",
            o->block_size);
    REQUIRE(o->max_write_buffer_number >= 2 && o->max_write_buffer_number <= BKV_MAX_IMM + 1,
            "max_write_buffer_number = %d, must be 2..%d", o->max_write_buffer_number, BKV_MAX_IMM + 1);
    REQUIRE(o->max_open_files >= 1, "max_open_files = %d, must be >= 1", o->max_open_files);
    REQUIRE(o->compression >= BKV_COMPRESSION_NONE && o->compression <= BKV_COMPRESSION_ZSTD,
            "compression = %d, must be one of BKV_COMPRESSION_* (0..2)", o->compression);
    REQUIRE(o->wal_recovery >= BKV_WAL_RECOVERY_ABSOLUTE && o->wal_recovery <= BKV_WAL_RECOVERY_SKIP_DAMAGED,
            "wal_recovery = %d, must be one of BKV_WAL_RECOVERY_* (0..2)", o->wal_recovery);
    REQUIRE((o->file_mode & ~0777u) == 0 && (o->file_mode & 0600) == 0600,
            "file_mode = %#o, must be permission bits (<= 0777) including owner read and write (0600)",
            o->file_mode);
    return check_value_options(o, e);
}
#undef REQUIRE

