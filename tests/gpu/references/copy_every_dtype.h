#pragma once
// The reference of tests/gpu/every_dtype.yaml: every output holds its input's values.
#include <repro/reference.h>

inline void copy_every_dtype_reference(repro::In f64, repro::Out f64_out, repro::In f32, repro::Out f32_out,
                                       repro::In tf32, repro::Out tf32_out, repro::In f16, repro::Out f16_out,
                                       repro::In bf16, repro::Out bf16_out, repro::In e4m3, repro::Out e4m3_out,
                                       repro::In e5m2, repro::Out e5m2_out, repro::In i8, repro::Out i8_out,
                                       repro::In u8, repro::Out u8_out, repro::In i32, repro::Out i32_out,
                                       repro::In u32, repro::Out u32_out, repro::In i64, repro::Out i64_out,
                                       repro::In flags, repro::Out flags_out) {
  const repro::In inputs[] = {f64, f32, tf32, f16, bf16, e4m3, e5m2, i8, u8, i32, u32, i64, flags};
  const repro::Out outputs[] = {f64_out, f32_out, tf32_out, f16_out, bf16_out, e4m3_out, e5m2_out,
                                i8_out,  u8_out,  i32_out,  u32_out, i64_out,  flags_out};
  for (int t = 0; t < 13; ++t)
    for (int64_t i = 0; i < inputs[t].shape(0); ++i) outputs[t](i) = inputs[t](i);
}
