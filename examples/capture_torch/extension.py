"""A PyTorch program with a custom CUDA kernel built at run time (load_inline), for
`repro capture` to record from the outside:

    repro capture --kernel 'scaled_add<' --launch 2 --source examples/capture_torch \
        -o /tmp/cap-ext -- python3 examples/capture_torch/extension.py

The kernel, scaled_add<float, 4> (scaled_add.cuh), adds a scaled bias to every row. It runs
three times, each time between ordinary torch ops, on tensors seeded with torch.manual_seed.
The extension is built in $TORCH_EXTENSIONS_DIR, or in a fresh temporary folder (removed at
exit) when that is unset, so no stale build from elsewhere is picked up.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

HERE = Path(__file__).resolve().parent
ROWS, COLS = 512, 3000  # COLS not a multiple of 256 * 4: the last block of each row is partial
ALPHA = 0.5
STEPS = 3

# The host side: checks, output allocation, and the launch on torch's current stream (so the
# kernel is ordered with the torch ops around it). The kernel itself comes from the header.
LAUNCHER = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <torch/extension.h>

torch::Tensor fused_scaled_add(torch::Tensor x, torch::Tensor bias, double alpha) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "fused_scaled_add: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
              "fused_scaled_add: float32 expected");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && bias.size(0) == x.size(1),
              "fused_scaled_add: x [rows, cols] and bias [cols] expected");
  x = x.contiguous();
  bias = bias.contiguous();
  auto out = torch::empty_like(x);
  const int rows = static_cast<int>(x.size(0)), cols = static_cast<int>(x.size(1));
  if (out.numel() == 0) return out;
  constexpr int kThreads = 256, kVec = 4;
  const dim3 grid((cols + kThreads * kVec - 1) / (kThreads * kVec), rows);
  scaled_add<float, kVec><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), static_cast<float>(alpha), rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""


def build_extension():
    if not os.environ.get("TORCH_EXTENSIONS_DIR"):
        tmp = tempfile.mkdtemp(prefix="capture_torch_ext_")
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        os.environ["TORCH_EXTENSIONS_DIR"] = tmp
    print(f"building the extension in {os.environ['TORCH_EXTENSIONS_DIR']}", flush=True)
    # The header's text goes in verbatim, so the kernel compiled here is the one in scaled_add.cuh.
    # An explicit -arch also makes torch leave out its own -gencode flags.
    return load_inline(
        name="capture_scaled_add",
        cpp_sources="torch::Tensor fused_scaled_add(torch::Tensor x, torch::Tensor bias, double alpha);",
        cuda_sources=(HERE / "scaled_add.cuh").read_text() + LAUNCHER,
        functions=["fused_scaled_add"],
        extra_cuda_cflags=["-O3", "--use_fast_math", "-arch=sm_90a"],
        verbose=bool(os.environ.get("VERBOSE")),
    )


def main():
    ext = build_extension()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    x = torch.randn(ROWS, COLS, device=dev)
    bias = torch.randn(COLS, device=dev)
    print(f"x {ROWS}x{COLS} float32, bias 0x{bias.data_ptr():x}, alpha {ALPHA}, {STEPS} steps")

    # A toy residual block: normalize, add the scaled bias (the custom kernel), squash, residual.
    outs = []
    for step in range(STEPS):
        h = torch.nn.functional.layer_norm(x, (COLS,))
        y = ext.fused_scaled_add(h, bias, ALPHA)
        print(f"scaled_add launch {step + 1}: x 0x{h.data_ptr():x} -> out 0x{y.data_ptr():x}")
        outs.append((h, y))
        x = x + torch.tanh(y)
    torch.cuda.synchronize()

    # After the run (so these reductions do not sit between the launches above).
    for step, (h, y) in enumerate(outs):
        err = (y - (h + ALPHA * bias)).abs().max().item()
        print(f"scaled_add launch {step + 1}: out sum {y.double().sum().item():.6f}, max |out - eager| {err:.3g}")
    print(f"checksum: {x.double().sum().item():.6f}")


if __name__ == "__main__":
    main()
