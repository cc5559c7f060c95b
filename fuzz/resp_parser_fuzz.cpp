// libFuzzer target for the RESP request parser (server/resp/resp_protocol.hpp).
// The input is fed twice: all at once, and in chunks whose sizes come from
// the input's first bytes (as a socket might deliver it). Both must give
// the same commands and the same error, nothing may crash, and no complete
// command may exceed the limits it was parsed under.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "server/resp/resp_protocol.hpp"

namespace {

using kcache::server::resp::Limits;
using kcache::server::resp::Parse;
using kcache::server::resp::Parser;

struct Outcome {
  std::vector<std::vector<std::string>> commands;
  std::string error;
};

Limits fuzz_limits() {
  Limits l;
  l.max_bulk_bytes = 300;
  l.max_args = 12;
  l.max_inline_bytes = 200;
  l.max_command_bytes = 700;
  return l;
}

void drain(Parser& p, const Limits& l, Outcome& o) {
  while (o.error.empty()) {
    auto c = p.next(l);
    if (c.status == Parse::incomplete) return;
    if (c.status == Parse::error) {
      o.error = c.error.empty() ? "(empty)" : c.error;
      return;
    }
    if (c.args.size() > l.max_args) std::abort();
    for (const auto& a : c.args) {
      if (a.size() > l.max_bulk_bytes && a.size() > l.max_inline_bytes) std::abort();
    }
    o.commands.push_back(std::move(c.args));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t chunk = 1 + data[0] % 17;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const Limits l = fuzz_limits();

  Outcome whole;
  Parser a;
  a.feed(in);
  drain(a, l, whole);

  Outcome pieces;
  Parser b;
  for (std::size_t pos = 0; pos < in.size() && pieces.error.empty(); pos += chunk) {
    b.feed(in.substr(pos, chunk));
    drain(b, l, pieces);
  }
  if (whole.commands != pieces.commands || whole.error != pieces.error) std::abort();
  return 0;
}
