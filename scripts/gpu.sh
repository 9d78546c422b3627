#!/usr/bin/env bash
# headprune on a GPU machine with PyTorch 2.x (CUDA) installed: build against PyTorch's LibTorch, run
# the device-aware unit tests on the GPU, Michel et al.'s Table 4 on the GPU beside PyTorch eager, and
# the transformers client check of the HF exports. docs/gpu.md explains each step and its results.
#
#   scripts/gpu.sh deps            here (Debian 12, apt): the .debs the GPU machine lacks -> .gpu/debs
#   scripts/gpu.sh build           there: unpack .gpu/debs, configure and build build-gpu/
#   scripts/gpu.sh test [OUT]      there: HP_TEST_DEVICE=cuda on the device-aware suites (JUnit XML in OUT)
#   scripts/gpu.sh table4 [OUT]    there: BERT-base 50 % pruned, batch 1/4/16/64 x 128, fp32 and bf16,
#                                  headprune (eager and replayed from CUDA graphs, --graphs cuda) and
#                                  PyTorch eager on the same weights -> OUT/gpu_table4.json
#   scripts/gpu.sh decode [OUT]    there: a LLaMA-style 127 M model (random weights, bench/engines.py's shape)
#                                  and half of its key/value groups removed: prompt 1 x 128 and 128 greedy
#                                  tokens, fp32 and bf16, eager and with --graphs cuda (after checking that
#                                  generate gives the same ids both ways) -> OUT/gpu_decode_*.json
#   scripts/gpu.sh hf [OUT]        there: transformers loads headprune's HF exports -> OUT/hf_client.json
#   scripts/gpu.sh llm7b [OUT]     there: a Mistral-7B-shaped bf16 checkpoint through info, importance,
#                                  prune and export on the GPU -> OUT/llm7b_cuda.json (LAYERS=N: fewer layers)
#   scripts/gpu.sh all [OUT]       build, test, table4, decode, hf
#   FILTER=T scripts/gpu.sh debug  there: run test T under cuda-gdb and print the stack where it stops
#
# Environment: DEPS (default /tmp/hp-deps: where the .debs are unpacked), BUILD (default build-gpu),
# WORK (default runs/gpu), REPS (default 50), JOBS (default nproc), TARGET (build one target only),
# FILTER (the tests that `test` and `debug` run).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=${DEPS:-/tmp/hp-deps}
build=${BUILD:-build-gpu}
work=${WORK:-runs/gpu}
reps=${REPS:-50}
jobs=${JOBS:-$(nproc)}
step=${1:-all}
out=${2:-$work/results}
# The packages headprune needs beyond PyTorch's image: header-only JSON and CLI parsers, GoogleTest's
# sources (built with the project, so with PyTorch's compiler flags), ICU and zlib's headers.
packages=(nlohmann-json3-dev libcli11-dev googletest libicu-dev libicu72 zlib1g-dev)

log() { printf '[gpu.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

unpack() {
  [[ -d .gpu/debs ]] || { echo "error: .gpu/debs not found: run 'scripts/gpu.sh deps' on a machine with apt first" >&2; exit 2; }
  if [[ ! -f $deps/.unpacked ]]; then
    mkdir -p "$deps"
    for f in .gpu/debs/*.deb; do dpkg -x "$f" "$deps"; done
    # zlib1g-dev's libz.so points at Debian's libz.so.1.2.13 by an absolute path: use the machine's own.
    local z
    z=$(ls /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1 || true)
    [[ -n $z ]] && ln -sf "$z" "$deps/usr/lib/x86_64-linux-gnu/libz.so"
    touch "$deps/.unpacked"
  fi
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

torch_prefix() { python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'; }

case $step in
  deps)
    mkdir -p .gpu/debs
    (cd .gpu/debs && apt-get download "${packages[@]}")
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
    du -sh .gpu/debs
    ;;
  build)
    unpack
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
    gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
    # Gloo's c10d API and oneDNN's headers are Debian's here; the GPU build leaves both out.
    cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$(torch_prefix);$deps/usr" \
      -DICU_ROOT="$deps/usr" -DZLIB_ROOT="$deps/usr" -DHP_GTEST_SOURCE="$deps/usr/src/googletest" \
      -DHP_USE_GLOO=OFF -DHP_USE_DNNL=OFF -DHP_BUILD_BENCH=OFF -DHP_USE_CCACHE=OFF
    keep_going=(); [[ ${#gen[@]} -gt 0 ]] && keep_going=(-- -k 0)  # every compile error in one pass
    targets=(); [[ -n ${TARGET:-} ]] && targets=(--target "$TARGET")  # e.g. TARGET=headprune_tests
    cmake --build "$build" --parallel "$jobs" "${targets[@]}" "${keep_going[@]}"
    ;;
  test)
    unpack
    mkdir -p "$out"
    suites=${FILTER:-'*PruneEquivalence*:*CheckpointRoundTrip*:*GradientImportance*:*TrainerResume*:*InferencePath*:Runtime.Autocast*:*GraphReplayOnTheTestDevice*:*ReplayedDecoding*:ShapeGraphs.*'}
    CUBLAS_WORKSPACE_CONFIG=:4096:8 HP_TEST_DEVICE=cuda "$build/tests/headprune_tests" --gtest_filter="$suites" \
      --gtest_output="xml:$out/gpu_tests.xml"
    ;;
  debug)  # a crashing test under cuda-gdb (a host debugger too): FILTER=Suite.Test scripts/gpu.sh debug
    unpack
    CUBLAS_WORKSPACE_CONFIG=:4096:8 HP_TEST_DEVICE=cuda cuda-gdb -batch -ex run -ex bt -ex 'x/24a $sp' \
      --args "$build/tests/headprune_tests" --gtest_filter="${FILTER:?set FILTER}"
    ;;
  table4)
    unpack
    mkdir -p "$out" "$work"
    HP="$build/headprune" THREADS="$jobs" CHECKPOINTS_ONLY=1 bash bench/bert_base_speed.sh "$work/bert_base"
    hp() { "$build/headprune" --device cuda --log-level warn "$@"; }
    models=("$work/bert_base/base" "$work/bert_base/masked50/model" "$work/bert_base/uniform50/model" "$work/bert_base/layers50/model")
    for p in fp32 bf16; do
      log "headprune bench $p"
      hp bench "${models[@]}" --precision "$p" --batch 1 --batch 4 --batch 16 --batch 64 --seq 128 --reps "$reps" \
        --warmup 5 --json "$work/headprune_$p.json"
      for m in base uniform50 layers50; do
        d=$work/bert_base/$m; [[ $m != base ]] && d=$d/model
        log "pytorch eager $p $m"
        if [[ $p == fp32 ]]; then  # same weights, same logits first
          hp bench "$d" --batch 2 --seq 128 --reps 1 --warmup 0 --save-io "$work/io_$m.safetensors" > /dev/null
          python3 bench/eager/eager.py "$d" --device cuda --check "$work/io_$m.safetensors" --reps 0 > "$work/check_$m.json"
        fi
        python3 bench/eager/eager.py "$d" --device cuda --dtype "$p" --batch 1 4 16 64 --seq 128 --reps "$reps" \
          --warmup 5 --json "$work/eager_${p}_$m.json"
      done
      # The same models replayed from CUDA graphs (one recording per model and batch), after a check that
      # the replayed logits are the eager ones (fp32, the unpruned model's --save-io file above).
      if [[ $p == fp32 ]]; then
        hp bench "${models[0]}" --batch 2 --seq 128 --reps 1 --warmup 0 --graphs cuda \
          --save-io "$work/io_graphs.safetensors" > /dev/null
      fi
      log "headprune bench $p --graphs cuda"
      hp bench "${models[@]}" --precision "$p" --batch 1 --batch 4 --batch 16 --batch 64 --seq 128 --reps "$reps" \
        --warmup 5 --graphs cuda --json "$work/headprune_graphs_$p.json"
    done
    python3 bench/gpu_table4.py "$work" --out "$out/gpu_table4.json"
    ;;
  decode)
    unpack
    mkdir -p "$out" "$work"
    hp() { "$build/headprune" --device cuda --log-level warn "$@"; }
    llama=$work/llama127m
    if [[ ! -f $llama/model.safetensors ]]; then
      python3 tests/clients/make_random_llama.py "$llama" - '{"hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 48, "intermediate_size": 2048,
        "max_position_embeddings": 4096, "vocab_size": 32000, "initializer_range": 0.02}'
    fi
    heads=$(python3 -c 'print(",".join(f"decoder_self:{l}:{h}" for l in range(12) for h in range(8)))')
    [[ -f $work/groups50/model/config.json ]] || hp prune "$llama" --strategy manual --heads "$heads" \
      --calibration random --out "$work/groups50" --overwrite
    for g in off cuda; do  # the same greedy ids with the steps replayed as without
      hp generate "$llama" --ids 1 2 3 4 5 6 7 8 --max-new 64 --graphs "$g" --json > "$work/generate_$g.json"
    done
    python3 - "$work" "$out/gpu_decode_check.json" <<'PY'
import json, sys
a, b = (json.load(open(f"{sys.argv[1]}/generate_{g}.json"))["ids"] for g in ("off", "cuda"))
json.dump({"same_ids": a == b, "n": len(a), "first_difference": next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)},
          open(sys.argv[2], "w"), indent=2)
print("generate --graphs cuda gives the same ids:", a == b)
PY
    for p in fp32 bf16; do
      for g in off cuda; do
        log "headprune bench --generate $p --graphs $g"
        hp bench "$llama" "$work/groups50/model" --generate --precision "$p" --batch 1 --seq 128 --new-tokens 128 \
          --decode-after 128 --reps "$reps" --warmup 3 --graphs "$g" --json "$out/gpu_decode_${p}_$g.json"
      done
    done
    ;;
  hf)
    unpack
    mkdir -p "$out"
    python3 tests/gpu/hf_client.py --headprune "$build/headprune" --work "$work/hf" --out "$out/hf_client.json"
    ;;
  llm7b)  # the 7B path of bench/llm7b.py with --device cuda (LAYERS=N for a shorter model)
    unpack
    mkdir -p "$out"
    python3 bench/llm7b.py --device cuda --hp "$build/headprune" --work "${LLM7B_WORK:-/tmp/llm7b}" \
      --layers "${LAYERS:-32}" --tiled --out "$out/llm7b_cuda.json"
    ;;
  all)
    "$0" build
    rc=0
    "$0" test "$out" || { rc=1; log "unit tests on the GPU FAILED (see above)"; }
    "$0" table4 "$out" || { rc=1; log "table4 FAILED"; }
    "$0" decode "$out" || { rc=1; log "decode FAILED"; }
    "$0" hf "$out" || { rc=1; log "hf client check FAILED"; }
    exit $rc
    ;;
  *)
    echo "usage: scripts/gpu.sh deps|build|test|table4|decode|hf|llm7b|all [OUT]" >&2
    exit 2
    ;;
esac
