// What the RESP commands share (internal to server/resp/resp_*.cpp): argument
// parsing, error replies, the auth check, which keys are single-flight keys,
// and the storage lookup that honours expiries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "server/resp/resp_commands.hpp"

namespace kcache::server::resp {

std::string lower(std::string_view s);
std::optional<long long> to_int(std::string_view s);
void wrong_args(std::string& out, std::string_view cmd);
// Counts the failure, logs it, and appends -OOM (storage full) or -ERR.
void storage_error(Services& s, std::string& out, const char* op, const Error& e);
// Allowed? Appends the refusal (-NOAUTH, -NOPERM) to `out` when not.
bool allowed(RespShared& sh, const Conn& c, Role needed, std::string_view cmd, std::string& out);
// Allowed? Nothing appended.
bool may(const RespShared& sh, const Conn& c, Role needed);
// The namespace c's credentials act in (AUTH's user name, else the token's
// only namespace, else "default"); "default" when they are refused.
std::string namespace_of(const RespShared& sh, const Conn& c);
// Whether c's credentials hold the read role in the namespace they resolve
// to (any namespace), or name a known token held in several namespaces.
bool credentials_read(const RespShared& sh, const Conn& c);
// A key with one of --resp-flight-prefixes, while windows are on.
bool flight_eligible(const RespShared& sh, std::string_view key);
// A storage lookup that treats an expired key as absent (and removes it);
// a value without its envelope is corrupt. A value read fills the hot tier
// (server/resp/resp_hot.hpp).
Result<std::vector<std::uint8_t>> lookup(RespShared& sh, const std::string& skey);

}  // namespace kcache::server::resp
