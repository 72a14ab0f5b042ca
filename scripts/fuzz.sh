#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang under ASan and UBSan (build-fuzz/) and
# runs each for FUZZ_SECONDS (default 600), FUZZ_JOBS targets at a time (default 2), starting from
# its regression corpus, the matching fixture files and its dictionary. Writes
# build-fuzz/report/<target>.log (libFuzzer's output) and prints one line per target:
# executions, coverage (edges), corpus size and findings (crashing inputs, in
# build-fuzz/findings/<target>/; add each, once fixed, to tests/fuzz/regressions/<target>/).
#   bash scripts/fuzz.sh                 every target
#   bash scripts/fuzz.sh fasta hub       some
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCMAKE_C_FLAGS_DEBUG="-O1 -g" -DBIOINFER_FUZZ=ON \
    -DBIOINFER_TESTS=OFF -DBIOINFER_PYTHON=OFF -DBIOINFER_MPI=OFF >/dev/null
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fasta boltz_input msa safetensors torch_checkpoint mol_pickle
                                     config structure npz merge hub tar)
cmake --build build-fuzz -j"${BIOINFER_JOBS:-2}" --target "${targets[@]/#/fuzz_}"

seconds=${FUZZ_SECONDS:-600}
fx=tests/fixtures
declare -A dict=([fasta]=sequence [msa]=sequence [boltz_input]=yaml [safetensors]=json
                 [torch_checkpoint]=pickle [mol_pickle]=pickle [config]=json [structure]=structure
                 [npz]=pickle [merge]=json [hub]=json [tar]=tar)
declare -A max_len=([safetensors]=8192 [torch_checkpoint]=16384 [mol_pickle]=8192 [structure]=65536
                    [npz]=8192 [merge]=8192 [tar]=16384)
# fixture files each target starts from, beside its regression corpus
seeds() {
    case $1 in
        fasta) ls $fx/public/*.fasta examples/*.fasta $fx/score/*.fasta ;;
        boltz_input) find examples $fx -name '*.yaml' ;;
        msa) find $fx -name '*.a3m' -o -path '*inputs*' -name '*.csv' ;;
        config) find $fx -name config.json ;;
        mol_pickle) find $fx -name '*.pkl' -size -8k ;;
        torch_checkpoint) find $fx -name '*.pth' -size -16k -o -name '*.ckpt' -size -16k ;;
        *) ;;
    esac 2>/dev/null || true
}

mkdir -p build-fuzz/report
run_target() {
    local t=$1 corpus=build-fuzz/corpus/$1 findings=build-fuzz/findings/$1
    rm -rf "$findings"  # this run's findings only: copy earlier ones out first
    mkdir -p "$corpus" "$findings"
    cp -n tests/fuzz/regressions/"$t"/* "$corpus"/ 2>/dev/null || true
    for f in $(seeds "$t"); do cp -n "$f" "$corpus/fixture-$(echo "$f" | tr / _)" 2>/dev/null || true; done
    # ASan's leak check at exit, UBSan aborting; a run that finds something stops there
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ./build-fuzz/fuzz_"$t" "$corpus" -dict=tests/fuzz/dict/"${dict[$t]}".dict \
        -max_total_time="$seconds" -max_len="${max_len[$t]:-4096}" -timeout=20 -rss_limit_mb=4096 \
        -malloc_limit_mb=2048 -artifact_prefix="$findings"/ -print_final_stats=1 \
        >build-fuzz/report/"$t".log 2>&1 || true
    local log=build-fuzz/report/$t.log
    local execs cov took
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    # the time it ran: shorter than asked when it stopped at a finding
    took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' ||
           echo "under $seconds")
    echo "fuzz: $t: ${execs:-?} executions in ${took} s, coverage ${cov:-?} edges," \
         "corpus $(ls "$corpus" | wc -l), findings $(ls "$findings" | wc -l) (build-fuzz/report/$t.log)"
}

jobs=${FUZZ_JOBS:-2}
for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    echo "fuzz: $t for ${seconds} s"
    run_target "$t" &
done
wait
