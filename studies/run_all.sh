#!/usr/bin/env bash
# Every study and benchmark behind the committed results, in one command: each writes its results
# JSON into bench/results/, then the figures in docs/figures and the generated tables in docs/ are
# redrawn and rewritten from them (scripts/figures.sh, scripts/doc_tables.py); `git diff` shows what
# moved. Studies reuse what their run directory already holds (delete it to start over).
#
#   studies/run_all.sh [--quick] [--budget MINUTES] [--list] [NAME...]
#
#   NAME...         only these studies (default: all; --list shows them with their time)
#   --budget M      run studies in order while their estimated time still fits in M minutes; the
#                   others are named as skipped (the exit status stays 0: a budget is a choice)
#   --quick         the same pipeline at toy sizes (a few steps and repetitions) into runs/quick/:
#                   results in runs/quick/results, tables printed from them, figures drawn into
#                   runs/quick/figures; nothing committed is touched. About an hour on 2 cores.
#
# Times are those of this project's machine (2 cores). Studies marked "data" need ../shared/data and
# are skipped, named, without it. Environment: HP (default build/headprune), THREADS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

# name | minutes (full) | minutes (quick) | needs ../shared/data | what it writes (bench/results/)
STUDIES="cpu|16|2|no|blas_kernels, eager_bert_base(_openblas), eager_train_sst2(_openblas), cpu_pruned_int8
ops|2|1|no|linear_engines, attention_core, attention_micro, gemm_engines
synthetic|3|1|no|demo, synthetic_mt
stories260k|1|1|no|stories260k
bert_base|6|3|no|bert_base_table4, bert_base_textbook
sst2|65|10|data|sst2_study, sst2_precision, importance_cost_sst2
sst2_seeds|90|6|data|sst2_seeds
llama_gqa|25|5|data|llama_gqa
multi30k|185|8|data|multi30k
lm_seeds|395|22|data|lm_seeds_gpt, lm_seeds_llama, lm_seeds_wikitext
methods|300|15|data|methods_full, budget
engines|35|10|data|engines
distributed|5|1|no|distributed"

quick=0 budget=0 list=0
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --budget) budget=${2:?--budget needs minutes}; shift ;;
    --list) list=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "run_all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done
known=$(echo "$STUDIES" | cut -d'|' -f1 | tr '\n' ' ')
for n in "${names[@]}"; do
  [[ " $known" == *" $n "* ]] || { echo "run_all.sh: no study '$n' (studies: $known)" >&2; exit 2; }
done
if [ $list = 1 ]; then
  echo "$STUDIES" | awk -F'|' '{printf "%-12s %3d min (quick %d)  %-4s  -> %s\n", $1, $2, $3, ($4 == "data" ? "data" : ""), $5}'
  exit 0
fi

hp=${HP:-build/headprune}
[ -x "$hp" ] || { echo "run_all.sh: $hp not found: build first (bash scripts/build.sh)" >&2; exit 1; }
export HP=$hp THREADS=${THREADS:-2}
if [ $quick = 1 ]; then
  work=runs/quick results=runs/quick/results
else
  work=runs results=bench/results
fi
mkdir -p "$results"
have_data=0
[ -d ../shared/data ] && have_data=1

run_study() {  # NAME: the study's command at full or quick size
  local q=$quick
  # Toy gates: a few periods from half-open gates with a fast gate learning rate reach the count.
  local toy_gates=(GATE_STEPS=40 GATE_PERIOD=10 "GATE_ARGS=--gate-lr 0.5 --init-log-alpha 1")
  case $1 in
    cpu)
      if [ $q = 1 ]; then STEPS=4 REPS=2 PRUNED_REPS=2 bash bench/cpu_speed.sh "$work/bert_base" "$results"
      else bash bench/cpu_speed.sh runs/bert_base "$results"; fi ;;
    ops)
      local t=0.3 ta=0.5 reps=30
      [ $q = 1 ] && t=0.01 ta=0.01 reps=3
      # gbench BINARY FILTER RESULT [OPTION...]: a Google Benchmark binary's runs -> $results/RESULT.json
      gbench() {
        local bin=$1 filter=$2 out=$3
        shift 3
        env -u OPENBLAS_CORETYPE "build/bench/$bin" --benchmark_filter="$filter" "$@" \
          --benchmark_out="$results/$out.json" --benchmark_out_format=json > /dev/null
      }
      gbench headprune_bench_linear 'BM_(Linear|OneDnnSgemm|PackedMatmul)/(1|32|2048)/' linear_engines --benchmark_min_time=$t
      gbench headprune_bench_attention Core attention_core --benchmark_min_time=$ta
      gbench headprune_bench_attention 'BM_Attention(Forward|UnfusedProjections|HalfMasked)/' attention_micro \
        --benchmark_min_time=$ta --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
      env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/eager/gemm_engines.py --threads "$THREADS" --reps $reps --json "$results/gemm_engines.json" ;;
    synthetic)
      if [ $q = 1 ]; then
        DEMO_ARGS="--train-steps 20 --finetune-steps 5" MT_ARGS="--max-steps 20" bash studies/synthetic.sh "$work/synthetic" "$results"
      else bash studies/synthetic.sh; fi ;;
    stories260k)  # ../shared/models/stories260K, not ../shared/data; skipped without it
      if [ ! -d ../shared/models/stories260K ]; then echo "stories260k: ../shared/models/stories260K is absent: skipped" >&2
      elif [ $q = 1 ]; then /usr/bin/python3 studies/stories260k.py --calibration 16 --heldout 16 --random 4 --threads "$THREADS" --out "$results/stories260k.json"
      else /usr/bin/python3 studies/stories260k.py --threads "$THREADS"; fi ;;
    bert_base)
      if [ $q = 1 ]; then REPS=1 bash bench/bert_base_speed.sh "$work/bert_base" "$results"
      else bash bench/bert_base_speed.sh runs/bert_base "$results"; fi ;;
    sst2)
      if [ $q = 1 ]; then
        env STEPS=40 FT_STEPS=5 "${toy_gates[@]}" REPS=2 bash studies/sst2.sh "$work/sst2" "$results/sst2_study.json"
        REPS=2 bash bench/precision_sst2.sh "$work/sst2/train/best" "$work/sst2/p50_ft5/model" "$results/sst2_precision.json"
        REPEATS=1 bash bench/importance_cost.sh "$work/sst2/train/best" "$results/importance_cost_sst2.json" -- \
          --config configs/sst2_heldout.json --split test --bootstrap 20
      else
        bash studies/sst2.sh && bash bench/precision_sst2.sh &&
          bash bench/importance_cost.sh runs/sst2_heldout_s1200/seed1/train/best bench/results/importance_cost_sst2.json -- \
            --config configs/sst2_heldout.json --split test --bootstrap 200
      fi ;;
    sst2_seeds)
      if [ $q = 1 ]; then
        env STEPS=40 SEEDS="1 2" FT_STEPS=5 "${toy_gates[@]}" bash studies/sst2_seeds.sh "$work/sst2_seeds" "$results/sst2_seeds.json"
      else bash studies/sst2_seeds.sh; fi ;;
    llama_gqa)
      if [ $q = 1 ]; then
        env STEPS=40 FT_STEPS=5 "${toy_gates[@]}" REPS=2 bash studies/llama_gqa.sh "$work/llama_gqa" "$results/llama_gqa.json"
      else bash studies/llama_gqa.sh; fi ;;
    multi30k)
      if [ $q = 1 ]; then
        env STEPS=40 KEEP_EVERY=20 OVER_TRAINING="20 40" MAX_SENTENCES=30 GATE_EXTRA_STEPS=40 REPS=2 "${toy_gates[@]}" \
          bash studies/multi30k.sh "$work/multi30k" "$results/multi30k.json"
      else bash studies/multi30k.sh; fi ;;
    lm_seeds)
      if [ $q = 1 ]; then
        env STEPS=30 SEEDS="1 2" FT_STEPS=5 MAX_EXAMPLES=64 "${toy_gates[@]}" bash studies/lm_seeds.sh "$work/lm_seeds" "$results"
      else bash studies/lm_seeds.sh; fi ;;
    methods)
      if [ $q = 1 ]; then
        env SEEDS="1 2" STEPS_SST2=40 STEPS_LLAMA=40 FT_STEPS=5 GATE_STEPS=40 GATE_PERIOD=10 MAX_EXAMPLES=64 REPS=2 \
          bash studies/methods.sh "$work/methods" "$results/methods_full.json"
        REPS=2 bash bench/budget.sh "$work/budget" "$results/budget.json"
      else bash studies/methods.sh && bash bench/budget.sh "$work/budget"; fi ;;
    engines)  # ONNX Runtime and llama.cpp beside headprune (tests/clients' npm packages; Mistral's tokenizer)
      if [ $q = 1 ]; then
        /usr/bin/python3 bench/engines.py --work "$work/engines" --reps 1 --rounds 1 --out "$results/engines.json"
      else /usr/bin/python3 bench/engines.py; fi ;;
    distributed)
      if [ $q = 1 ]; then STEPS=5 bash bench/distributed.sh "$results"
      else bash bench/distributed.sh "$results"; fi ;;
  esac
}

ran=() skipped=() failed=()
left=$budget
start=$(date +%s)
while IFS='|' read -r name full quick_min data writes; do
  if [ ${#names[@]} -gt 0 ] && [[ " ${names[*]} " != *" $name "* ]]; then continue; fi
  minutes=$full
  [ $quick = 1 ] && minutes=$quick_min
  if [ "$data" = data ] && [ $have_data = 0 ]; then
    skipped+=("$name (needs ../shared/data)"); continue
  fi
  if [ "$budget" != 0 ] && [ "$minutes" -gt "$left" ]; then
    skipped+=("$name (about $minutes min, $left left of the budget)"); continue
  fi
  echo "== $name: about $minutes min -> $writes" >&2
  t0=$(date +%s)
  if run_study "$name" < /dev/null; then
    ran+=("$name $(( ($(date +%s) - t0 + 30) / 60 )) min")
  else
    failed+=("$name")
    echo "run_all.sh: study $name failed (its results file is left as it was)" >&2
  fi
  left=$(( left - minutes ))
done <<< "$STUDIES"

if [ $quick = 1 ]; then
  python3 scripts/doc_tables.py --results "$results" --print
  if [ -f "$results/sst2_study.json" ] && [ -f "$results/llama_gqa.json" ] && [ -f "$results/bert_base_table4.json" ] \
     && [ -f "$results/methods_full.json" ]; then
    RESULTS=$results bash scripts/figures.sh "$work/figures" && echo "figures drawn into $work/figures" >&2
  fi
else
  bash scripts/figures.sh
  python3 scripts/doc_tables.py
  git status --short docs bench/results >&2 || true
fi
echo "ran: ${ran[*]:-none}; $(( ($(date +%s) - start + 30) / 60 )) min in all" >&2
[ ${#skipped[@]} -eq 0 ] || printf 'skipped: %s\n' "${skipped[@]}" >&2
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
