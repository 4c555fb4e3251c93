#!/usr/bin/env python3
"""The inputs and the workspace reference of examples/split_k_gemm_file_reference*.yaml.

Writes, into split_k_file_reference/ beside this script:
  a.npy          A [M, K] bf16 (as raw bits, <u2: numpy has no bf16)
  b.npy          B [K, N] bf16 (the same)
  workspace.npy  [SPLITS, M, N] f32: what kernels/split_k_gemm.cuh's partials launch writes,
                 workspace[s, m, n] = sum over split s's K columns of A[m, k] * B[k, n]

The split bounds mirror examples/references/split_k_partials.h: split s covers K columns
[s * Ks, min(K, (s + 1) * Ks)) with Ks = ceil_div(ceil_div(K, SPLITS), BK) * BK, BK = 32.

Every input is a multiple of 1/2 in [-2, 2] (exact in bf16), so every product is a multiple of
1/4 and every partial sum of 64 of them is at most 256 in magnitude: exact in f32 whatever the
order the kernel sums in. The reference file is therefore the kernel's result bit for bit, and
the harness's default f32 tolerance has nothing to absorb.

Run with numpy only:  python3 examples/data/make_split_k_file_reference.py
"""

from pathlib import Path

import numpy as np

M, N, K, SPLITS = 64, 48, 128, 2
BK = 32
SEED = 56


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """bf16 as raw bits (<u2): the upper half of each f32, exact for these values."""
    bits = values.astype(np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "a value is not exact in bf16"
    return (bits >> 16).astype("<u2")


def partials(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    per_split = ceil_div(K, SPLITS)
    ks = ceil_div(per_split, BK) * BK
    workspace = np.zeros((SPLITS, M, N), dtype=np.float64)
    for s in range(SPLITS):
        begin, end = min(K, s * ks), min(K, (s + 1) * ks)
        workspace[s] = a[:, begin:end].astype(np.float64) @ b[begin:end, :].astype(np.float64)
    # Exact in f32 (see above): the f64 sums convert without rounding.
    as_f32 = workspace.astype(np.float32)
    assert np.array_equal(as_f32.astype(np.float64), workspace)
    return as_f32


def main() -> None:
    rng = np.random.default_rng(SEED)
    a = rng.integers(-4, 5, size=(M, K)).astype(np.float32) / 2
    b = rng.integers(-4, 5, size=(K, N)).astype(np.float32) / 2
    out = Path(__file__).resolve().parent / "split_k_file_reference"
    out.mkdir(exist_ok=True)
    np.save(out / "a.npy", bf16_bits(a))
    np.save(out / "b.npy", bf16_bits(b))
    np.save(out / "workspace.npy", partials(a, b).astype("<f4"))
    print(f"wrote a.npy, b.npy and workspace.npy into {out}")


if __name__ == "__main__":
    main()
