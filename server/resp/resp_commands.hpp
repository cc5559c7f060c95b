// The RESP endpoint's commands (docs/protocol.md "RESP"): what stock
// PyTorch and Triton remote caches, redis-py, redis-cli and redis-benchmark
// send — GET, SET (EX, PX, EXAT, PXAT, NX, XX), MGET, EXISTS, DEL, PING,
// ECHO, AUTH, SELECT 0, CLIENT, HELLO (RESP2 only), INFO, COMMAND, CONFIG
// GET, QUIT — over the same storage, auth, limits and metrics as the HTTP
// API. Everything else is a clear -ERR.
//
// Roles: GET, MGET, EXISTS need read; SET needs write; DEL needs admin (as
// DELETE /v1/artifacts). With --tokens a connection is unauthenticated until
// AUTH (or HELLO … AUTH); --anonymous-read lets it read meanwhile.
//
// Implicit single-flight (--resp-flight-window-ms, --resp-flight-prefixes):
// a GET miss on a key with a listed prefix, by a connection with the write
// role, makes the caller the key's compiler for the window (it gets the miss at once); other GETs of the key
// wait until its SET lands, the compiler's connection closes, or the window
// ends — then answer the value, or a miss without becoming compilers. A
// waiting GET whose client closes ends at once, with no reply, and its
// connection closes.
// Thread safety: a Conn belongs to one session; RespShared is shared.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "server/http_front/client_watch.hpp"
#include "server/leases/lease_table.hpp"
#include "server/resp/resp_keyspace.hpp"
#include "server/resp/resp_protocol.hpp"
#include "server/services.hpp"

namespace kcache::server::resp {

class RespTenants;

// What every RESP connection of one namespace shares (the default
// namespace's is the Server's; the others' are RespTenants', each with the
// Services of its namespace's store: server/resp/resp_tenants.hpp).
struct RespShared {
  RespShared(Services& services, std::unique_ptr<LeaseTable> flight_table)
      : s(services), flights(std::move(flight_table)) {}
  Services& s;
  std::string ns = "default";
  RespTenants* tenants = nullptr;  // set on the default namespace's: every namespace's RespShared
  Limits limits;
  Expiries expiries;
  std::unique_ptr<LeaseTable> flights;  // single-flight windows (in-process)
  std::atomic<std::uint64_t> next_client_id{0};
  std::atomic<std::uint64_t> open{0};  // RESP connections open now (--resp-max-connections)
};

struct Conn {
  std::uint64_t id = 0;
  std::string peer;  // "ip:port"
  bool loopback = false;
  std::optional<std::string> token;  // from AUTH
  // AUTH's user name: the namespace the connection acts in (docs/namespaces.md;
  // "default" or none: the token's only namespace, else "default").
  std::optional<std::string> user;
  std::string name;                  // CLIENT SETNAME
  int proto = 2;                     // HELLO 3 switches to RESP3 (redis-py 8 asks for it by default)
  std::map<std::string, std::string> flights;  // storage key -> lease token: keys this connection compiles
  // Set by the session: starts watching the connection for the client
  // going away while a GET waits in a single-flight window (at most once
  // per command; the session stops the watch when the command is done).
  std::function<std::shared_ptr<ClientWatch>()> watch_client;
};

// Runs one command, appending its reply to `out`. Returns false when the
// connection should close after the reply (QUIT).
boost::asio::awaitable<bool> execute(RespShared& sh, Conn& c, std::vector<std::string>& args, std::string& out);

// Ends the single-flight windows a closing connection holds, waking their
// waiters (blocking: call on the pool).
void release_flights(RespShared& sh, Conn& c);

}  // namespace kcache::server::resp
