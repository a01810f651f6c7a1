// canary.cpp - must fail under NOVA_SANITIZE: it proves the sanitizers are on.
//
//   canary heap   reads one element past a heap array (ASan)
//   canary shift  shifts an int by more than its width (UBSan)
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  volatile int amount = argc + 40;
  if (argc > 1 && std::strcmp(argv[1], "shift") == 0) {
    int one = 1;
    std::printf("%d\n", one << amount);
    return 0;
  }
  std::vector<int>* v = new std::vector<int>(4, 1);
  int* p = v->data();
  volatile int past = p[amount - 37]; // index 4 of 4
  std::printf("%d\n", past);
  delete v;
  return 0;
}
