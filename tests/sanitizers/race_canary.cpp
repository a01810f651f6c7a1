// race_canary.cpp - must be stopped under NOVA_TSAN: two threads write one
// int without synchronization. It proves ThreadSanitizer is on.
#include <cstdio>
#include <thread>

int shared = 0;

int main() {
  std::thread a([] { for (int i = 0; i < 100000; ++i) ++shared; });
  std::thread b([] { for (int i = 0; i < 100000; ++i) ++shared; });
  a.join();
  b.join();
  std::printf("%d\n", shared);
  return 0;
}
