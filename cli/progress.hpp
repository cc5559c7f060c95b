// Spinner: a progress line on a terminal for a request whose length the
// server does not report (POST /v1/verify answers only when done).
//
// Draws "<frame> <label> <elapsed>" on stderr every 100 ms from its own
// thread, starting at once; finish() (or the destructor) stops the thread
// and erases the line ("\r" + erase-line), so whatever is printed next
// starts on a clean line. Disabled (draws nothing) when stderr is not a
// terminal.
// Thread safety: construct, finish and destroy on one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace kcache::cli {

class Spinner {
 public:
  Spinner(std::string label, bool enabled);
  ~Spinner();
  Spinner(const Spinner&) = delete;
  Spinner& operator=(const Spinner&) = delete;

  // Stops and erases the line; returns the seconds since construction.
  double finish();

  // True when stderr is a terminal.
  static bool stderr_is_tty();

 private:
  void draw(int frame) const;

  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool done_ = false;
};

}  // namespace kcache::cli
