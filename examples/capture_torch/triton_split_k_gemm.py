"""A split-K GEMM in Triton, for `repro capture` to record as one window of two launches
(docs/cli.md, `repro capture`, "A window of launches"):

    split_k_partials:  workspace[s] = A[:, Ks] @ B[Ks, :] in f32    (a program per tile and split)
    split_k_reduce:    C = workspace[0] + ... + workspace[SPLITS-1]  (a fixed order)

A is [M, K] and B [K, N], both bf16 and row-major; C is [M, N] in f32. Two calls on new tensors;
the second call's operator is

    repro capture --kernel split_k_partials --launch 2 --through split_k_reduce -o /tmp/sk \\
        -- python3 examples/capture_torch/triton_split_k_gemm.py

and with views of the launches' pointers (the caching allocator puts A, B and the workspace in
one segment) and a GEMM reference, `repro run --ones` and `repro probe` judge the captured
operator as a GEMM:

    --tensor 'a_ptr=[M, K]' --tensor 'b_ptr=[K, N]' --tensor 'c_ptr=[M, N]' \\
    --tensor 'workspace_ptr=[4, M, N]' --reference '{op: gemm, a: a_ptr, b: b_ptr, out: c_ptr}'

Prints each call's largest difference from torch.matmul in float64.
"""

import torch
import triton
import triton.language as tl

M, N, K, SPLITS = 256, 192, 4096, 4
BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 64


@triton.jit
def split_k_partials(a_ptr, b_ptr, workspace_ptr, M, N, K, k_per_split,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_per_split, BLOCK_K):
        ks = split * k_per_split + k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    out = workspace_ptr + split * M * N + rows[:, None] * N + cols[None, :]
    tl.store(out, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def split_k_reduce(workspace_ptr, c_ptr, M, N, splits, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < M * N
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, splits):
        acc += tl.load(workspace_ptr + s * M * N + offs, mask=inside, other=0.0)
    tl.store(c_ptr + offs, acc, mask=inside)


def split_k_gemm(a, b):
    workspace = torch.empty((SPLITS, M, N), device=a.device, dtype=torch.float32)
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), SPLITS)
    split_k_partials[grid](a, b, workspace, M, N, K, K // SPLITS, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    split_k_reduce[(triton.cdiv(M * N, 1024),)](workspace, c, M, N, SPLITS, BLOCK=1024)
    return c


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    for call in (1, 2):
        a = torch.randn((M, K), device=dev, dtype=torch.bfloat16)
        b = torch.randn((K, N), device=dev, dtype=torch.bfloat16)
        c = split_k_gemm(a, b)
        torch.cuda.synchronize()
        want = a.double() @ b.double()
        print(f"call {call}: largest difference from float64 {(c.double() - want).abs().max().item():.3e}")
    print(f"triton split-K GEMM: M={M} N={N} K={K} SPLITS={SPLITS} on {torch.cuda.get_device_name(dev)}")


if __name__ == "__main__":
    main()
