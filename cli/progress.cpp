#include "cli/progress.hpp"

#include <unistd.h>

#include <cstdio>

#include "cli/units.hpp"

namespace kcache::cli {

namespace {
constexpr char k_frames[] = {'|', '/', '-', '\\'};
}

bool Spinner::stderr_is_tty() {
  return ::isatty(STDERR_FILENO) == 1;
}

Spinner::Spinner(std::string label, bool enabled)
    : label_(std::move(label)), start_(std::chrono::steady_clock::now()) {
  if (!enabled) {
    done_ = true;
    return;
  }
  draw(0);
  thread_ = std::thread([this] {
    for (int frame = 1; !stop_.load(); ++frame) {
      for (int i = 0; i < 10 && !stop_.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!stop_.load()) draw(frame);
    }
  });
}

Spinner::~Spinner() {
  finish();
}

void Spinner::draw(int frame) const {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line =
      std::string("\r\x1b[2K") + k_frames[frame % 4] + " " + label_ + " " + format_duration(s);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

double Spinner::finish() {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (done_) return s;
  done_ = true;
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  std::fputs("\r\x1b[2K", stderr);
  std::fflush(stderr);
  return s;
}

}  // namespace kcache::cli
