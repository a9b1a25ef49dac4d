#ifndef BKV_TOOLS_CLI_H
#define BKV_TOOLS_CLI_H

/* The database subcommands of `bloomkv`; argv[0] is the subcommand.
 * Exit status: 0 success, 1 not found, 2 usage error, 3 corruption or I/O. */
int bkv_cli_put(int argc, char **argv);
int bkv_cli_get(int argc, char **argv);
int bkv_cli_delete(int argc, char **argv);
int bkv_cli_scan(int argc, char **argv);
int bkv_cli_load(int argc, char **argv);
int bkv_cli_stats(int argc, char **argv);
int bkv_cli_find_value(int argc, char **argv);
int bkv_cli_compact(int argc, char **argv);
int bkv_cli_checkpoint(int argc, char **argv);
int bkv_cli_destroy(int argc, char **argv);
int bkv_cli_repair(int argc, char **argv);
int bkv_cli_make_table(int argc, char **argv);
int bkv_cli_ingest(int argc, char **argv);
int bkv_cli_check(int argc, char **argv);
int bkv_cli_value_index(int argc, char **argv);
/* Decodes an argument (hex when asked: pairs of [0-9a-fA-F], nothing else)
 * into a malloc'd buffer; -1 (and *out NULL) on bad input or no memory. */
int bkv_cli_decode(const char *s, int hex, char **out, size_t *len);
/* `bloomkv cluster find-value HOST:PORT VALUE` (tools/cluster.c). */
int bkv_cli_cluster(int argc, char **argv);
int bkv_cli_dump_sst(int argc, char **argv);
/* `bloomkv shell DB` (tools/shell.c). */
int bkv_cli_shell(int argc, char **argv);

#endif
