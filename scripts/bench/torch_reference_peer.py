"""The peer of repro's reference in scripts/bench/emulated-reference.sh: what a user would write
instead, torch.matmul in float64 plus a comparison with the kernel's output, in one process on
the same GPU. Timed by CUDA events: one warm-up, then the median of three.

    python3 scripts/bench/torch_reference_peer.py [SIZES]     # SIZES: 2048,4096,8192,16384

The comparison is what repro's device comparison computes: the relative L2 error and the count
of elements outside atol + rtol * |want| (atol = rtol * rms(want)). The kernel's output stands
in as the fp32 product rounded to bf16 (not timed).
"""
import sys

import torch


def reference_and_compare(a, b, out, rtol):
    want = a.double() @ b.double()
    diff = out.double() - want
    rel_l2 = diff.norm() / want.norm()
    atol = rtol * want.pow(2).mean().sqrt()
    bad = (diff.abs() > atol + rtol * want.abs()).sum()
    return rel_l2.item(), bad.item()


def median_ms(fn, rounds=3):
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main():
    sizes = [int(s) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [2048, 4096, 8192, 16384]
    dtypes = [("bf16", torch.bfloat16), ("f16", torch.float16), ("e4m3", torch.float8_e4m3fn), ("f32", torch.float32)]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| M = N = K | inputs | torch f64 matmul + comparison (ms) | relL2 |")
    print("|---|---|---|---|")
    for n in sizes:
        for name, dtype in dtypes:
            generator = torch.Generator(device="cuda").manual_seed(n)
            a = (torch.rand(n, n, device="cuda", generator=generator) * 2 - 1).to(dtype)
            b = (torch.rand(n, n, device="cuda", generator=generator) * 2 - 1).to(dtype)
            out = (a.float() @ b.float()).to(torch.bfloat16)
            result = {}
            ms = median_ms(lambda: result.update(r=reference_and_compare(a, b, out, 1.6e-2)))
            print(f"| {n} | {name} | {ms:.2f} | {result['r'][0]:.2e} |", flush=True)
            del a, b, out
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
