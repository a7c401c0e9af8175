#!/usr/bin/env bash
# Offline inference img/s on the CPU: `ringbench infer --scenarios offline --backend onednn` vs
# PyTorch eager (bench/pytorch_infer.py: eval mode under torch.inference_mode) on the same
# networks, threads, batches and image sizes, side by side in one run. Each repeat runs, per
# thread count and model, one ringbench process and one PyTorch process that each sweep the
# batches (one setup each: ringbench builds a network per served size, up to the largest batch);
# which of the two goes first alternates from pair to pair, so machine noise and drift hit both
# alike. Per run it records the CPU time that other processes took on the machine meanwhile.
# bench/summarize_infer.py then gives medians (min-max) over repeats and the ringbench / PyTorch
# ratio per repeat (a pair measured side by side).
#
#   bench/infer_vs_pytorch.sh [OUTDIR]      (default results/pytorch-infer-cpu-<date>)
# Environment: REPEATS (5), THREADS ("1 2"), MODELS ("mobilenet_v1 inception_v3"),
#   BATCHES_mobilenet_v1 (1,8,32), BATCHES_inception_v3 (1,8,16), SIZE_mobilenet_v1 (224),
#   SIZE_inception_v3 (299), MIN_DURATION (seconds per batch size and run, 2), PT_WARMUP (untimed
#   PyTorch batches per size, 1; ringbench runs every served size twice), BIN
#   (build/runner/ringbench; copied first, so a rebuild during the run changes nothing), PYTHON
#   (/usr/bin/python3: Debian's python3-torch), QUIET_WAIT (60), QUIET_BELOW (25): see wait_quiet
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/results/pytorch-infer-cpu-$(date +%Y%m%d)}
repeats=${REPEATS:-5}
threads=${THREADS:-"1 2"}
models=${MODELS:-"mobilenet_v1 inception_v3"}
min_duration=${MIN_DURATION:-2}
pt_warmup=${PT_WARMUP:-1}
python=${PYTHON:-/usr/bin/python3}
src_bin=${BIN:-$root/build/runner/ringbench}
[ -x "$src_bin" ] || { echo "build first: flock /tmp/rb-build.lock ninja -C build ringbench" >&2; exit 1; }
"$python" -c "import torch, torchvision" || { echo "needs $python with torch: apt-get install python3-torch python3-torchvision" >&2; exit 1; }
mkdir -p "$out/raw"
bin=$(mktemp -d)/ringbench
cp "$src_bin" "$bin"
trap 'rm -rf "$(dirname "$bin")"' EXIT

batches_of() { local v="BATCHES_$1"; case $1 in inception_v3) echo "${!v:-1,8,16}";; *) echo "${!v:-1,8,32}";; esac; }
size_of() { local v="SIZE_$1"; case $1 in inception_v3) echo "${!v:-299}";; *) echo "${!v:-224}";; esac; }
busy_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }  # user nice system irq softirq

# Before each pair: wait (at most QUIET_WAIT seconds, 60) until other processes use less than
# QUIET_BELOW percent (25) of the CPUs over 2 s; the pair then runs either way.
quiet_wait=${QUIET_WAIT:-60}
quiet_below=${QUIET_BELOW:-25}
wait_quiet() {
  local start=$SECONDS b0 b1 pct hz; hz=$(getconf CLK_TCK)
  while :; do
    b0=$(busy_jiffies); sleep 2; b1=$(busy_jiffies)
    pct=$(( (b1 - b0) * 100 / (2 * hz * $(nproc)) ))
    if [ "$pct" -lt "$quiet_below" ] || [ $((SECONDS - start)) -ge "$quiet_wait" ]; then
      echo "   (others at ${pct}% of the CPUs after $((SECONDS - start)) s of waiting)" >&2; return; fi
  done
}

# run TAG CMD...: the command's output to raw/TAG.log; raw/TAG.cpu.json: wall time, its own CPU
# time and the whole machine's busy CPU time over the same interval (all in seconds).
run() {
  local tag=$1; shift
  echo "== $tag" >&2
  local b0 t0 b1 t1
  b0=$(busy_jiffies); t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$out/raw/$tag.time" "$@" >"$out/raw/$tag.log" 2>&1 || {
    echo "FAILED: $tag (see $out/raw/$tag.log)" >&2; tail -5 "$out/raw/$tag.log" >&2; return 1; }
  b1=$(busy_jiffies); t1=$(date +%s.%N)
  grep -E "^Offline" "$out/raw/$tag.log" | sed 's/^/   /' >&2
  read -r u s <"$out/raw/$tag.time"
  local hz; hz=$(getconf CLK_TCK)
  printf '{"wall_s": %s, "own_cpu_s": %s, "machine_busy_s": %s, "cpus": %s, "loadavg": "%s"}\n' \
    "$(echo "$t1 - $t0" | bc)" "$(echo "$u + $s" | bc)" "$(echo "scale=2; ($b1 - $b0) / $hz" | bc)" \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" >"$out/raw/$tag.cpu.json"
  rm -f "$out/raw/$tag.time"
}

{
  echo "# $(date -u +%FT%TZ) bench/infer_vs_pytorch.sh $out"
  echo "REPEATS=$repeats THREADS=\"$threads\" MODELS=\"$models\" MIN_DURATION=$min_duration PT_WARMUP=$pt_warmup QUIET_WAIT=$quiet_wait QUIET_BELOW=$quiet_below"
  for model in $models; do echo "$model: batches $(batches_of "$model"), image size $(size_of "$model")"; done
  echo "ringbench: $("$bin" --version 2>&1 | head -1) ($src_bin)"
  echo "git: $(git -C "$root" rev-parse HEAD) $(git -C "$root" status --short -- models runner base collectives | wc -l) modified files under models/ runner/ base/ collectives/"
  echo "torch: $("$python" -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__, torch.__file__)')"
  echo "packages: $(dpkg-query -W -f='${Package} ${Version}; ' python3-torch python3-torchvision libdnnl-dev 'libdnnl2*' 2>/dev/null || true)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc); flags: $(grep -o 'avx512[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "kernel: $(uname -r); OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}"
} | tee "$out/env.txt" >&2

# ringbench's parameter count per model (a one-step train at a small size: the count does not
# depend on it), for the summary to check against PyTorch's.
for model in $models; do
  small=32; [ "$model" = inception_v3 ] && small=75
  "$bin" train --model "$model" --steps 1 --warmup 0 --batch 1 --image-size "$small" --log-every 0 \
    --json "$out/raw/${model}_params_ringbench.json" >/dev/null
done

for rep in $(seq 1 "$repeats"); do
  pair=$rep  # which side goes first flips from pair to pair and, for each pair, from repeat to repeat
  for t in $threads; do
    for model in $models; do
      b=$(batches_of "$model"); size=$(size_of "$model"); maxb=${b##*,}
      tag="${model}_t${t}_r${rep}"
      rb() {
        run "${tag}_ringbench" "$bin" infer --model "$model" --backend onednn --device cpu --scenarios offline \
          --image-size "$size" --threads "$t" --max-batch "$maxb" --batches "$b" \
          --min-duration "$min_duration" --min-queries 1 --json "$out/raw/${tag}_ringbench.json"
      }
      pt() {
        run "${tag}_pytorch" "$python" "$root/bench/pytorch_infer.py" --model "$model" --image-size "$size" \
          --threads "$t" --batches "$b" --warmup "$pt_warmup" --min-duration "$min_duration" \
          --json "$out/raw/${tag}_pytorch.json"
      }
      wait_quiet
      if [ $((pair % 2)) = 0 ]; then rb; pt; else pt; rb; fi
      pair=$((pair + 1))
    done
  done
done
python3 "$root/bench/summarize_infer.py" "$out" | tee "$out/table.md"
