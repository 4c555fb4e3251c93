#!/usr/bin/env bash
# Issue 60 point 5's benchmark, side by side in one run on a GPU machine: one check's reference
# and comparison (--reference device --repeat 1) at M = N = K = 1024, 2048 and 4096 for bf16, f32
# and e4m3 with ue8m0 block scales, with the repro binaries given (REPRO, and REPRO_BEFORE for a
# before/after table), rounds interleaved; then torch.matmul in float64 plus a comparison
# (torch_reference_peer.py) in the same call. The medians of each phase come from the harness's
# own report: `timings` (reference, compare), `reference_kernel_ms`, `reference_fetch_ms`,
# `reference_check_ms`.
#
#   REPRO=target/release/repro scripts/bench/check-floor.sh
#   REPRO_BEFORE=/tmp/old/repro REPRO=target/release/repro ROUNDS=5 scripts/bench/check-floor.sh
#   QUEUE=1 ...    # every binary's checks of a spec as one queue in one process
#   QUEUE=1 VARIANTS="eager:CUDA_MODULE_LOADING=EAGER lazy:CUDA_MODULE_LOADING=LAZY,VAR=VALUE" ...
#                  # the after artifacts' queues again under each variant's environment, one more
#                  # row per variant, named by it (run 109 measured two settings so, since made the
#                  # default or dropped: docs/performance.md)
#   PREBUILT=DIR PREBUILT_BEFORE=DIR ...   # artifacts built elsewhere (scripts/gpu-bundle.sh
#                  # --floor and --floor-before): no repro binary needed
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${ROUNDS:-3}
read -r -a sizes <<<"${SIZES:-1024 2048 4096}"
dir=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$dir"
binaries=()
# PREBUILT_BEFORE=DIR: the before artifacts built elsewhere (scripts/gpu-bundle.sh --floor-before).
if [[ -n "${PREBUILT_BEFORE:-}" ]]; then binaries+=("before=prebuilt")
elif [[ -n "${REPRO_BEFORE:-}" ]]; then binaries+=("before=$REPRO_BEFORE"); fi
binaries+=("after=${REPRO:-$PWD/target/release/repro}")
# The specs, one a line (scripts/gpu-bundle.sh --floor builds the same).
mapfile -t specs <scripts/bench/floor-specs.txt
# PREBUILT=DIR: the after binary's artifacts built elsewhere (DIR/<spec name>, `repro build`),
# run as they are (REPRO is then not needed).
for entry in "${binaries[@]}"; do
  label=${entry%%=*}
  for spec in "${specs[@]}"; do
    name=$(basename "$spec" .yaml)
    if [[ $label == after && -n ${PREBUILT:-} ]]; then mkdir -p "$dir/build-$label" && cp -r "$PREBUILT/$name" "$dir/build-$label/$name"
    elif [[ $label == before && -n ${PREBUILT_BEFORE:-} ]]; then
      mkdir -p "$dir/build-$label" && cp -r "$PREBUILT_BEFORE/$name" "$dir/build-$label/$name"
    else "${entry#*=}" build "$spec" -o "$dir/build-$label/$name" >/dev/null; fi
  done
done
# VARIANTS (with QUEUE=1): NAME:VAR=VALUE[,VAR=VALUE...] each, the after artifacts run again.
declare -A variant_env=()
for variant in ${VARIANTS:-}; do
  [[ -n "${QUEUE:-}" && $variant == *:*=* ]] || { echo "check-floor: VARIANTS needs QUEUE=1 and NAME:VAR=VALUE entries" >&2; exit 2; }
  variant_env[${variant%%:*}]=${variant#*:}
  binaries+=("${variant%%:*}=variant")
done
if [[ -n "${QUEUE:-}" ]]; then
  # QUEUE=1: each binary's checks of one spec as one queue in one process, as a campaign's or a
  # sweep's checks run: what is kept from check to check (the context, the pools, the host's
  # buffers) is then reused. A queued check's host cross-check may be judged while the next
  # check runs, which then waits for what is left of it (docs/cli.md): so each size runs as a
  # block of ROUNDS + 2 checks, of which the first (it waits for the size before) and the last
  # (it waits for none) are not counted, and every counted check pays for its predecessor's
  # sample, of the same size: the steady state of a queue of that size.
  for entry in "${binaries[@]}"; do
    label=${entry%%=*}
    # A variant runs the after artifacts under its environment.
    build=$label environment=()
    if [[ ${entry#*=} == variant ]]; then build=after; IFS=, read -r -a environment <<<"${variant_env[$label]}"; fi
    for spec in "${specs[@]}"; do
      name=$(basename "$spec" .yaml)
      queue="$dir/$label.$name.queue"
      line() { printf -- '--size\tM=%s\t--size\tN=%s\t--size\tK=%s\t--repeat\t1\t--reference\tdevice\n' "$1" "$1" "$1"; }
      for size in "${sizes[@]}"; do for round in $(seq 0 $((rounds + 1))); do line "$size"; done; done >"$queue"
      code=0
      env "${environment[@]}" "$dir/build-$build/$name/harness" --queue "$queue" --json "$queue.jsonl" >"$queue.log" 2>&1 || code=$?
      if [[ $code -gt 1 ]]; then tail -n 30 "$queue.log"; exit "$code"; fi
      python3 - "$queue.jsonl" "$dir/$label.$name" "$rounds" "${sizes[*]}" <<'PY'
import sys
lines, prefix, rounds, sizes = open(sys.argv[1]).read().splitlines(), sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
block = rounds + 2
assert len(lines) == block * len(sizes), f"{len(lines)} reports for {block * len(sizes)} checks"
for b, size in enumerate(sizes):
    for round in range(1, rounds + 1):
        open(f"{prefix}.{size}.{round}.json", "w").write(lines[b * block + round])
PY
    done
  done
else
for round in $(seq 1 "$rounds"); do
  for size in "${sizes[@]}"; do
    for spec in "${specs[@]}"; do
      name=$(basename "$spec" .yaml)
      for entry in "${binaries[@]}"; do
        label=${entry%%=*}
        code=0
        "$dir/build-$label/$name/harness" --size M="$size" --size N="$size" --size K="$size" --repeat 1 \
          --reference device --json "$dir/$label.$name.$size.$round.json" >"$dir/$label.$name.$size.$round.log" 2>&1 ||
          code=$?
        # Exit 0 or 1 both carry timings; anything else is a failure of the benchmark itself.
        if [[ $code -gt 1 ]]; then cat "$dir/$label.$name.$size.$round.log"; exit "$code"; fi
      done
    done
  done
done
fi
python3 - "$dir" "$rounds" "${sizes[*]}" "${binaries[*]}" "${specs[@]}" <<'PY'
import json, statistics, sys
folder, rounds, sizes, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
names = [s.rsplit("/", 1)[1][:-5] for s in sys.argv[5:]]
labels = [b.split("=")[0] for b in binaries]
print("| M = N = K | spec | binary | reference + comparison (ms) | fp64 GEMM (ms) | cross-check fetch (ms) | host's share not hidden (ms) | host's sample in all (ms) | of which decoding (ms) | comparison (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for size in sizes:
    for name in names:
        for label in labels:
            runs = [json.load(open(f"{folder}/{label}.{name}.{size}.{r}.json")) for r in range(1, rounds + 1)]
            med = lambda f: statistics.median(f(r) for r in runs)
            ref = med(lambda r: r["timings"]["reference"]) * 1e3
            cmp_ = med(lambda r: r["timings"]["compare"]) * 1e3
            total = med(lambda r: (r["timings"]["reference"] + r["timings"]["compare"])) * 1e3
            kernel = med(lambda r: r.get("reference_kernel_ms", float("nan")))
            fetch = med(lambda r: r.get("reference_fetch_ms", float("nan")))
            check = med(lambda r: r.get("reference_check_ms", float("nan")))
            host = med(lambda r: r.get("reference_host_ms", float("nan")))
            decode = med(lambda r: r.get("reference_decode_ms", float("nan")))
            print(f"| {size} | {name} | {label} | {total:.2f} | {kernel:.2f} | {fetch:.2f} | {check:.2f} | {host:.2f} | {decode:.2f} | {cmp_:.2f} |")
# Where the host's time in the two phases goes, where the reports say (queues: the held check
# settled at the next one's reference, and the comparison's passes apart from the cross-check).
keys = ["reference_fetch_ms", "reference_launch_ms", "reference_start_ms", "reference_settle_ms", "reference_wait_ms",
        "compare_device_ms"]
print()
# The reference phase less its parts above the comparison's (the reference phase's other host work:
# the reference line, the report's fields); NaN where a binary reports fewer parts.
reference_keys = keys[:-1]
print("| M = N = K | spec | binary | reference phase (ms) | " + " | ".join(f"{k} (ms)" for k in keys)
      + " | reference phase's rest (ms) | compare phase (ms) |")
print("|---|---|---|---|" + "---|" * len(keys) + "---|---|")
for size in sizes:
    for name in names:
        for label in labels:
            runs = [json.load(open(f"{folder}/{label}.{name}.{size}.{r}.json")) for r in range(1, rounds + 1)]
            med = lambda f: statistics.median(f(r) for r in runs)
            cells = [med(lambda r: r.get(k, float("nan"))) for k in keys]
            rest = med(lambda r: r["timings"]["reference"] * 1e3 - sum(r.get(k, float("nan")) for k in reference_keys))
            print(f"| {size} | {name} | {label} | {med(lambda r: r['timings']['reference']) * 1e3:.3f} | "
                  + " | ".join(f"{c:.3f}" for c in cells)
                  + f" | {rest:.3f} | {med(lambda r: r['timings']['compare']) * 1e3:.3f} |")
# The reference launch's and the settling's parts (reports that have them: queues), medians.
parts = [("reference_launch_parts_ms", ["pack", "gemm", "values"]),
         ("reference_settle_parts_ms", ["wait", "judge", "output", "release"])]
print()
print("| M = N = K | spec | binary | " + " | ".join(f"{k[10:-9]}: {p} (ms)" for k, ps in parts for p in ps) + " |")
print("|---|---|---|" + "---|" * sum(len(ps) for _, ps in parts))
for size in sizes:
    for name in names:
        for label in labels:
            runs = [json.load(open(f"{folder}/{label}.{name}.{size}.{r}.json")) for r in range(1, rounds + 1)]
            if not any("reference_launch_parts_ms" in r for r in runs):
                continue
            cells = [statistics.median(r.get(k, {}).get(p, float("nan")) for r in runs) for k, ps in parts for p in ps]
            print(f"| {size} | {name} | {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
PY
echo
echo "torch.matmul in float64 + a comparison, the same sizes (scripts/bench/torch_reference_peer.py):"
python3 scripts/bench/torch_reference_peer.py "$(printf '%s\n' "${sizes[@]}" | paste -sd,)" | tee "$dir/torch.md"
# Each binary's reference + comparison over torch's for the same size and input type (the
# spec's name says it: bf16, f32, or fp8 / e4m3 against torch's e4m3, which has no scales).
echo
python3 - "$dir" "$rounds" "${sizes[*]}" "${binaries[*]}" "${specs[@]}" <<'PY'
import json, statistics, sys
folder, rounds, sizes, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
names = [s.rsplit("/", 1)[1][:-5] for s in sys.argv[5:]]
labels = [b.split("=")[0] for b in binaries]
torch = {}
for line in open(f"{folder}/torch.md"):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 4 and cells[0].isdigit():
        torch[(cells[0], cells[1])] = float(cells[2])
def torch_type(name):
    for key, dtype in (("bf16", "bf16"), ("f32", "f32"), ("fp8", "e4m3"), ("e4m3", "e4m3")):
        if key in name:
            return dtype
print("| M = N = K | spec | torch (ms) | " + " | ".join(f"{l} / torch" for l in labels) + " |")
print("|---|---|---|" + "---|" * len(labels))
for size in sizes:
    for name in names:
        peer = torch.get((size, torch_type(name) or ""))
        cells = []
        for label in labels:
            runs = [json.load(open(f"{folder}/{label}.{name}.{size}.{r}.json")) for r in range(1, rounds + 1)]
            total = statistics.median(r["timings"]["reference"] + r["timings"]["compare"] for r in runs) * 1e3
            cells.append(f"{total / peer:.2f}x" if peer else "?")
        print(f"| {size} | {name} | {peer if peer else '?'} | " + " | ".join(cells) + " |")
PY
echo "logs in $dir"
