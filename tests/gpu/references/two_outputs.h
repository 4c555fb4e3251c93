#pragma once
// The reference of kernels/two_outputs.cuh: y = 2x, z = x + 1.
#include <repro/reference.h>

inline void two_outputs_reference(repro::In x, repro::Out y, repro::Out z) {
  for (int64_t i = 0; i < x.shape(0); ++i) {
    y(i) = 2.0 * x(i);
    z(i) = x(i) + 1.0;
  }
}

// A broken reference: NaN at one element (a division by zero), where the kernel is finite.
inline void two_outputs_nan_reference(repro::In x, repro::Out y, repro::Out z) {
  two_outputs_reference(x, y, z);
  const double zero = 0.0;
  z(17) = zero / zero;
}
