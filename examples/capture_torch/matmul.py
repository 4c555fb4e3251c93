"""torch.matmul of two bf16 tensors, for `repro capture` to record the cuBLAS kernel behind it
without any source (it is replayed from its machine code):

    repro capture --kernel 'gemm|nvjet|xmma' -o /tmp/cap-mm -- python3 examples/capture_torch/matmul.py

Prints the data_ptr of the matmul's inputs and output, so a check can match them with the
buffers the capture recorded, and checksums of the output (its value sum and a hash of its bits).
"""

import hashlib

import torch

M, K, N = 1024, 512, 768


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    # Something before the GEMM: the inputs are the outputs of other kernels, as in a model.
    a = a * 0.5
    c = torch.matmul(a, b)
    # And something after it, reading its output.
    y = torch.nn.functional.gelu(c)
    torch.cuda.synchronize()

    print(f"matmul: [{M}, {K}] @ [{K}, {N}] bf16 on {torch.cuda.get_device_name(dev)}")
    print(f"data_ptr a 0x{a.data_ptr():x}")
    print(f"data_ptr b 0x{b.data_ptr():x}")
    print(f"data_ptr c 0x{c.data_ptr():x}")
    # The bits of c, as they sit in memory (row-major bf16), for a bit-exact comparison.
    c_bytes = bytes(c.cpu().contiguous().view(torch.uint8).flatten().tolist())
    print(f"c sum {c.double().sum().item():.6f}, sha256 {hashlib.sha256(c_bytes).hexdigest()}")
    print(f"checksum: {y.double().sum().item():.6f}")


if __name__ == "__main__":
    main()
