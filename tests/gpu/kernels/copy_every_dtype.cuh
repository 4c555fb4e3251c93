#pragma once
// Copies one tensor of every dtype a spec can give (tests/gpu/every_dtype.yaml) to an output of
// the same dtype, element by element, each through the C++ type a kernel would take it as: the
// harness checks at compile time that each pointer's element size matches its tensor's dtype
// (repro::DevicePointer), and on a GPU that each dtype is made, poisoned, compared and reported
// right, for outputs of every kind (floats, fp8, integers, bool).
//
// Launch: grid (ceil_div(N, 256), 1, 1), block (256, 1, 1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

__global__ void copy_every_dtype(const double* f64, double* f64_out, const float* f32, float* f32_out,
                                 const float* tf32, float* tf32_out, const __half* f16, __half* f16_out,
                                 const __nv_bfloat16* bf16, __nv_bfloat16* bf16_out, const __nv_fp8_e4m3* e4m3,
                                 __nv_fp8_e4m3* e4m3_out, const __nv_fp8_e5m2* e5m2, __nv_fp8_e5m2* e5m2_out,
                                 const int8_t* i8, int8_t* i8_out, const uint8_t* u8, uint8_t* u8_out,
                                 const int32_t* i32, int32_t* i32_out, const uint32_t* u32, uint32_t* u32_out,
                                 const int64_t* i64, int64_t* i64_out, const bool* flags, bool* flags_out, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= N) return;
  f64_out[i] = f64[i];
  f32_out[i] = f32[i];
  tf32_out[i] = tf32[i];
  f16_out[i] = f16[i];
  bf16_out[i] = bf16[i];
  e4m3_out[i] = e4m3[i];
  e5m2_out[i] = e5m2[i];
  i8_out[i] = i8[i];
  u8_out[i] = u8[i];
  i32_out[i] = i32[i];
  u32_out[i] = u32[i];
  i64_out[i] = i64[i];
  flags_out[i] = flags[i];
}
