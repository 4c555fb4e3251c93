"""torch.matmul at a shape where cuBLAS splits K (a small output, a long K), for `repro capture`
to record the GEMM and the reduction kernel after it as one window (docs/cli.md, `repro
capture`, "A window of launches"). Which kernels cuBLAS picks depends on its version and the GPU:
capture a kernel that never launches first, to list them,

    repro capture --kernel no_such_kernel -o /tmp/list -- python3 examples/capture_torch/cublas_split_k.py

then record the second call's GEMM through its reduction (scripts/gpu-capture.sh reads both from
that list). f32 operands A [64, 32768] and B [32768, 64] (TF32 off). Two calls on new tensors;
prints each call's largest difference from float64.
"""

import torch

M, N, K = 64, 64, 32768


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    for call in (1, 2):
        a = torch.randn((M, K), device=dev, dtype=torch.float32)
        b = torch.randn((K, N), device=dev, dtype=torch.float32)
        c = a @ b
        torch.cuda.synchronize()
        want = a.double() @ b.double()
        print(f"call {call}: largest difference from float64 {(c.double() - want).abs().max().item():.3e}")
    print(f"cuBLAS split-K GEMM: M={M} N={N} K={K} f32 on {torch.cuda.get_device_name(dev)}")


if __name__ == "__main__":
    main()
