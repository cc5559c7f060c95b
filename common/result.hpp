// Result<T>: a value or an Error, never an exception.
//
// Expected failures (not found, corrupt bytes, a dead peer) are values that
// callers must look at; exceptions are reserved for startup configuration
// errors and main(). std::expected would do, but clang-14 (the fuzzer build)
// cannot compile libstdc++ 12's <expected>, so this is a small equivalent.
// Thread safety: plain value type.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kcache {

// Error codes shared by all layers. Each names a class of failure a caller
// may want to react to differently; the message says what exactly happened.
enum class Errc {
  invalid_argument,  // the caller's input is malformed (a bad key, bad JSON)
  not_found,
  truncated,      // input ended before a declared length
  bad_magic,      // not a kcache bundle at all
  bad_version,    // a bundle format this build does not read
  too_large,      // a declared or decompressed size over the limit
  corrupt,        // checksum mismatch or undecodable content
  bad_signature,  // signature missing, malformed, or from an untrusted key
  key_mismatch,   // bundle is for a different cache key
  io_error,
  unavailable,
  timeout,
  full,
  internal,
  not_durable,  // written, but fewer replicas than asked for confirmed it in time
};

const char* errc_name(Errc e) noexcept;

struct Error {
  Errc code;
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // REQUIRES: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // REQUIRES: !ok().
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void> analogue.
struct Ok {};
using Status = Result<Ok>;

inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

inline const char* errc_name(Errc e) noexcept {
  switch (e) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::not_found: return "not_found";
    case Errc::truncated: return "truncated";
    case Errc::bad_magic: return "bad_magic";
    case Errc::bad_version: return "bad_version";
    case Errc::too_large: return "too_large";
    case Errc::corrupt: return "corrupt";
    case Errc::bad_signature: return "bad_signature";
    case Errc::key_mismatch: return "key_mismatch";
    case Errc::io_error: return "io_error";
    case Errc::unavailable: return "unavailable";
    case Errc::timeout: return "timeout";
    case Errc::full: return "full";
    case Errc::internal: return "internal";
    case Errc::not_durable: return "not_durable";
  }
  return "unknown";
}

}  // namespace kcache
