#!/usr/bin/env bash
# Relinks a built `bloomkv-bench` as one static binary, for a machine that
# has none of Debian's libraries (a many-core box borrowed for a scaling
# run): every shared library on its link line becomes the archive Debian
# ships beside it, with what those archives need after them.
#
#   bench/static_tool.sh BUILD_DIR OUTPUT
#
# BUILD_DIR is a CMake build of this tree (with -DBKV_WITH_PEERS=ON for
# LevelDB and RocksDB in the same binary). Needs Debian's static archives:
# libleveldb-dev, librocksdb-dev, libsnappy-dev, libgflags-dev,
# libxxhash-dev, libzstd-dev, liblz4-dev, libjson-c-dev, zlib1g-dev,
# libbz2-dev.
set -eu
build=$(cd "$1" && pwd)
out=$(realpath -m "$2")
link=$(cat "$build/CMakeFiles/bloomkv-bench.dir/link.txt")
link=$(printf '%s\n' "$link" | sed -E 's#(/usr/lib/[^ ]*/lib[^ /]*)\.so#\1.a#g; s#-o bloomkv-bench #-o '"$out"' #')
extra=""
case "$link" in *librocksdb.a*) extra="/usr/lib/x86_64-linux-gnu/libsnappy.a /usr/lib/x86_64-linux-gnu/libgflags.a /usr/lib/x86_64-linux-gnu/libz.a /usr/lib/x86_64-linux-gnu/libbz2.a" ;; esac
case "$link" in *libleveldb.a*) case "$extra" in *libsnappy.a*) ;; *) extra="$extra /usr/lib/x86_64-linux-gnu/libsnappy.a" ;; esac ;; esac
cd "$build"
# shellcheck disable=SC2086
eval "$link $extra -static -lstdc++ -lpthread -ldl -lm"
echo "static tool: $out ($(du -h "$out" | cut -f1))"
