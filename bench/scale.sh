#!/usr/bin/env bash
# The debugger's cost against the work (docs/performance.md, "Scale"): (d) use_repr=true,
# (e) use_repr=false and (h) the non-finite sentinel as ratios to the plain forward, for each
# model size and sequence length, then what reading the traces back costs (the diff of each
# trace against itself, module replay of the use_repr=false trace) against their size, in time
# and peak memory. Prints markdown, ready to paste. Each ratio to (a) is given twice: the wall
# clock's, then in brackets that of the CPU seconds per forward (all threads), which another
# load on the machine disturbs less. Run from the repository root:
#   bench/scale.sh [--bench build/bench/tracetorch_bench] [--configs "tiny mid seed004"]
#                  [--seqs "30 256 2048"] [--batch 4] [--repeats 3] [--out DIR] [--skip CONFIGxSEQ ...]
# --skip leaves a combination out (e.g. --skip seed004x2048: about 36 GB of use_repr=false files a
# trace at batch 4, twice that with the spares; at --batch 1 it is 9 GB and 20 minutes on a 2-core
# machine); a skipped row says so.
set -euo pipefail
bench=build/bench/tracetorch_bench
configs="tiny mid seed004"
seqs="30 256 2048"
batch=4
repeats=3
out=$(mktemp -d /tmp/tracetorch-scale.XXXXXX)
skips=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --bench) bench=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --seqs) seqs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip) skips+=("$2"); shift 2 ;;
    *) echo "scale.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
[[ -x $bench ]] || { echo "scale.sh: $bench is not built (cmake --build build -j1 --target tracetorch_bench)" >&2; exit 2; }

echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs." \
     "Commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown). $(date -u '+%Y-%m-%d %H:%M UTC')." \
     "Batch $batch, --repeats $repeats. Load average $(cut -d' ' -f1-3 /proc/loadavg) at start."
echo
timings="| config | seq | (a) plain, median wall (CPU) | (d) use_repr=true | (e) use_repr=false | (h) sentinel | (f) noise floor | (e) files | peak RSS over the model: (a) / (d) / (e) / (h) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
costs=""
for config in $configs; do
  for seq in $seqs; do
    if [[ " ${skips[*]-} " == *" ${config}x${seq} "* ]]; then
      timings+=$'\n'"| $config | $seq | skipped (--skip) | | | | | | |"
      continue
    fi
    echo "scale.sh: $config x $seq" >&2
    log="$out/${config}_${seq}.md"
    "$bench" --config "$config" --batch "$batch" --seq "$seq" --modes adefh --repeats "$repeats" --disk-mb 0 \
             --out "$out/run" --post-costs > "$log"
    # tracetorch_bench's rows: | config | mode | median s | min s | ratio | notes |
    cell() { awk -F' [|] ' -v m="$1" -v c="$2" 'index($2, m) == 1 {print $c}' "$log"; }
    peak() { cell "$1" 6 | grep -o 'peak RSS [0-9]* MiB (+[0-9]*' | sed 's/.*(+//' ; }
    cpu() { cell "$1" 6 | grep -o '[0-9.]* CPU s' | cut -d' ' -f1; }
    both() {  # wall ratio to (a), then the ratio of CPU seconds (all threads) in brackets
      echo "$(cell "$1" 5) ($(echo "$(cpu "$1") / $(cpu '(a)')" | bc -l | xargs printf '%.2f'))"
    }
    files=$(cell "(e)" 6 | grep -o '^[0-9.]* MB of files' || true)
    timings+=$'\n'"| $config | $seq | $(cell '(a)' 3) s ($(cpu '(a)') CPU s) | $(both '(d)') | $(both '(e)') | $(both '(h)') | $(both '(f)') | $files | +$(peak '(a)') / +$(peak '(d)') / +$(peak '(e)') / +$(peak '(h)') MiB |"
    costs+=$(grep -E '^\| [a-z0-9]+ \| [0-9]+ x [0-9]+ \|' "$log" || true)$'\n'
    rm -rf "$out/run"
  done
done
echo "$timings"
echo
echo "Reading the traces back (each once, after the timed runs of the row above; peak RSS over the process's RSS before):"
echo
echo "| config | batch x seq | operation | trace size | seconds | peak RSS over before | result |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
printf '%s' "$costs"
echo
echo "Load average $(cut -d' ' -f1-3 /proc/loadavg) at end. Logs: $out"
