"""The peer of `repro campaign` in scripts/bench/campaign-queue.sh: the same checks a user would
write as one torch loop in one process, with cuBLAS in the kernel's place. For every shape of a
shapes file (M,N,K per line; default Llama-3.2-1B's) and every mode:

    ones    A = B = 1 (bf16), D = A @ B (bf16), every output must be exactly K
    random  A, B uniform in [-1, 1] (bf16), D = A @ B; the f64 reference A @ B on the GPU, then
            relL2 and the count of outputs outside atol + rtol |want| (repro's default bf16
            tolerance: rtol 1.6e-2, atol rtol * rms(want))
    probe   the probe suite's patterns, each launched twice and compared bitwise between runs
            and exactly against its closed form: ones, up to 16 K slices of 32, two row-code and
            two column-code digits (powers of two), the identity-like B, the tile ramp

    python3 scripts/bench/campaign_torch_peer.py [SHAPES_CSV] [MODES]   # MODES: ones,random,probe

Prints the wall time of the whole loop (inputs, launches and checks, synchronized at the end of
each check, as a user's loop reads a result before the next) and the checks per second.
"""
import sys
import time

import torch

RTOL = 1.6e-2  # repro's default relative tolerance for a bf16 output


def shapes_of(path):
    shapes = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("M"):
            continue
        m, n, k = (int(x) for x in line.split(","))
        shapes.append((m, n, k))
    return shapes


def ones_check(m, n, k):
    a = torch.ones(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.ones(k, n, device="cuda", dtype=torch.bfloat16)
    d = a @ b
    return bool((d.double() == float(k)).all())


def random_check(m, n, k, generator):
    a = (torch.rand(m, k, device="cuda", generator=generator) * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(k, n, device="cuda", generator=generator) * 2 - 1).to(torch.bfloat16)
    d = a @ b
    want = a.double() @ b.double()
    diff = d.double() - want
    rel_l2 = diff.norm() / want.norm()
    atol = RTOL * want.pow(2).mean().sqrt()
    bad = (diff.abs() > atol + RTOL * want.abs()).sum()
    return bool(bad == 0) and bool(rel_l2 < RTOL)


def exact(a, b, want):
    """Two launches on the same operands: equal bit for bit, and exactly the closed form."""
    first = a @ b
    second = a @ b
    return bool(torch.equal(first, second)) and bool((first.double() == want).all())


def probe_check(m, n, k):
    bf16 = torch.bfloat16
    rows = torch.arange(m, device="cuda")
    cols = torch.arange(n, device="cuda")
    ks = torch.arange(k, device="cuda")
    ok = True
    one_a = torch.ones(m, k, device="cuda", dtype=bf16)
    one_b = torch.ones(k, n, device="cuda", dtype=bf16)
    ok &= exact(one_a, one_b, torch.full((m, n), float(k), device="cuda", dtype=torch.float64))
    # K slices of 32: all when there are at most 16, else the first and last four and eight
    # between, as the probe suite picks them.
    slices = (k + 31) // 32
    picked = list(range(slices)) if slices <= 16 else sorted(
        set(list(range(4)) + [4 + i * (slices - 8) // 9 for i in range(1, 9)] + list(range(slices - 4, slices)))
    )
    for s in picked:
        k0, k1 = s * 32, min(k, s * 32 + 32)
        b = ((ks >= k0) & (ks < k1)).to(bf16)[:, None].expand(k, n).contiguous()
        ok &= exact(one_a, b, torch.full((m, n), float(k1 - k0), device="cuda", dtype=torch.float64))
    for digit in range(2):
        code_rows = torch.pow(2.0, ((rows >> (2 * digit)) & 3).double())
        a = code_rows.to(bf16)[:, None].expand(m, k).contiguous()
        ok &= exact(a, one_b, (k * code_rows)[:, None].expand(m, n))
        code_cols = torch.pow(2.0, ((cols >> (2 * digit)) & 3).double())
        b = code_cols.to(bf16)[None, :].expand(k, n).contiguous()
        ok &= exact(one_a, b, (k * code_cols)[None, :].expand(m, n))
    a_code = ((rows[:, None] + 2 * ks[None, :]) % 7 + 1).double()
    b_identity = (ks[:, None] == (cols[None, :] % k)).to(bf16)
    ok &= exact(a_code.to(bf16), b_identity, a_code[:, cols % k])
    ramp_rows = (1 + (rows // 128) % 4).double()
    ramp_cols = (1 + (cols // 128) % 4).double()
    ok &= exact(
        ramp_rows.to(bf16)[:, None].expand(m, k).contiguous(),
        ramp_cols.to(bf16)[None, :].expand(k, n).contiguous(),
        k * ramp_rows[:, None] * ramp_cols[None, :],
    )
    return ok


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "examples/campaigns/llama3_2_1b_shapes.csv"
    modes = (sys.argv[2] if len(sys.argv) > 2 else "ones,random,probe").split(",")
    shapes = shapes_of(path)
    generator = torch.Generator(device="cuda").manual_seed(60)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    torch.cuda.synchronize()
    start = time.perf_counter()
    checks = failed = 0
    per_mode = {mode: 0.0 for mode in modes}
    for m, n, k in shapes:
        for mode in modes:
            mode_start = time.perf_counter()
            if mode == "ones":
                ok = ones_check(m, n, k)
            elif mode == "random":
                ok = random_check(m, n, k, generator)
            else:
                ok = probe_check(m, n, k)
            torch.cuda.synchronize()
            per_mode[mode] += time.perf_counter() - mode_start
            checks += 1
            failed += not ok
    wall = time.perf_counter() - start
    print(f"torch loop: {checks} checks ({len(shapes)} shapes x {', '.join(modes)}) in {wall:.2f} s, "
          f"{checks / wall:.1f} checks/s, {failed} failed")
    for mode, seconds in per_mode.items():
        print(f"  {mode}: mean {seconds / len(shapes) * 1e3:.1f} ms a check")


if __name__ == "__main__":
    main()
