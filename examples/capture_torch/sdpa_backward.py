"""PyTorch's attention backward, for `repro capture` to record its kernels as one window
(docs/cli.md, `repro capture`, "A window of launches"):

    torch.nn.functional.scaled_dot_product_attention(q, k, v).backward(dout)

in bf16 on CUDA, B=2, H=4, S=256, D=64, with the flash backend forced
(torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)). It runs two calls (a forward and
a backward each, on new tensors), so the second call's backward is production's steady state:
its kernels (a preprocess, the main dq/dk/dv kernel and a dq conversion in PyTorch's flash
attention 2) are recorded from the first of them to the last with

    repro capture --kernel 'bwd' --launch P+1 --through LAST -o /tmp/sdpa -- python3 sdpa_backward.py

where P is the number of launches per call of kernels matching `bwd` and LAST the last of them
(scripts/gpu-capture.sh reads both from a first capture's list of the kernels launched).
Prints each call's gradient checksums.
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, S, D = 2, 4, 256, 64


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    for call in (1, 2):
        shape = (B, H, S, D)
        q = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(shape, device=dev, dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(q, k, v)
        out.backward(dout)
        torch.cuda.synchronize()
        sums = ", ".join(f"{n} {t.grad.float().sum().item():.6f}" for n, t in (("dq", q), ("dk", k), ("dv", v)))
        print(f"call {call}: {sums}")
    print(f"sdpa backward: B={B} H={H} S={S} D={D} bf16 on {torch.cuda.get_device_name(dev)}")


if __name__ == "__main__":
    main()
