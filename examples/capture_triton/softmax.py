"""A Triton row softmax, one program per row, for `repro capture` to record from the outside.

    repro capture --kernel softmax_kernel -o /tmp/cap-softmax -- python3 examples/capture_triton/softmax.py
    repro run /tmp/cap-softmax         # "production  y_ptr: reproduced bit for bit"

`--defect mask` plants a mask off by one on the last block: the row's last column is read as
-inf (left out of the max and the sum) and never written.
"""

import argparse
import hashlib

import torch
import triton
import triton.language as tl

ROWS, COLS = 300, 1000  # 1000 columns: one block of 1024 with 24 masked lanes


@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, MASK_SLIP: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols - MASK_SLIP
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--defect", choices=["mask"], help="plant a mask off by one on the last block")
    args = parser.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    x = torch.randn(ROWS, COLS, device=dev, dtype=torch.float32) * 3
    y = torch.empty_like(x)
    softmax_kernel[(ROWS,)](y, x, x.stride(0), y.stride(0), COLS, MASK_SLIP=1 if args.defect else 0,
                            BLOCK=triton.next_power_of_2(COLS), num_warps=4)
    torch.cuda.synchronize()
    want = torch.softmax(x, dim=1)
    bits = bytes(y.cpu().contiguous().view(torch.uint8).flatten().tolist())
    print(f"softmax [{ROWS}, {COLS}]: max |y - torch| {(y - want).abs().max().item():.3e}, "
          f"sha256 {hashlib.sha256(bits).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
