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
Prints each call's gradient checksums. With SDPA_POINTERS=FILE it also writes, for the second
call, the device address, shape and strides of every tensor the backward reads and writes (q, k,
v, the output, its gradient, the forward's log-sum-exp, dq, dk, dv) as JSON: an address found at
byte N of a captured launch's parameters (raw/window.json) is that tensor, which is how the
script names the views of `--tensor NAME@N=...` for an attention-backward reference. The output
and its gradient reach the kernels as copies (`o_copied`, `dout_copied`: a hash of their bytes).
"""

import hashlib
import json
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, S, D = 2, 4, 256, 64


def described(t):
    return {"address": t.data_ptr(), "shape": list(t.shape), "strides": list(t.stride()), "dtype": str(t.dtype)}


def described_as_copied(t):
    """PyTorch's flash backward hands the kernel `out` and its gradient as contiguous copies of
    their [B, S, H, D] views (new addresses): the copy's bytes (a hash) and its strides as the
    [B, H, S, D] tensor, for the script to find the allocation that holds them."""
    copy = t.transpose(1, 2).contiguous()
    described_copy = described(copy.transpose(1, 2))
    described_copy["sha256"] = hashlib.sha256(copy.view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    return described_copy


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    pointers_file = os.environ.get("SDPA_POINTERS")
    for call in (1, 2):
        shape = (B, H, S, D)
        q = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
        dout = torch.randn(shape, device=dev, dtype=torch.bfloat16)
        tensors = {"q": described(q), "k": described(k), "v": described(v), "dout": described(dout)}
        # The forward's log-sum-exp is saved for the backward and never returned: the saved
        # tensors hook sees it (the one f32 tensor saved). The gradients are seen by hooks on
        # the leaves, as the backward produced them.
        def pack(t):
            if t.dtype == torch.float32 and t.dim() == 3:
                tensors["lse"] = described(t)
            return t

        for name, leaf in (("dq", q), ("dk", k), ("dv", v)):
            leaf.register_hook(lambda g, name=name: tensors.__setitem__(name, described(g)))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = F.scaled_dot_product_attention(q, k, v)
        tensors["o"] = described(out)
        out.backward(dout)
        torch.cuda.synchronize()
        if pointers_file and call == 2:
            tensors["o_copied"] = described_as_copied(out)
            tensors["dout_copied"] = described_as_copied(dout)
            with open(pointers_file, "w") as f:
                json.dump(tensors, f, indent=1)
        sums = ", ".join(f"{n} {t.grad.float().sum().item():.6f}" for n, t in (("dq", q), ("dk", k), ("dv", v)))
        print(f"call {call}: {sums}")
    print(f"sdpa backward: B={B} H={H} S={S} D={D} bf16 on {torch.cuda.get_device_name(dev)}")


if __name__ == "__main__":
    main()
