"""A Triton decoding-attention kernel whose inputs and output share one segment of PyTorch's
caching allocator (issue 59), for `repro capture` to record from the outside.

q [B, D], k and v [T, D] (the B sequences' tokens, one after another), cu_seqlens [B + 1] (int32,
where each sequence's tokens start) and o [B, D] are allocated one after another, small enough
that the allocator carves all five out of one 2 MiB segment: the capture sees one allocation
that five parameters point into. A view on the output alone is enough:

    repro capture --kernel decode_kernel -o /tmp/cap-decode --tensor 'o=[8, 64]' \\
        --reference '{op: file, expected: {o: o.npy}, block: [1, 64]}' \\
        -- python3 examples/capture_triton/shared_segment.py --expected /tmp/cap-decode/o.npy
    repro run /tmp/cap-decode          # "production  o: reproduced bit for bit"

`--expected PATH` saves torch's o (f32, from the same f16 inputs) as a .npy for `op: file`.
"""

import argparse
import hashlib
import struct

import torch
import triton
import triton.language as tl

LENGTHS = [5, 17, 32, 1, 9, 24, 30, 12]  # tokens per sequence
B, D = len(LENGTHS), 64
BLOCK_T = 32  # at least the longest sequence
SEGMENT = 2 << 20  # the caching allocator's small-pool segment


@triton.jit
def decode_kernel(q, k, v, cu_seqlens, o, SCALE: tl.constexpr, D: tl.constexpr,
                  BLOCK_T: tl.constexpr):
    b = tl.program_id(0)
    start = tl.load(cu_seqlens + b)
    end = tl.load(cu_seqlens + b + 1)
    t = tl.arange(0, BLOCK_T)
    d = tl.arange(0, D)
    valid = start + t < end
    qv = tl.load(q + b * D + d).to(tl.float32)
    kv = tl.load(k + (start + t)[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
    s = tl.sum(kv.to(tl.float32) * qv[None, :], axis=1) * SCALE
    s = tl.where(valid, s, -float("inf"))
    p = tl.exp(s - tl.max(s, axis=0))
    p = p / tl.sum(p, axis=0)
    vv = tl.load(v + (start + t)[:, None] * D + d[None, :], mask=valid[:, None], other=0.0)
    out = tl.sum(p[:, None] * vv.to(tl.float32), axis=0)
    tl.store(o + b * D + d, out.to(tl.float16))


def save_npy_f32(path, tensor):
    """numpy.save of an f32 tensor, without needing numpy."""
    shape = "(" + ", ".join(str(n) for n in tensor.shape) + ("," if tensor.dim() == 1 else "") + ")"
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % shape
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    data = tensor.detach().float().contiguous().cpu().flatten().tolist()
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % len(data), *data))


def segment_of(ptr):
    """The caching allocator's segment that holds `ptr`: (base, size), or None."""
    for seg in torch.cuda.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return seg["address"], seg["total_size"]
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--expected", help="save torch's o (f32) here as a .npy")
    args = parser.parse_args()
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    total = sum(LENGTHS)
    cu = [0]
    for n in LENGTHS:
        cu.append(cu[-1] + n)
    # Made on the host, then copied: each .to() allocates exactly one device tensor, in order.
    q = torch.randn(B, D, generator=gen).half().to(dev)
    k = torch.randn(total, D, generator=gen).half().to(dev)
    v = torch.randn(total, D, generator=gen).half().to(dev)
    cu_seqlens = torch.tensor(cu, dtype=torch.int32).to(dev)
    o = torch.zeros(B, D, dtype=torch.float16).to(dev)
    tensors = {"q": q, "k": k, "v": v, "cu_seqlens": cu_seqlens, "o": o}
    segments = {name: segment_of(t.data_ptr()) for name, t in tensors.items()}
    assert len(set(segments.values())) == 1 and None not in segments.values(), \
        f"the five tensors are not in one segment: {segments}"
    base, size = segments["q"]
    print(f"one segment of {size} bytes at {base:#x}: " + ", ".join(
        f"{name} at +{t.data_ptr() - base}" for name, t in tensors.items()))
    decode_kernel[(B,)](q, k, v, cu_seqlens, o, SCALE=D ** -0.5, D=D, BLOCK_T=BLOCK_T, num_warps=4)
    torch.cuda.synchronize()
    want = torch.empty(B, D)
    for b in range(B):
        kb, vb = k[cu[b]:cu[b + 1]].float().cpu(), v[cu[b]:cu[b + 1]].float().cpu()
        p = torch.softmax(kb @ q[b].float().cpu() * D ** -0.5, dim=0)
        want[b] = p @ vb
    if args.expected:
        save_npy_f32(args.expected, want)
    bits = bytes(o.cpu().contiguous().view(torch.uint8).flatten().tolist())
    print(f"decode [{B}, {D}]: max |o - torch| {(o.float().cpu() - want).abs().max().item():.3e}, "
          f"sha256 {hashlib.sha256(bits).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
