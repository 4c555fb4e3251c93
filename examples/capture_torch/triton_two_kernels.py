"""A Triton operator of two @triton.jit kernels, for `repro capture` to record as one window
(docs/cli.md, `repro capture`, "A window of launches"): an RMS normalization of a whole vector,

    partial_sums:  partial[p] = sum of x[i]^2 over block p          (one program per block)
    finish_rms:    y = x / sqrt(sum(partial) / n + eps)              (reads every partial)

so `partial` is written by the first kernel and read by the second. Two calls on new tensors;
the second one's operator is

    repro capture --kernel partial_sums --launch 2 --through finish_rms -o /tmp/t2 \\
        -- python3 examples/capture_torch/triton_two_kernels.py

Prints each call's checksum of y.
"""

import torch
import triton
import triton.language as tl

N = 100_000
BLOCK = 1024


@triton.jit
def partial_sums(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(partial_ptr + pid, tl.sum(x * x, axis=0))


@triton.jit
def finish_rms(x_ptr, partial_ptr, y_ptr, n, num_partials, BLOCK: tl.constexpr, PARTIALS: tl.constexpr):
    pid = tl.program_id(0)
    p = tl.arange(0, PARTIALS)
    total = tl.sum(tl.load(partial_ptr + p, mask=p < num_partials, other=0.0), axis=0)
    rms = tl.sqrt(total / n + 1e-6)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x / rms, mask=offs < n)


def rms_normalize(x):
    n = x.numel()
    blocks = triton.cdiv(n, BLOCK)
    partial = torch.empty(blocks, device=x.device, dtype=torch.float32)
    y = torch.empty_like(x)
    partial_sums[(blocks,)](x, partial, n, BLOCK=BLOCK)
    finish_rms[(blocks,)](x, partial, y, n, blocks, BLOCK=BLOCK, PARTIALS=triton.next_power_of_2(blocks))
    return y


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    for call in (1, 2):
        x = torch.randn(N, device=dev, dtype=torch.float32)
        y = rms_normalize(x)
        torch.cuda.synchronize()
        want = x / torch.sqrt((x * x).sum() / N + 1e-6)
        print(f"call {call}: sum of y {y.sum().item():.6f}, max |y - torch| {(y - want).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
