#!/usr/bin/env bash
# repro capture on the GPU machine (issue 20): the capture app (rebuilt from source, correct and
# defective, and replayed), and PyTorch's torch.matmul replayed from cuBLAS's machine code; then
# windows of launches (issue 56, point 3): a split-K GEMM, PyTorch's flash attention backward
# and a Triton operator of two kernels, each captured as one spec and replayed (PASS/FAIL lines).
# Usage: [WINDOWS_ONLY=1] [WINDOW_CASES=REGEX] scripts/gpu-capture.sh REPRO_BINARY OUT_DIR. Each case's log goes to
# OUT_DIR/<case>.log.
set -uo pipefail
repro=$(realpath "$1"); out=$2; root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"; work=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
step() { local name=$1; shift; echo "== $name: $*"; ( "$@" ) > "$out/$name.log" 2>&1; echo "   exit $?"; tail -n 25 "$out/$name.log"; }
"$root/examples/capture_app/build.sh" -o "$work/capture_app" || exit 1
# WINDOWS_ONLY=1: only the windows of launches (the steps below the one-launch captures).
if [[ -z ${WINDOWS_ONLY:-} ]]; then
step app-run "$work/capture_app"
step global-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" -o "$work/global" -- "$work/capture_app"
step global-run "$repro" run "$work/global"
step defect-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" \
  --reference '{op: gemm, a: A, b: B, out: D, tile: [128, 128, 64]}' -o "$work/defect" -- "$work/capture_app" --defect swizzle
step defect-run "$repro" run "$work/defect"
step defect-probe "$repro" probe "$work/defect"
step replay-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --replay -o "$work/replay" -- "$work/capture_app" --defect swizzle
step replay-run "$repro" run "$work/replay"
# The stale-shared-memory defect: production's own output changes from run to run.
step box-app-runs bash -c "for i in 1 2 3; do '$work/capture_app' --defect box | grep 'request 2'; done"
step box-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" -o "$work/box" -- "$work/capture_app" --defect box
step box-run "$repro" run "$work/box"
step box-replay-capture "$repro" capture --kernel 'tma_gemm<' --launch 1 --replay -o "$work/box-replay" -- "$work/capture_app" --defect box
step box-replay-run "$repro" run "$work/box-replay"
step never "$repro" capture --kernel 'no_such_kernel' -o "$work/never" -- "$work/capture_app"
step matmul-capture "$repro" capture --kernel 'gemm|nvjet|xmma|Kernel' -o "$work/matmul" -- python3 "$root/examples/capture_torch/matmul.py"
step matmul-run "$repro" run "$work/matmul"
# A replay under the generic checks (issue 20, point 3): compute-sanitizer memcheck, repeated
# launches, --dump (the dumped outputs must be production's bytes), and the watchdog (a 1 us
# limit, shorter than any launch: the run must stop with the hang exit code, 5).
step replay-memcheck "$repro" run "$work/replay" --sanitize memcheck
step matmul-memcheck "$repro" run "$work/matmul" --sanitize memcheck
step matmul-repeat "$repro" run "$work/matmul" --repeat 20
step matmul-dump bash -c "'$repro' run '$work/matmul' --dump '$work/matmul-dump'; echo \"run exit \$?\"; ls '$work/matmul-dump'; python3 - '$work/matmul' '$work/matmul-dump' <<'PY'
import sys, pathlib, numpy as np
cap, dump = map(pathlib.Path, sys.argv[1:])
for after in sorted((cap / 'production').glob('*.after.npy')):
    name = after.name[:-len('.after.npy')]
    got = np.load(dump / (name + '.npy'))
    want = np.load(after)
    same = got.tobytes() == want.tobytes()
    print(f'{name}: dump {got.shape} {got.dtype} vs production {want.shape} {want.dtype}: ' + ('bit for bit' if same else 'DIFFERENT'))
PY"
step matmul-watchdog "$repro" run "$work/matmul" --timeout 0.000001
step ext-capture "$repro" capture --kernel 'scaled_add<' --launch 2 --source "$root/examples/capture_torch" -o "$work/ext" -- python3 "$root/examples/capture_torch/extension.py"
step ext-run "$repro" run "$work/ext"
for d in global defect replay box box-replay matmul ext crash managed contexts contexts-replay; do cp "$work/$d/capture.yaml" "$out/$d.capture.yaml" 2>/dev/null; cp "$work/$d/raw/session.json" "$out/$d.session.json" 2>/dev/null; done
# Hostile cases: a program that crashes after the capture, unified memory, a device the
# program does not use, and a tool that injects itself (compute-sanitizer) around the program.
step crash-after "$repro" capture --kernel 'gemm|nvjet|xmma|Kernel' -o "$work/crash" -- bash -c "python3 '$root/examples/capture_torch/matmul.py' && kill -SEGV \$\$"
step crash-run "$repro" run "$work/crash"
step managed-capture "$repro" capture --kernel 'tma_gemm<' --launch 2 --source "$root/kernels" -o "$work/managed" -- "$work/capture_app" --managed
step managed-run "$repro" run "$work/managed"
# Several contexts on one GPU: the app serves its requests again in a second context (its own
# buffers, stream and module); launch 5 of tma_gemm is request 2 there, rebuilt and replayed.
step contexts-app "$work/capture_app" --contexts 2
step contexts-capture "$repro" capture --kernel 'tma_gemm<' --launch 5 --source "$root/kernels" -o "$work/contexts" -- "$work/capture_app" --contexts 2
step contexts-run "$repro" run "$work/contexts"
step contexts-replay-capture "$repro" capture --kernel 'tma_gemm<' --launch 5 --replay -o "$work/contexts-replay" -- "$work/capture_app" --contexts 2
step contexts-replay-run "$repro" run "$work/contexts-replay"
step too-large "$repro" capture --kernel 'tma_gemm<' --max-bytes 100000 -o "$work/too-large" -- "$work/capture_app"
step other-device "$repro" capture --kernel 'tma_gemm<' --device 1 -o "$work/device1" -- "$work/capture_app"
step under-sanitizer "$repro" capture --kernel 'tma_gemm<' -o "$work/sanitizer" -- /usr/local/cuda/bin/compute-sanitizer "$work/capture_app"
# A capture's bundle, unpacked in another folder and built there with the toolkit alone.
step matmul-bundle "$repro" bundle "$work/matmul" -o "$work/bundle-mm"
step matmul-bundle-elsewhere bash -c "mkdir -p '$work/elsewhere' && tar -xzf '$work/bundle-mm.tar.gz' -C '$work/elsewhere' && cd \"\$(ls -d '$work/elsewhere'/*/ | head -n 1)\" && ls && ./build.sh && ./harness"
fi
# ---- Windows of launches (issue 56, point 3): an operator of several kernels captured as one
# spec of replayed launches. Each `wstep` prints PASS when the command exits EXPECTED_EXIT and
# its log holds PATTERN (a second pattern, after `!`, must be absent), else FAIL with why.
#   wstep NAME EXPECTED_EXIT PATTERN [!ABSENT] -- COMMAND...
# WINDOW_CASES=REGEX: only the steps whose names it matches (e.g. `sdpa`).
wstep() {
  local name=$1 want=$2 pattern=$3 absent=""; shift 3
  if [[ -n ${WINDOW_CASES:-} && ! $name =~ ${WINDOW_CASES} ]]; then return 0; fi
  if [[ $1 == !* ]]; then absent=${1#!}; shift; fi
  [[ $1 == -- ]] && shift
  echo "== $name: $*"; ( "$@" ) > "$out/$name.log" 2>&1; local rc=$?
  tail -n 25 "$out/$name.log"
  if [[ $rc -ne $want ]]; then echo "   FAIL $name: exit $rc, expected $want"
  elif ! grep -qF -- "$pattern" "$out/$name.log"; then echo "   FAIL $name: no \`$pattern\` in its log"
  elif [[ -n $absent ]] && grep -qF -- "$absent" "$out/$name.log"; then echo "   FAIL $name: \`$absent\` in its log"
  else echo "   PASS $name (exit $rc, \`$pattern\`)"; fi
}
# The split-K GEMM of kernels/split_k_gemm.cuh (partials, then reduce), called twice; the window
# is the second call's two kernels (--through), then the fill kernel before them as well
# (--launches 3: whatever kernel). Production's D and workspace are compared bit for bit.
nvcc -std=c++17 -O3 -arch=sm_90a -lineinfo -I"$root/kernels" -o "$work/capture_split_k" \
  "$root/examples/capture_app/capture_split_k.cu" && echo "   PASS split-k-build" || echo "   FAIL split-k-build"
wstep splitk-app 0 "call 2: sum of D" -- "$work/capture_split_k"
wstep splitk-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'split_k_kernels::partials' --launch 2 \
  --through 'split_k_kernels::reduce' -o "$work/splitk" -- "$work/capture_split_k"
wstep splitk-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/splitk"
wstep splitk-run-repeat 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/splitk" --repeat 5
wstep splitk-fill-capture 0 "capture: a window of 3 launches" -- "$repro" capture --kernel 'capture_split_k::fill_batch' --launch 2 \
  --launches 3 -o "$work/splitk-fill" -- "$work/capture_split_k"
wstep splitk-fill-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/splitk-fill"
# The planted defect is production's too: the window reproduces it bit for bit.
wstep splitk-defect-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'split_k_kernels::partials' --launch 2 \
  --through 'split_k_kernels::reduce' -o "$work/splitk-defect" -- "$work/capture_split_k" --defect drop_last_split
wstep splitk-defect-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/splitk-defect"
wstep splitk-memcheck 0 "Disposition: Passed" -- "$repro" run "$work/splitk" --sanitize memcheck
# Refusals (exit 2, nothing written): a --through that never comes, a window over --max-bytes.
wstep splitk-too-long 2 "none of them after the first matched" -- "$repro" capture --kernel 'split_k_kernels::partials' \
  --through 'no_such_kernel' -o "$work/splitk-too-long" -- "$work/capture_split_k" --calls 40
wstep splitk-too-many-bytes 2 "raise --max-bytes" -- "$repro" capture --kernel 'split_k_kernels::partials' --launch 2 \
  --through 'split_k_kernels::reduce' --max-bytes 1000000 -o "$work/splitk-bytes" -- "$work/capture_split_k"
wstep splitk-ended-inside 2 "the program exited inside the window" -- "$repro" capture --kernel 'split_k_kernels::reduce' --launch 2 \
  --launches 5 -o "$work/splitk-ended" -- "$work/capture_split_k"
# PyTorch's flash attention backward: first the kernels the program launches (a capture of a
# kernel that never comes lists them in raw/session.json), then the window from the second call's
# first kernel matching `bwd` through the last one, both read from that list.
wstep sdpa-app 0 "call 2:" -- python3 "$root/examples/capture_torch/sdpa_backward.py"
wstep sdpa-list 2 "kernels it launched" -- "$repro" capture --kernel 'no_such_kernel' -o "$work/sdpa-list" \
  -- python3 "$root/examples/capture_torch/sdpa_backward.py"
read -r sdpa_first sdpa_through < <(python3 - "$work/sdpa-list/raw/session.json" <<'PY'
import json, re, sys
kernels = json.load(open(sys.argv[1]))["kernels"]
bwd = [k for k in kernels if "bwd" in k["name"]] or [{"name": "no_bwd_kernel_launched", "launches": 0}]
per_call = sum(k["launches"] for k in bwd) // 2
# The kernels are listed in the order of their first launch: the last one matching `bwd` ends
# the backward. Its function name without namespace, template arguments or parameters (plain
# word characters, a regex that matches itself).
head = re.split(r"[<(]", bwd[-1]["name"])[0]
print(per_call + 1, head.split("::")[-1].split()[-1])
PY
)
echo "   sdpa window: --kernel bwd --launch $sdpa_first --through $sdpa_through"
wstep sdpa-capture 0 "capture: a window of" -- "$repro" capture --kernel 'bwd' --launch "$sdpa_first" --through "$sdpa_through" \
  -o "$work/sdpa" -- python3 "$root/examples/capture_torch/sdpa_backward.py"
wstep sdpa-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/sdpa"
# The same window as a count (robust to a --through that names a kernel launched twice).
sdpa_count=$(grep -c '^  - kind: replay' "$work/sdpa/capture.yaml" 2>/dev/null); [[ ${sdpa_count:-0} -ge 1 ]] || sdpa_count=3
wstep sdpa-count-capture 0 "capture: a window of $sdpa_count launches" -- "$repro" capture --kernel 'bwd' --launch "$sdpa_first" \
  --launches "$sdpa_count" -o "$work/sdpa-count" -- python3 "$root/examples/capture_torch/sdpa_backward.py"
wstep sdpa-count-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/sdpa-count"
# PyTorch's attention backward judged against the attention-backward reference. Its kernels take
# one parameter struct (Flash_bwd_params), so views name pointers by their byte in it
# (`--tensor NAME@BYTE=...`). The caching allocator is off (PYTORCH_NO_CUDA_MEMORY_CACHING=1:
# each tensor an allocation of its own); a first window is replayed as it is, and its records
# (raw/window.json: each pointer's byte and address) beside the addresses the app wrote
# (SDPA_POINTERS) say which byte points at which tensor; the window again with those views and
# the reference then replays bit for bit and judges dq, dk and dv.
sdpa_app=("$root/examples/capture_torch/sdpa_backward.py")
wstep sdpa-nocache-capture 0 "capture: a window of" -- env PYTORCH_NO_CUDA_MEMORY_CACHING=1 SDPA_POINTERS="$work/sdpa-pointers.json" \
  "$repro" capture --kernel 'bwd' --launch "$sdpa_first" --through "$sdpa_through" -o "$work/sdpa-nocache" -- python3 "${sdpa_app[@]}"
wstep sdpa-nocache-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/sdpa-nocache"
mapfile -t sdpa_views < <(python3 - "$work/sdpa-nocache" "$work/sdpa-pointers.json" <<'PY2'
import hashlib, json, os, re, sys
capture, pointers = sys.argv[1], sys.argv[2]
try:
    window = json.load(open(os.path.join(capture, "raw", "window.json")))
    tensors = json.load(open(pointers))
except Exception as e:
    print(f"   no views: {e}", file=sys.stderr)
    sys.exit(0)
dtypes = {"torch.bfloat16": "bf16", "torch.float16": "f16", "torch.float32": "f32"}
def view(t):
    # Row-major when the strides are the packed ones, else the strides themselves.
    packed, step = [], 1
    for extent in reversed(t["shape"]):
        packed.insert(0, step); step *= extent
    layout = "" if t["strides"] == packed else ":strides[" + ", ".join(map(str, t["strides"])) + "]"
    return f"{dtypes.get(t['dtype'], 'u8')}[{', '.join(map(str, t['shape']))}]{layout}"
# By address: the pointer at byte N of launch k holds the tensor's address.
named = set()
for k, launch in enumerate(window["launches"], 1):
    for p in launch["pointers"]:
        for name, t in tensors.items():
            if int(p["value"], 16) == t["address"] and not name.endswith("_copied"):
                print(f"launch{k}.{name}@{p['offset']}={view(t)}"); named.add(name)
# By content: a copy the library made is the captured input whose bytes hash as the app's copy.
def payload(path):
    data = open(path, "rb").read()
    return data[10 + int.from_bytes(data[8:10], "little"):]
hashes = {}
for file in os.listdir(os.path.join(capture, "inputs")):
    hashes[hashlib.sha256(payload(os.path.join(capture, "inputs", file))).hexdigest()] = file[:-len(".npy")]
relocations, k = [], 0
for line in open(os.path.join(capture, "capture.yaml")):
    m = re.match(r"\s*- kind: replay\s+# launch (\d+)", line)
    if m: k = int(m.group(1))
    m = re.match(r"\s*- \{ at: (\d+), tensor: (\w+), offset: 0 \}", line)
    if m and k: relocations.append((k, int(m.group(1)), m.group(2)))
for name, t in tensors.items():
    if not name.endswith("_copied") or name[:-len("_copied")] in named: continue
    tensor = hashes.get(t["sha256"])
    found = [(k, at) for k, at, n in relocations if n == tensor] if tensor else []
    if not found: print(f"   NOTE {name}: no captured input holds its bytes", file=sys.stderr)
    for k, at in found:
        print(f"launch{k}.{name[:-len('_copied')]}@{at}={view(t)}")
PY2
)
printf '   sdpa view: %s\n' "${sdpa_views[@]}"
sdpa_tensor_args=(); for view in "${sdpa_views[@]}"; do sdpa_tensor_args+=(--tensor "$view"); done
wstep sdpa-judged-capture 0 "capture: a window of" -- env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$repro" capture --kernel 'bwd' \
  --launch "$sdpa_first" --through "$sdpa_through" "${sdpa_tensor_args[@]}" \
  --reference '{op: attention_backward, q: q, k: k, v: v, o: o, do: dout, lse: lse, dq: dq, dk: dk, dv: dv}' \
  -o "$work/sdpa-judged" -- python3 "${sdpa_app[@]}"
wstep sdpa-judged-spec 0 "op: attention_backward" -- cat "$work/sdpa-judged/capture.yaml"
wstep sdpa-judged-run 0 "Disposition: Passed" "!NOT reproduced" -- "$repro" run "$work/sdpa-judged"
# A Triton operator of two @triton.jit kernels (partial sums, then the normalization reading them).
wstep triton2-app 0 "call 2:" -- python3 "$root/examples/capture_torch/triton_two_kernels.py"
wstep triton2-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'partial_sums' --launch 2 --through 'finish_rms' \
  -o "$work/triton2" -- python3 "$root/examples/capture_torch/triton_two_kernels.py"
wstep triton2-spec 0 "Triton" -- grep -n "Triton\|partial_ptr\|intermediate\|output: true" "$work/triton2/capture.yaml"
wstep triton2-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/triton2"
# The same window with views of the launches' parameters (x and y in every launch that has them,
# the partials by launch 2's count): three tensors instead of the caching allocator's segment.
wstep triton2-views-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'partial_sums' --launch 2 \
  --through 'finish_rms' --tensor 'x_ptr=[n]' --tensor 'y_ptr=[n]' --tensor 'launch2.partial_ptr=[num_partials]' \
  -o "$work/triton2-views" -- python3 "$root/examples/capture_torch/triton_two_kernels.py"
wstep triton2-views-spec 0 "y_ptr: { dtype: f32, shape: [100000], output: true }" -- cat "$work/triton2-views/capture.yaml"
wstep triton2-views-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/triton2-views"
# A split-K GEMM in Triton (partials into an f32 workspace, then a reduction): replayed bit for
# bit, then with views of its pointers and a GEMM reference, judged with ones and probed.
wstep tsk-app 0 "call 2:" -- python3 "$root/examples/capture_torch/triton_split_k_gemm.py"
wstep tsk-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'split_k_partials' --launch 2 \
  --through 'split_k_reduce' -o "$work/tsk" -- python3 "$root/examples/capture_torch/triton_split_k_gemm.py"
wstep tsk-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/tsk"
wstep tsk-gemm-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel 'split_k_partials' --launch 2 \
  --through 'split_k_reduce' --tensor 'a_ptr=[M, K]' --tensor 'b_ptr=[K, N]' --tensor 'c_ptr=[M, N]' \
  --tensor 'workspace_ptr=[4, M, N]' --reference '{op: gemm, a: a_ptr, b: b_ptr, out: c_ptr}' \
  -o "$work/tsk-gemm" -- python3 "$root/examples/capture_torch/triton_split_k_gemm.py"
wstep tsk-gemm-spec 0 "op: gemm" -- cat "$work/tsk-gemm/capture.yaml"
wstep tsk-gemm-run 0 "Disposition: Passed" -- "$repro" run "$work/tsk-gemm"
wstep tsk-gemm-ones 0 "Disposition: Passed" -- "$repro" run "$work/tsk-gemm" --ones
wstep tsk-gemm-probe 0 "verdict" -- "$repro" probe "$work/tsk-gemm"
# cuBLAS behind torch.matmul at a small output and a long K: the kernels it launched listed first,
# then, when one of them is a split-K reduction, the second call's GEMM through it.
wstep cublas-sk-list 2 "kernels it launched" -- "$repro" capture --kernel 'no_such_kernel' -o "$work/cublas-sk-list" \
  -- python3 "$root/examples/capture_torch/cublas_split_k.py"
read -r cublas_first cublas_reduce < <(python3 - "$work/cublas-sk-list/raw/session.json" <<'PY2'
import json, re, sys
try:
    kernels = json.load(open(sys.argv[1]))["kernels"]
except Exception:
    kernels = []
for k in kernels:
    print("   kernel", k["launches"], k["name"][:160], file=sys.stderr)
reduce = [k for k in kernels if re.search(r"(?i)splitk.*reduce|reduce.*splitk", k["name"])]
gemm = [k for k in kernels if re.search(r"(?i)gemm|xmma|cutlass", k["name"]) and k not in reduce]
if reduce and gemm:
    head = re.split(r"[<(]", reduce[0]["name"])[0].split("::")[-1].split()[-1]
    first = re.split(r"[<(]", gemm[0]["name"])[0].split("::")[-1].split()[-1]
    # The GEMM's second call: its first launch is the first call's.
    print(first, head)
else:
    print("none none")
PY2
)
echo "   cublas split-K: gemm $cublas_first, reduction $cublas_reduce"
if [[ $cublas_reduce != none ]]; then
  wstep cublas-sk-capture 0 "capture: a window of 2 launches" -- "$repro" capture --kernel "$cublas_first" --launch 2 \
    --through "$cublas_reduce" -o "$work/cublas-sk" -- python3 "$root/examples/capture_torch/cublas_split_k.py"
  wstep cublas-sk-run 0 "reproduced bit for bit" "!NOT reproduced" -- "$repro" run "$work/cublas-sk"
else
  echo "   NOTE cublas-sk: cuBLAS launched no split-K reduction kernel at this shape"
fi
# Overhead (issue 20): the program alone, under capture recording nothing (a name that never
# launches), and under capture recording launch 100 of 200; rounds alternate, so drift on the
# machine falls on all three alike. Each repro capture also runs its own steps (the cached
# library lookup, writing the spec): that is in its time, as a user would see it.
overhead() {
  local t0 t1 t2 t3
  for round in 1 2 3 4 5; do
    t0=$(date +%s.%N); "$work/capture_app" --repeat 200 >/dev/null 2>&1
    t1=$(date +%s.%N); "$repro" capture --kernel 'no_such_kernel' -o "$work/idle$round" -- "$work/capture_app" --repeat 200 >/dev/null 2>&1
    t2=$(date +%s.%N); "$repro" capture --kernel 'tma_gemm<' --launch 100 -o "$work/rec$round" -- "$work/capture_app" --repeat 200 >/dev/null 2>&1
    t3=$(date +%s.%N)
    echo "round $round: plain $(awk "BEGIN{print $t1 - $t0}") s, capture recording nothing $(awk "BEGIN{print $t2 - $t1}") s, capture recording launch 100 $(awk "BEGIN{print $t3 - $t2}") s"
  done
}
[[ -z ${WINDOWS_ONLY:-} ]] && step overhead overhead
tar -C "$work" -czf "$out/captures.tgz" --exclude='*.npy' --exclude='*.bin' --exclude='*.cubin' --exclude='*.tar.gz' --exclude=harness --exclude=capture_app --exclude=capture_split_k --exclude=runtime --exclude=.repro --exclude=elsewhere --exclude='idle*' --exclude='rec*' . 2>/dev/null

