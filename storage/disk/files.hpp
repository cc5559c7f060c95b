// POSIX file helpers for the disk backend: durable writes, directory fsync
// and whole-file reads, with errno mapped onto Errc (ENOSPC and EDQUOT are
// Errc::full, ENOENT is Errc::not_found, the rest Errc::io_error).
// Thread safety: stateless.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace kcache::storage::disk {

Error errno_error(const std::string& what, int err);

// Creates `path` (O_EXCL), writes all of `bytes`, fsyncs and closes it.
// On failure the partial file is unlinked.
Status write_file_synced(const std::string& path, std::span<const std::uint8_t> bytes,
                         bool sync = true);

Status fsync_dir(const std::string& path);

// syncfs(2) on the file system that holds `path`: every file written there
// so far is on disk when it returns (one call for many files).
Status sync_filesystem(const std::string& path);

// Reads the whole file. The descriptor stays open for the whole read, so an
// unlink() by eviction meanwhile cannot truncate what we return: on POSIX
// the inode lives until its last descriptor closes.
Result<std::vector<std::uint8_t>> read_file(const std::string& path);

// Reads bytes [offset, offset + length) of the file with pread(), fewer
// where it ends. Errc::corrupt when the file's size is not expected_size
// (a truncated or grown object), before reading anything.
Result<std::vector<std::uint8_t>> read_file_range(const std::string& path, std::uint64_t offset,
                                                  std::uint64_t length, std::uint64_t expected_size);

Status make_dir(const std::string& path);  // ok if it exists

// Names in `dir` (no "." or ".."); empty on error.
std::vector<std::string> list_dir(const std::string& dir);

// Random 16 hex characters for temp file names.
std::string random_token();

}  // namespace kcache::storage::disk
