// kcache._core.Client: the C++ client for Python. The GIL is released for
// every lookup, download, upload and wait, and re-acquired only to run the
// compile callback, so other Python threads progress while a rank waits.
#include <pybind11/stl.h>

#include <exception>
#include <map>

#include "client/client.hpp"
#include "client/python/bindings.hpp"

namespace py = pybind11;

namespace kcache::python {

namespace {

py::dict stats_dict(const ClientStats& s) {
  py::dict d;
  py::dict hits;
  hits["node"] = s.node_hits;
  hits["server"] = s.server_hits;
  d["hits"] = hits;
  d["node_hits"] = s.node_hits;
  d["server_hits"] = s.server_hits;
  d["misses"] = s.misses;
  d["lease_waits"] = s.lease_waits;
  d["lease_busy"] = s.lease_busy;
  d["compiles"] = s.compiles;
  d["local_compiles"] = s.local_compiles;
  d["compile_failures"] = s.compile_failures;
  d["compile_seconds_spent"] = s.compile_seconds_spent;
  d["compile_seconds_saved"] = s.compile_seconds_saved;
  d["bytes_fetched"] = s.bytes_fetched;
  d["bytes_uploaded"] = s.bytes_uploaded;
  d["uploads"] = s.uploads;
  d["upload_failures"] = s.upload_failures;
  d["server_errors"] = s.server_errors;
  d["refused"] = s.refused;
  d["breaker"] = s.breaker;
  return d;
}

// (bundle bytes, source name), as get_or_compile returns them.
py::tuple fetched_tuple(const Fetched& f) {
  return py::make_tuple(to_bytes(f.bundle), source_name(f.source));
}

// Runs one of the single-flight calls with a Python compile callback, the
// GIL released while it waits; the callback's own exception is re-raised
// after the lease is released.
template <typename Call>
std::optional<Fetched> run_single_flight(py::object compile_fn, Call call) {
  std::exception_ptr raised;
  CompileFn fn = [&]() -> Result<std::vector<std::uint8_t>> {
    py::gil_scoped_acquire acquire;
    try {
      py::object out = compile_fn();
      if (!py::isinstance<py::bytes>(out)) {
        throw py::type_error("compile_fn must return bytes (a kcache bundle)");
      }
      auto s = bytes_span(py::reinterpret_borrow<py::bytes>(out));
      return std::vector<std::uint8_t>(s.begin(), s.end());
    } catch (...) {
      raised = std::current_exception();
      return make_error(Errc::internal, "compile_fn raised");
    }
  };
  Result<std::optional<Fetched>> r = make_error(Errc::internal, "unset");
  {
    py::gil_scoped_release release;
    r = call(fn);
  }
  if (raised) std::rethrow_exception(raised);
  return unwrap(std::move(r));
}

py::dict config_dict(const ClientConfig& c) {
  py::dict d;
  d["url"] = c.url;
  d["namespace"] = c.ns;
  d["local_dir"] =
      c.node_tier ? py::object(py::str(c.local_dir)) : py::object(py::none());
  d["local_max_bytes"] = c.local_max_bytes;
  d["mode"] = c.mode;
  d["target"] = c.target;
  d["read_only"] = c.read_only;
  d["disabled"] = c.disabled;
  d["trusted_keys"] = c.trusted_keys.size();
  d["signing"] = !c.signing_key.empty();
  d["wait_budget_ms"] = c.wait_budget_ms;
  d["request_timeout_ms"] = c.request_timeout_ms;
  d["connect_timeout_ms"] = c.connect_timeout_ms;
  return d;
}

Result<ClientConfig> config_from(const std::map<std::string, std::string>& environ) {
  return ClientConfig::from_env([&](const char* name) -> const char* {
    auto it = environ.find(name);
    return it == environ.end() ? nullptr : it->second.c_str();
  });
}

std::shared_ptr<Client> make_client(ClientConfig cfg) {
  auto c = unwrap(Client::create(std::move(cfg)));
  return std::shared_ptr<Client>(std::move(c));
}

}  // namespace

void bind_client(py::module_& m) {
  py::class_<Client, std::shared_ptr<Client>>(
      m, "Client",
      "kcache client: node tier, server, single-flight compile."
      " See docs/client.md.")
      .def(py::init(
               [](std::optional<std::string> url, std::optional<std::string> token,
                  std::optional<std::string> local_dir, std::optional<std::string> ca_file,
                  std::optional<std::string> client_cert, std::optional<std::string> client_key,
                  std::optional<std::uint64_t> local_max_bytes, bool read_only, bool disabled,
                  std::vector<std::string> trusted_keys, std::optional<std::string> signing_key,
                  std::optional<int> connect_timeout_ms, std::optional<int> request_timeout_ms,
                  std::optional<int> wait_budget_ms, std::optional<int> long_poll_ms,
                  std::optional<int> retries, std::optional<int> breaker_threshold,
                  std::optional<int> breaker_cooldown_ms, std::optional<std::string> miss_log,
                  std::optional<std::string> log_level, std::optional<std::string> client_name,
                  std::optional<std::string> target, std::optional<std::string> ns) {
                 ClientConfig c;
                 if (url) c.url = *url;
                 if (token) c.token = *token;
                 if (local_dir) {
                   if (*local_dir == "none" || local_dir->empty()) {
                     c.node_tier = false;
                   } else {
                     c.local_dir = *local_dir;
                   }
                 }
                 if (ca_file) c.ca_file = *ca_file;
                 if (client_cert) c.client_cert = *client_cert;
                 if (client_key) c.client_key = *client_key;
                 if (local_max_bytes) c.local_max_bytes = *local_max_bytes;
                 c.read_only = read_only;
                 c.disabled = disabled;
                 c.trusted_keys = std::move(trusted_keys);
                 if (signing_key) c.signing_key = *signing_key;
                 if (connect_timeout_ms) c.connect_timeout_ms = *connect_timeout_ms;
                 if (request_timeout_ms) c.request_timeout_ms = *request_timeout_ms;
                 if (wait_budget_ms) c.wait_budget_ms = *wait_budget_ms;
                 if (long_poll_ms) c.long_poll_ms = *long_poll_ms;
                 if (retries) c.retries = *retries;
                 if (breaker_threshold) c.breaker_threshold = *breaker_threshold;
                 if (breaker_cooldown_ms) c.breaker_cooldown_ms = *breaker_cooldown_ms;
                 if (miss_log) c.miss_log = *miss_log;
                 if (log_level) c.log_level = *log_level;
                 if (client_name) c.client_name = *client_name;
                 if (target) c.target = *target;
                 if (ns) c.ns = *ns;
                 return make_client(std::move(c));
               }),
           py::arg("url") = std::nullopt, py::arg("token") = std::nullopt,
           py::arg("local_dir") = std::nullopt, py::kw_only(), py::arg("ca_file") = std::nullopt,
           py::arg("client_cert") = std::nullopt, py::arg("client_key") = std::nullopt,
           py::arg("local_max_bytes") = std::nullopt, py::arg("read_only") = false,
           py::arg("disabled") = false, py::arg("trusted_keys") = std::vector<std::string>{},
           py::arg("signing_key") = std::nullopt, py::arg("connect_timeout_ms") = std::nullopt,
           py::arg("request_timeout_ms") = std::nullopt, py::arg("wait_budget_ms") = std::nullopt,
           py::arg("long_poll_ms") = std::nullopt, py::arg("retries") = std::nullopt,
           py::arg("breaker_threshold") = std::nullopt,
           py::arg("breaker_cooldown_ms") = std::nullopt, py::arg("miss_log") = std::nullopt,
           py::arg("log_level") = std::nullopt, py::arg("client_name") = std::nullopt,
           py::arg("target") = std::nullopt, py::arg("namespace") = std::nullopt,
           "A client configured in code. url=None: node tier only; local_dir=None: ~/.cache/kcache,"
           " local_dir='none': no node tier. trusted_keys / signing_key: PEM text or file paths.")
      .def_static(
          "from_env",
          [](std::optional<std::map<std::string, std::string>> environ) {
            return make_client(unwrap(environ ? config_from(*environ) : ClientConfig::from_env()));
          },
          py::arg("environ") = std::nullopt,
          "A client configured from the KCACHE_* environment (docs/client.md), or from `environ`, a "
          "dict read instead of the process environment (kcache.configure's overrides).")
      .def(
          "get",
          [](Client& self, const std::string& key) -> py::object {
            Result<std::optional<std::vector<std::uint8_t>>> r =
                make_error(Errc::internal, "unset");
            {
              py::gil_scoped_release release;
              r = self.get(key);
            }
            auto v = unwrap(std::move(r));
            if (!v) return py::none();
            return to_bytes(*v);
          },
          py::arg("key"), "Verified bundle bytes from the node tier or the server, or None.")
      .def(
          "put",
          [](Client& self, const std::string& key, const py::bytes& data) {
            auto span = bytes_span(data);
            Result<bool> r = make_error(Errc::internal, "unset");
            {
              py::gil_scoped_release release;  // `data` stays referenced by the caller
              r = self.put(key, span);
            }
            return unwrap(std::move(r));
          },
          py::arg("key"), py::arg("data"),
          "Publishes a bundle to the node tier and the server; False when the upload failed. "
          "Raises KcacheError for a bad bundle or one this client would refuse on get.")
      .def(
          "get_or_compile",
          [](Client& self, const std::string& key, py::object compile_fn,
             std::optional<std::string> explanation) {
            auto f = run_single_flight(
                compile_fn, [&](const CompileFn& fn) -> Result<std::optional<Fetched>> {
                  auto r = self.get_or_compile(key, fn, explanation.value_or(std::string()));
                  if (!r.ok()) return r.error();
                  return std::optional<Fetched>(std::move(r).value());
                });
            return fetched_tuple(*f);
          },
          py::arg("key"), py::arg("compile_fn"), py::arg("explanation") = std::nullopt,
          "(bundle bytes, source): source is 'node', 'server', 'compiled' or 'local'. compile_fn() "
          "-> bytes runs only on a miss this process must compile; its exception propagates after "
          "the lease is released. The GIL is released while waiting.")
      .def(
          "try_get_or_compile",
          [](Client& self, const std::string& key, py::object compile_fn,
             std::optional<std::string> explanation) -> py::object {
            auto f = run_single_flight(compile_fn, [&](const CompileFn& fn) {
              return self.try_get_or_compile(key, fn, explanation.value_or(std::string()));
            });
            if (!f) return py::none();
            return fetched_tuple(*f);
          },
          py::arg("key"), py::arg("compile_fn"), py::arg("explanation") = std::nullopt,
          "get_or_compile without waiting: None when another process holds the key's lease "
          "(nothing compiled, nothing waited for; a key tried again counts one miss).")
      .def(
          "lookup",
          [](Client& self, const std::string& key) -> py::object {
            Result<std::optional<Fetched>> r = make_error(Errc::internal, "unset");
            {
              py::gil_scoped_release release;
              r = self.lookup(key);
            }
            auto f = unwrap(std::move(r));
            if (!f) return py::none();
            return fetched_tuple(*f);
          },
          py::arg("key"), "get(), saying which tier answered: (bundle bytes, 'node' or 'server'), or None.")
      .def("report_cold_start", &Client::report_cold_start, py::arg("json"),
           py::call_guard<py::gil_scoped_release>(),
           "Adds a rank's cold-start counters (a JSON object) to the server's metrics; False "
           "without a server or when it failed (never retried).")
      .def("note_check_failure", &Client::note_check_failure, py::arg("key"),
           py::arg("explanation"), py::arg("failures"),
           "Writes a miss-log record (kind 'check_failure') for a stored entry found but not "
           "used because the caller's checks of it failed; `kcache explain` shows it.")
      .def("drop_node_copy", &Client::drop_node_copy, py::arg("key"),
           "Removes key's bundle from the node tier (refused after loading); a bad key or no "
           "node tier is nothing to do.")
      .def(
          "stats", [](const Client& self) { return stats_dict(self.stats()); },
          "This process's counters for this client (hits by tier, misses, compiles, bytes …).")
      .def("stats_json", &Client::stats_json)
      .def("stats_line", &Client::stats_line)
      .def_property_readonly(
          "config", [](const Client& self) { return config_dict(self.config()); },
          "The effective configuration, without secrets.");

  m.def(
      "config_from_env",
      [](const std::map<std::string, std::string>& environ) {
        return config_dict(unwrap(config_from(environ)));
      },
      py::arg("environ"),
      "The configuration the client would take from this environment (a dict standing in for "
      "os.environ), without secrets; raises KcacheError on a malformed value. kcache.settings' "
      "agreement test compares its parsing with this.");
}

}  // namespace kcache::python
