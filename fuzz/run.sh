#!/usr/bin/env bash
# Usage: fuzz/run.sh SECONDS
# Builds the fuzzers in build-fuzz/ (clang-14, ninja, ccache): the bundle
# reader's (seeded with valid bundles) and the RESP parser's (seeded with
# real commands); fuzzes each for SECONDS. Exits non-zero if a fuzzer finds
# a crash; reproducers land in build-fuzz/crashes/.
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-fuzz"
mkdir -p "$build"
echo '*' > "$build/.gitignore"  # keep build output out of version control

if [[ ! -f "$build/build.ninja" ]]; then
  CXX=${CXX:-clang++-14} cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCACHE_FUZZ=ON -DKCACHE_BUILD_TESTS=OFF
fi
ninja -C "$build" -j"${JOBS:-2}" bundle_reader_fuzz bundle_seed_gen resp_parser_fuzz

corpus="$build/corpus"
crashes="$build/crashes"
mkdir -p "$corpus" "$crashes"
"$build/fuzz/bundle_seed_gen" "$corpus"

"$build/fuzz/bundle_reader_fuzz" "$corpus" \
  -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$crashes/" -print_final_stats=1

resp_corpus="$build/resp-corpus"
mkdir -p "$resp_corpus"
# Seeds: the first byte picks the chunk size the input is fed in.
printf '\x03*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n' > "$resp_corpus/set-get"
printf '\x01PING hello\r\nMGET a b c\r\n' > "$resp_corpus/inline"
printf '\x07*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n' > "$resp_corpus/pipeline"
"$build/fuzz/resp_parser_fuzz" "$resp_corpus" \
  -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$crashes/resp-" -print_final_stats=1
