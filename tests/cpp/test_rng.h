// A small deterministic generator for test inputs (xorshift64*), independent of the runtime's
// own generators: shared by the C++ tests in this folder.
#pragma once
#include <cstdint>

struct TestRng {
  uint64_t state;
  uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};
