"""What cuBLAS's DGEMM would cost repro's reference (issue 60 point 5): the first double-precision
matmul of a process (cuBLAS loaded, its handle and workspace made, its kernels loaded) against
the ones after it, and the DGEMM alone at square sizes, timed with CUDA events (median of five
after a warm-up). Run beside scripts/bench/check-floor.sh, whose `fp64 GEMM` column is repro's
own packing + fp64 tensor-core GEMM at the same sizes.

    python3 scripts/bench/cublas_dgemm_cost.py [SIZES]     # SIZES: 1024,2048,4096,8192
"""
import statistics
import sys
import time

import torch


def main():
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "1024,2048,4096,8192").split(",")]
    start = time.perf_counter()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    context = time.perf_counter() - start
    a = torch.rand(256, 256, device="cuda", dtype=torch.float64)
    torch.cuda.synchronize()
    start = time.perf_counter()
    (a @ a).sum().item()
    first = time.perf_counter() - start
    start = time.perf_counter()
    (a @ a).sum().item()
    second = time.perf_counter() - start
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"context and torch's allocator: {context * 1e3:.1f} ms")
    print(f"the first float64 matmul of the process (cuBLAS loaded and set up): {first * 1e3:.1f} ms; the next: {second * 1e3:.2f} ms")
    print("| M = N = K | cuBLAS DGEMM (ms) | TFLOPS |")
    print("|---|---|---|")
    for n in sizes:
        x = torch.rand(n, n, device="cuda", dtype=torch.float64)
        y = torch.rand(n, n, device="cuda", dtype=torch.float64)
        x @ y
        times = []
        for _ in range(5):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            x @ y
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end))
        ms = statistics.median(times)
        print(f"| {n} | {ms:.3f} | {2 * n ** 3 / ms / 1e9:.1f} |")


if __name__ == "__main__":
    main()
