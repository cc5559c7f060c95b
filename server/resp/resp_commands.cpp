#include "server/resp/resp_commands.hpp"

#include <chrono>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "server/resp/resp_command_support.hpp"
#include "server/resp/resp_hot.hpp"
#include "server/resp/resp_reads.hpp"

namespace kcache::server::resp {

namespace asio = boost::asio;

namespace {

struct SetOptions {
  bool nx = false, xx = false;
  std::optional<std::chrono::system_clock::time_point> expires;
};

// Parses SET's options; appends the error and returns nullopt when bad.
std::optional<SetOptions> set_options(const std::vector<std::string>& args, std::string& out) {
  SetOptions o;
  bool have_expiry = false;
  for (std::size_t i = 3; i < args.size(); ++i) {
    const auto opt = lower(args[i]);
    if (opt == "nx" && !o.xx) {
      o.nx = true;
    } else if (opt == "xx" && !o.nx) {
      o.xx = true;
    } else if ((opt == "ex" || opt == "px" || opt == "exat" || opt == "pxat") && !have_expiry && i + 1 < args.size()) {
      auto v = to_int(args[++i]);
      if (!v) {
        error(out, "ERR value is not an integer or out of range");
        return std::nullopt;
      }
      if (*v <= 0 || *v > 100'000'000'000'000LL) {
        error(out, "ERR invalid expire time in 'set' command");
        return std::nullopt;
      }
      using namespace std::chrono;
      const auto now = system_clock::now();
      if (opt == "ex") o.expires = now + seconds(*v);
      if (opt == "px") o.expires = now + milliseconds(*v);
      if (opt == "exat") o.expires = system_clock::time_point(seconds(*v));
      if (opt == "pxat") o.expires = system_clock::time_point(milliseconds(*v));
      have_expiry = true;
    } else {
      error(out, "ERR syntax error");
      return std::nullopt;
    }
  }
  return o;
}

asio::awaitable<void> set(RespShared& sh, Conn& c, std::vector<std::string>& args, std::string& out) {
  auto& s = sh.s;
  auto opts = set_options(args, out);
  if (!opts) co_return;
  const std::string& key = args[1];
  const std::string skey = storage_key(key);
  const std::string type = cache_type(key);
  std::vector<std::uint8_t> value = wrap_value(args[2]);
  args[2].clear();
  args[2].shrink_to_fit();
  struct Outcome {
    Status status = Ok{};
    bool skipped = false;  // NX/XX condition not met
    bool stored = false;
    bool too_many_expiries = false;  // --resp-max-expiries reached: nothing stored
  };
  const auto meta = entry_meta(key);
  auto set_job = [&sh, &skey, &value, &meta, &opts] {
    Outcome o;
    auto& b = sh.s.backend;
    auto h = b.head(skey);
    bool present = static_cast<bool>(h);
    if (!h && h.error().code != Errc::not_found) {
      o.status = h.error();
      return o;
    }
    if (present && sh.expiries.expired(skey)) {
      (void)b.remove(skey);
      sh.expiries.clear(skey);
      present = false;
    }
    if ((opts->nx && present) || (opts->xx && !present)) {
      o.skipped = true;
      return o;
    }
    if (opts->expires && !sh.expiries.has_room(skey)) {
      o.too_many_expiries = true;
      return o;
    }
    if (present) {
      // Redis overwrites; storage objects are immutable: replace it.
      auto rm = b.remove(skey);
      forget(sh, skey);  // gone even if the put below fails
      if (!rm && rm.error().code != Errc::not_found) {
        o.status = rm.error();
        return o;
      }
    }
    // The namespace's quota, as for an HTTP upload (server/namespaces.hpp):
    // admitted and stored under its lock; out of room is storage's OOM.
    auto ns = sh.s.namespaces.find(sh.ns);
    const bool quota = ns && (ns->spec.quota_bytes || ns->spec.quota_entries);
    std::unique_lock<std::mutex> admit_lock;
    if (quota) {
      admit_lock = std::unique_lock<std::mutex>(*ns->admit_mu);
      auto admitted = sh.s.namespaces.admit(*ns, value.size());
      if (!admitted) {
        o.status = admitted.error();
        return o;
      }
      if (!admitted->evicted.empty()) {
        sh.s.metrics.ns_quota_evicted(ns->name(), admitted->evicted.size(), admitted->evicted_bytes);
        for (const auto& k : admitted->evicted) forget(sh, k);
      }
    }
    auto put = b.put(skey, value, meta);
    if (!put) {
      o.status = put.error();
      return o;
    }
    if (opts->expires) sh.expiries.set(skey, *opts->expires);
    else sh.expiries.clear(skey);
    forget(sh, skey);  // a replaced value, or one that now has an expiry, leaves the hot tier
    o.stored = true;
    return o;
  };
  auto o = co_await run_blocking(s.pool, set_job);
  if (!o.status) {
    storage_error(s, out, "put", o.status.error());
    co_return;
  }
  if (o.too_many_expiries) {
    s.metrics.resp_command("set", type, "refused");
    error(out, "ERR this server already remembers --resp-max-expiries keys with an expiry; "
               "SET without EX/PX, or retry once some have expired");
    co_return;
  }
  if (o.skipped) {
    s.metrics.resp_command("set", type, "not_set");
    null(out, c.proto);
    co_return;
  }
  s.metrics.resp_command("set", type, "stored");
  s.metrics.stored(meta.target, meta.mode, value.size());  // with the 8-byte envelope
  // Wake the GETs waiting on this key (single-flight) and end our window.
  auto land_job = [&sh, &c, &skey] {
    if (auto it = c.flights.find(skey); it != c.flights.end()) {
      sh.flights->release(skey, it->second);
      c.flights.erase(it);
    }
    sh.s.landings.publish(skey);
    return true;
  };
  co_await run_blocking(s.pool, land_job);
  simple(out, "OK");
}

// EXISTS (counting repeats, as Redis does) and DEL (counting removals).
asio::awaitable<void> exists_or_del(RespShared& sh, bool del, std::vector<std::string>& args, std::string& out) {
  struct Count {
    long long n = 0;
    std::optional<Error> error;
  };
  auto job = [&sh, &args, del] {
    Count c;
    for (std::size_t i = 1; i < args.size(); ++i) {
      const auto skey = storage_key(args[i]);
      const bool expired = sh.expiries.expired(skey);
      if (del || expired) {
        auto st = sh.s.backend.remove(skey);
        sh.expiries.clear(skey);
        forget(sh, skey);
        if (st && !expired) ++c.n;
        else if (!st && st.error().code != Errc::not_found) c.error = st.error();
        continue;
      }
      auto h = sh.s.backend.head(skey);
      if (h) ++c.n;
      else if (h.error().code != Errc::not_found) c.error = h.error();
    }
    return c;
  };
  auto c = co_await run_blocking(sh.s.pool, job);
  if (c.error) {
    storage_error(sh.s, out, del ? "remove" : "head", *c.error);
    co_return;
  }
  integer(out, c.n);
}

void hello_reply(const RespShared& sh, const Conn& c, std::string& out) {
  map_header(out, 7, c.proto);
  bulk(out, "server");
  bulk(out, "kcache");
  bulk(out, "version");
  bulk(out, "7.0.0");
  bulk(out, "proto");
  integer(out, c.proto);
  bulk(out, "id");
  integer(out, static_cast<long long>(c.id));
  bulk(out, "mode");
  bulk(out, "standalone");
  bulk(out, "role");
  bulk(out, "master");
  bulk(out, "modules");
  array_header(out, 0);
  (void)sh;
}

asio::awaitable<void> info(RespShared& sh, std::string& out) {
  auto job = [&sh] { return sh.s.backend.usage(); };
  auto u = co_await run_blocking(sh.s.pool, job);
  std::string text = "# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nkcache_version:0.1.0\r\n";
  text += "kcache_storage:" + sh.s.backend.name() + "\r\n";
  text += "uptime_in_seconds:" + std::to_string(static_cast<long long>(sh.s.metrics.uptime_seconds())) + "\r\n";
  text += "\r\n# Clients\r\nconnected_clients:" + std::to_string(sh.s.connections_active()) + "\r\n";
  text += "\r\n# Memory\r\nused_memory:" + std::to_string(u ? u->bytes : 0) + "\r\n";
  text += "maxmemory:" + std::to_string(u ? u->capacity_bytes : 0) + "\r\n";
  text += "\r\n# Keyspace\r\n";
  if (u && u->entries) text += "db0:keys=" + std::to_string(u->entries) + ",expires=0,avg_ttl=0\r\n";
  bulk(out, text);
}

// AUTH [user] token: the token is checked against the tokens (and the
// namespaces file); the user name names the namespace the connection then
// acts in ("default": the token's only namespace, else default).
void auth(RespShared& sh, Conn& c, const std::optional<std::string>& user, const std::string& token,
          std::string& out) {
  if (sh.s.authorizer.token_count() == 0) {
    error(out, "ERR AUTH <password> called without any password configured for the default user. "
               "Are you sure your configuration is correct?");
    return;
  }
  Conn probe = c;
  probe.token = token;
  probe.user = user && sh.s.namespaces.find(*user) ? user : std::nullopt;
  // Any namespace the credentials resolve to (the session then runs the
  // connection's commands in that namespace's RespShared).
  if (!credentials_read(sh, probe)) {
    error(out, "WRONGPASS invalid username-password pair or user is disabled.");
    return;
  }
  c.token = token;
  // A user name that is no configured namespace is ignored, as before
  // namespaces (Redis clients send "default" or whatever their URL holds);
  // the token then acts in its own namespace, never one it has no role in.
  c.user = user && sh.s.namespaces.find(*user) ? user : std::nullopt;
  simple(out, "OK");
}

}  // namespace

void release_flights(RespShared& sh, Conn& c) {
  for (const auto& [skey, token] : c.flights) {
    sh.flights->release(skey, token);
    sh.s.landings.publish(skey);
  }
  c.flights.clear();
}

namespace {

using Args = std::vector<std::string>;

// Every handler answers into `out`; false closes the connection (QUIT).
// Handlers get arguments whose count the table has already checked.
using Handler = asio::awaitable<bool> (*)(RespShared&, Conn&, Args&, std::string&);

struct CommandSpec {
  const char* name;  // lower case
  int arity;         // as Redis counts it: n exactly, or -n for at least n (the name included)
  Role role;         // needed before the handler runs; none: the handler decides (AUTH, HELLO, QUIT)
  Handler handler;
};

asio::awaitable<bool> cmd_quit(RespShared&, Conn&, Args&, std::string& out) {
  simple(out, "OK");
  co_return false;
}

asio::awaitable<bool> cmd_auth(RespShared& sh, Conn& c, Args& args, std::string& out) {
  if (args.size() > 3) wrong_args(out, "auth");
  else auth(sh, c, args.size() == 3 ? std::optional<std::string>(args[1]) : std::nullopt, args.back(), out);
  co_return true;
}

asio::awaitable<bool> cmd_hello(RespShared& sh, Conn& c, Args& args, std::string& out) {
  const std::size_t n = args.size();
  if (n >= 2) {
    auto v = to_int(args[1]);
    if (!v) {
      error(out, "ERR Protocol version is not an integer or out of range");
      co_return true;
    }
    if (*v != 2 && *v != 3) {
      error(out, "NOPROTO unsupported protocol version");
      co_return true;
    }
  }
  for (std::size_t i = 2; i < n; ++i) {
    const auto opt = lower(args[i]);
    if (opt == "auth" && i + 2 < n) {
      std::string auth_out;
      auth(sh, c, args[i + 1], args[i + 2], auth_out);
      if (auth_out[0] == '-') {
        out += auth_out;
        co_return true;
      }
      i += 2;
    } else if (opt == "setname" && i + 1 < n) {
      c.name = args[++i];
    } else {
      error(out, "ERR Syntax error in HELLO option '" + args[i] + "'");
      co_return true;
    }
  }
  if (!allowed(sh, c, Role::read, "hello", out)) co_return true;
  if (n >= 2) c.proto = static_cast<int>(*to_int(args[1]));
  hello_reply(sh, c, out);
  co_return true;
}

asio::awaitable<bool> cmd_get(RespShared& sh, Conn& c, Args& args, std::string& out) {
  co_await get(sh, c, args[1], out);
  co_return true;
}

asio::awaitable<bool> cmd_set(RespShared& sh, Conn& c, Args& args, std::string& out) {
  co_await set(sh, c, args, out);
  co_return true;
}

asio::awaitable<bool> cmd_mget(RespShared& sh, Conn& c, Args& args, std::string& out) {
  co_await mget(sh, c, args, out);
  co_return true;
}

asio::awaitable<bool> cmd_exists(RespShared& sh, Conn&, Args& args, std::string& out) {
  co_await exists_or_del(sh, false, args, out);
  co_return true;
}

asio::awaitable<bool> cmd_del(RespShared& sh, Conn&, Args& args, std::string& out) {
  co_await exists_or_del(sh, true, args, out);
  co_return true;
}

asio::awaitable<bool> cmd_ping(RespShared&, Conn&, Args& args, std::string& out) {
  if (args.size() == 1) simple(out, "PONG");
  else if (args.size() == 2) bulk(out, args[1]);
  else wrong_args(out, "ping");
  co_return true;
}

asio::awaitable<bool> cmd_echo(RespShared&, Conn&, Args& args, std::string& out) {
  bulk(out, args[1]);
  co_return true;
}

asio::awaitable<bool> cmd_select(RespShared&, Conn&, Args& args, std::string& out) {
  if (args[1] == "0") simple(out, "OK");
  else error(out, "ERR DB index is out of range (kcache has database 0 only)");
  co_return true;
}

asio::awaitable<bool> cmd_client(RespShared&, Conn& c, Args& args, std::string& out) {
  const std::size_t n = args.size();
  const auto sub = n >= 2 ? lower(args[1]) : std::string();
  if (sub == "setinfo" && n == 4) simple(out, "OK");
  else if (sub == "setname" && n == 3) c.name = args[2], simple(out, "OK");
  else if (sub == "getname" && n == 2) c.name.empty() ? null(out, c.proto) : bulk(out, c.name);
  else if (sub == "id" && n == 2) integer(out, static_cast<long long>(c.id));
  else error(out, "ERR unknown or unsupported CLIENT subcommand '" + (n >= 2 ? args[1] : std::string()) + "'");
  co_return true;
}

asio::awaitable<bool> cmd_info(RespShared& sh, Conn&, Args&, std::string& out) {
  co_await info(sh, out);
  co_return true;
}

asio::awaitable<bool> cmd_command(RespShared&, Conn&, Args& args, std::string& out) {
  const auto sub = args.size() >= 2 ? lower(args[1]) : std::string();
  if (sub == "count") integer(out, 0);
  else array_header(out, 0);  // COMMAND, COMMAND DOCS, COMMAND INFO: nothing to advertise
  co_return true;
}

asio::awaitable<bool> cmd_config(RespShared&, Conn&, Args& args, std::string& out) {
  if (args.size() >= 2 && lower(args[1]) == "get") array_header(out, 0);
  else error(out, "ERR kcache supports CONFIG GET only (and answers it with nothing)");
  co_return true;
}

// The commands (docs/protocol.md "RESP"). Roles: reads need read (Redis
// answers NOAUTH to any command before AUTH), SET write, DEL admin (as
// DELETE /v1/artifacts).
constexpr CommandSpec k_commands[] = {
    {"quit", -1, Role::none, cmd_quit},        {"auth", -2, Role::none, cmd_auth},
    {"hello", -1, Role::none, cmd_hello},      {"get", 2, Role::read, cmd_get},
    {"set", -3, Role::write, cmd_set},         {"mget", -2, Role::read, cmd_mget},
    {"exists", -2, Role::read, cmd_exists},    {"del", -2, Role::admin, cmd_del},
    {"ping", -1, Role::read, cmd_ping},        {"echo", 2, Role::read, cmd_echo},
    {"select", 2, Role::read, cmd_select},     {"client", -1, Role::read, cmd_client},
    {"info", -1, Role::read, cmd_info},        {"command", -1, Role::read, cmd_command},
    {"config", -1, Role::read, cmd_config},
};

const CommandSpec* find_command(const std::string& name) {
  for (const CommandSpec& c : k_commands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

}  // namespace

asio::awaitable<bool> execute(RespShared& sh, Conn& c, std::vector<std::string>& args, std::string& out) {
  if (args.empty()) co_return true;
  const std::string name = lower(args[0]);
  const CommandSpec* cmd = find_command(name);
  if (cmd == nullptr) {
    // Unknown commands get the role check first, as Redis answers NOAUTH before anything else.
    if (!allowed(sh, c, Role::read, name, out)) co_return true;
    std::string msg = "ERR unknown command '" + args[0] + "', with args beginning with: ";
    for (std::size_t i = 1; i < args.size() && i < 4; ++i) msg += "'" + args[i].substr(0, 64) + "' ";
    error(out, msg);
    co_return true;
  }
  const auto n = static_cast<int>(args.size());
  if (cmd->role != Role::none && !allowed(sh, c, cmd->role, name, out)) co_return true;
  if (cmd->arity > 0 ? n != cmd->arity : n < -cmd->arity) {
    wrong_args(out, name);
    co_return true;
  }
  co_return co_await cmd->handler(sh, c, args, out);
}

}  // namespace kcache::server::resp
