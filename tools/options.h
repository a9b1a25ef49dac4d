#ifndef BKV_TOOLS_OPTIONS_H
#define BKV_TOOLS_OPTIONS_H

/* getopt_long takes any unambiguous prefix of a long option (--cont ran as
 * --continue-on-error where --count was meant): every option must be
 * spelled out. An unknown one is refused on stderr ("PROGRAM CMD: unknown
 * option", CMD being argv[0]), naming the nearest of opts that flags lists
 * (names separated by spaces; NULL: all): one it begins, or one within two
 * edits. 0, or -1 after the message. Stops at "--"; a required value is
 * skipped, so it may start with "--". */
struct option;
int bkv_exact_options(const char *program, int argc, char **argv, const struct option *opts, const char *flags);
/* Whether flags (names separated by spaces; NULL: any) holds flag. */
int bkv_flag_listed(const char *flags, const char *flag);

#endif
