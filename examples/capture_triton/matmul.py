"""An autotuned Triton matmul (bf16 in, fp32 accumulate, bf16 out), for `repro capture` to record
from the outside, as it runs in production: Triton compiles it, the autotuner picks a config,
Triton's launcher starts the cubin through the driver.

    repro capture --kernel matmul_kernel -o /tmp/cap-triton -- python3 examples/capture_triton/matmul.py
    repro run /tmp/cap-triton          # "production  c_ptr: reproduced bit for bit"

`--defect kmask` plants a mask off by one on the last K block: its last column of A and row of B
are masked out, so every output misses one product (K - 1 under all-ones inputs).
"""

import argparse
import hashlib

import torch
import triton
import triton.language as tl

M, N, K = 1000, 744, 520  # none a multiple of the block tile: partial tiles on every edge


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32}, num_warps=4, num_stages=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, K_MASK_SLIP: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        # The K elements left in this block; the planted defect takes one too few.
        k_left = K - k * BLOCK_K - K_MASK_SLIP
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(tl.bfloat16)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, k_mask_slip):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=torch.bfloat16)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), K_MASK_SLIP=k_mask_slip)
    return c


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--defect", choices=["kmask"], help="plant a mask off by one on the last K block")
    parser.add_argument("--repeat", type=int, default=2, help="requests served (each launches the kernel)")
    args = parser.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    for request in range(args.repeat):
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16) * 0.5
        c = matmul(a, b, 1 if args.defect == "kmask" else 0)
        torch.cuda.synchronize()
        want = (a.float() @ b.float()).to(torch.bfloat16)
        bits = bytes(c.cpu().contiguous().view(torch.uint8).flatten().tolist())
        print(f"request {request}: max |c - torch| {(c.float() - want.float()).abs().max().item():.4f}, "
              f"sha256 {hashlib.sha256(bits).hexdigest()[:16]}")
    print(f"best config: {matmul_kernel.best_config}")


if __name__ == "__main__":
    main()
