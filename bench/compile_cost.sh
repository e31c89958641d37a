#!/usr/bin/env bash
# Compile cost of tracetorch (docs/performance.md): times translation units with and without
# tracetorch, same compiler and flags as the CMake Release build, no precompiled header, and
# prints the median of N runs of each and the ratios. The Llama rows compare the model's own
# translation unit (examples/llama/llama.cpp: modules and forwards, annotated, with the light
# includes model code needs) with the same model in plain LibTorch (bench/plain_llama.cpp);
# the TRACETORCH_DISABLE row is the annotated one with tracing compiled out (headers only).
# Times on a shared VM move by tens of percent from run to run, so each row also gives the
# fastest run and the compiler's own count of the memory it allocated (GCC's -fmem-report
# "Total"; one more, untimed compile): that figure is the same at every run, grows with the
# parsing and instantiating a translation unit asks for, and shows a change that the times hide.
#   bench/compile_cost.sh [N]        (run from the repository root; default N=3)
#   bench/compile_cost.sh --memory-only   (GCC's memory counts alone, no timed runs: the one figure
#                                           a shared machine does not blur; the table's times are 0)
set -euo pipefail
memory_only=false
if [[ ${1:-} == --memory-only ]]; then memory_only=true; shift; fi
runs=${1:-3}
if $memory_only; then runs=0; fi
cxx=${CXX:-c++}
root=$(pwd)
flags=(-O3 -DNDEBUG -D_GLIBCXX_USE_CXX11_ABI=1 -std=gnu++20 -I"$root/include" -I"$root/examples" -I"$root/bench"
       -isystem /usr/include/torch/csrc/api/include -DBOOST_JSON_NO_LIB -DBOOST_CONTAINER_NO_LIB)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '#include <torch/torch.h>\n' > "$work/torch_only.cpp"
printf '#include <torch/torch.h>\n#include <tracetorch/tracetorch.hpp>\n' > "$work/torch_and_tracetorch.cpp"
printf '#include <torch/torch.h>\n#include <tracetorch/capture.hpp>\n#include <tracetorch/module.hpp>\n#include <tracetorch/nn.hpp>\n' > "$work/torch_and_model_headers.cpp"

# Interleaved: each round compiles every translation unit once, so that the machine's drift
# (a shared VM) spreads over all of them instead of landing on whichever is timed last.
names=(plain annotated disabled torch_only with_tracetorch with_model_headers)
sources=("$root/bench/plain_llama.cpp" "$root/examples/llama/llama.cpp" "$root/examples/llama/llama.cpp"
         "$work/torch_only.cpp" "$work/torch_and_tracetorch.cpp" "$work/torch_and_model_headers.cpp")
extra=("" "" "-DTRACETORCH_DISABLE" "" "" "")
declare -A times
echo "compiler: $("$cxx" --version | head -1); $runs runs each, interleaved; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$runs"); do
  for i in "${!names[@]}"; do
    start=$(date +%s.%N)
    "$cxx" "${flags[@]}" ${extra[$i]} -c "${sources[$i]}" -o "$work/out.o"
    end=$(date +%s.%N)
    times[${names[$i]}]+="$(echo "$end - $start" | bc -l) "
  done
done
median() {  # median of the times recorded for $1
  [[ -n ${times[$1]-} ]] || { echo 0; return; }
  printf '%s\n' ${times[$1]} | sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
fastest() { [[ -n ${times[$1]-} ]] || { echo 0; return; }; printf '%s\n' ${times[$1]} | sort -g | head -1; }
declare -A memory
# GCC's garbage-collected allocations in MB (-fmem-report's "Total"), the same at every run.
# -ftime-report's TOTAL, used before 2026-11-28, makes GCC 12.2 fail with an internal compiler
# error (timevar.cc:453) on the TRACETORCH_DISABLE row, and `set -e` then ended the script.
for i in "${!names[@]}"; do
  memory[${names[$i]}]=$("$cxx" "${flags[@]}" ${extra[$i]} -fmem-report -c "${sources[$i]}" -o "$work/out.o" 2>&1 |
                         awk '$1 == "Total" && $2 ~ /M$/ && !found {print $2 + 0; found = 1}')
done
ratio() { if [[ $(echo "$2 == 0" | bc) == 1 ]]; then echo 0; else echo "$1 / $2" | bc -l; fi; }
row() {  # row LABEL NAME BASE_NAME
  printf '| %s | %.2f | %.3f | %.2f | %.3f | %d | %.3f |\n' "$1" "$(median "$2")" "$(ratio "$(median "$2")" "$(median "$3")")" \
    "$(fastest "$2")" "$(ratio "$(fastest "$2")" "$(fastest "$3")")" "${memory[$2]}" "$(ratio "${memory[$2]}" "${memory[$3]}")"
}
printf '| translation unit | median s | ratio | fastest s | ratio | GCC memory MB | ratio |\n| --- | --- | --- | --- | --- | --- | --- |\n'
row '<torch/torch.h> alone' torch_only torch_only
row '<torch/torch.h> + <tracetorch/tracetorch.hpp>' with_tracetorch torch_only
row '<torch/torch.h> + module.hpp, nn.hpp, capture.hpp (what model code needs)' with_model_headers torch_only
row 'Llama, plain LibTorch (bench/plain_llama.cpp)' plain plain
row 'Llama, annotated, TRACETORCH_DISABLE' disabled plain
row 'Llama, annotated (examples/llama/llama.cpp)' annotated plain
