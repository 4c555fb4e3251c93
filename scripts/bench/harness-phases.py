"""Two or more builds of one harness, side by side on one GPU: each run's phases (the harness's
own `timings` of the reference, the launches and the comparison) and the reference's parts
(its kernels, the cross-check's fetch and what the GEMM did not hide of it), medians over
interleaved rounds. For a runtime change that should cut what surrounds the
kernels: the same spec, the same sizes, only the build differs.

    python3 scripts/bench/harness-phases.py [--rounds N] [--sizes 2048,8192] \\
        [--providers device,emulated] LABEL=HARNESS [LABEL=HARNESS ...]

Each HARNESS is a built harness (`repro build`, then copied aside); it runs as
`HARNESS --size M=s --size N=s --size K=s --repeat 1 --reference PROVIDER --json FILE` from
the directory it sits in, so a copy must sit beside the spec.yaml it was built from. Exit
codes 0 and 1 both carry timings; any other ends the script with the run's output.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PHASES = ["reference", "launches", "compare"]
PARTS = [("reference_kernel_ms", "kernels"), ("reference_fetch_ms", "fetch"), ("reference_check_ms", "not hidden")]


def run(harness, size, provider, json_path):
    command = [os.path.abspath(harness)]
    for axis in "MNK":
        command += ["--size", f"{axis}={size}"]
    command += ["--repeat", "1", "--reference", provider, "--json", json_path]
    start = time.monotonic()
    done = subprocess.run(command, cwd=os.path.dirname(os.path.abspath(harness)), capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode not in (0, 1):
        sys.stdout.write(done.stdout + done.stderr)
        sys.exit(f"{harness} exited {done.returncode}")
    with open(json_path) as f:
        report = json.load(f)
    return report, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--providers", default="device,emulated")
    parser.add_argument("builds", nargs="+", metavar="LABEL=HARNESS")
    args = parser.parse_args()
    builds = [b.split("=", 1) for b in args.builds]
    if any(len(b) != 2 for b in builds):
        sys.exit("each build is LABEL=HARNESS")
    sizes = [int(s) for s in args.sizes.split(",")]
    providers = args.providers.split(",")
    results = {}  # (size, provider, label) -> [(report, wall)]
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            for size in sizes:
                for provider in providers:
                    for label, harness in builds:
                        path = os.path.join(folder, f"{label}.{size}.{provider}.{round_}.json")
                        results.setdefault((size, provider, label), []).append(run(harness, size, provider, path))
    header = ["size", "provider", "build"] + PHASES + ["reference + compare"] + [name for _, name in PARTS]
    header += ["whole run (s)", "engine"]
    print(f"Medians of {args.rounds} interleaved rounds, ms unless said (the harness's `timings` and reference parts):")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for size in sizes:
        for provider in providers:
            for label, _ in builds:
                runs = results[(size, provider, label)]
                timing = lambda phase: statistics.median(r["timings"].get(phase, float("nan")) for r, _ in runs) * 1e3
                part = lambda key: statistics.median(r.get(key, float("nan")) for r, _ in runs)
                phases = [timing(p) for p in PHASES]
                cells = [str(size), provider, label] + [f"{v:.2f}" for v in phases]
                cells.append(f"{phases[0] + phases[2]:.2f}")
                cells += [f"{part(key):.2f}" for key, _ in PARTS]
                cells.append(f"{statistics.median(w for _, w in runs):.2f}")
                cells.append(runs[0][0].get("reference_engine", "?"))
                print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
