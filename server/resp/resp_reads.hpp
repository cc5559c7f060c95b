// The RESP read commands (internal to server/resp/resp_*.cpp): GET with its
// single-flight wait (resp_commands.hpp says how windows work), MGET, and
// pipelined plain GETs answered in batches.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "server/resp/resp_commands.hpp"

namespace kcache::server::resp {

// GET key: the value, or null; waits within a single-flight window.
boost::asio::awaitable<void> get(RespShared& sh, Conn& c, const std::string& key, std::string& out);
// MGET key…: values and nulls, no single-flight.
boost::asio::awaitable<void> mget(RespShared& sh, const Conn& c, std::vector<std::string>& args,
                                  std::string& out);

// Pipelined plain GETs (a client sending many before reading replies):
// batchable_get() says whether a command is a GET that needs nothing but a
// lookup (two arguments, read allowed, no single-flight key);
// get_batch() answers cmds[begin, end) — all batchable — with one trip to
// the storage pool instead of one per command, exactly as execute() would,
// and returns how many it answered: it stops early once 1 MiB of values is
// held, so a batch never hoards more than one large value beyond that.
bool batchable_get(const RespShared& sh, const Conn& c, const std::vector<std::string>& args);
boost::asio::awaitable<std::size_t> get_batch(RespShared& sh, const Conn& c,
                                              const std::vector<std::vector<std::string>>& cmds,
                                              std::size_t begin, std::size_t end, std::string& out);

}  // namespace kcache::server::resp
