// The ThreadSanitizer stage's positive control (tests/shell/tsan.sh): a plain data
// race that TSan must report, or the stage proves nothing.
#include <thread>
int x = 0;
int main() { std::thread a([] { for (int i = 0; i < 100000; ++i) ++x; }); for (int i = 0; i < 100000; ++i) ++x; a.join(); return x == 0; }
