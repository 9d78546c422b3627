#!/usr/bin/env bash
# Every pruning method at one budget, on the SST-2 encoder and the LLaMA-style LM (issue 55;
# docs/results.md "Methods at one budget"): for each model (MODELS) and seed (SEEDS), trained once,
# half the heads go by
#   - one-shot importance (prune --strategy score): gradient, taylor, activation, magnitude;
#     layer_drop (whole attention layers, least-changing first);
#   - learned gates trained with the model: passconc, dsp, cofi (--complete-by-rank: a count the gates
#     miss at the end is completed by P(open), so every method keeps exactly half);
#   - the budget planner (prune --budget latency=S, gradient importance) at S = the latency share that
#     PASSCONC's model measured beside the unpruned one in this run (the same measured latency);
#   - the baseline: N_RANDOM (default 8) seeded random plans of the same count (prune --strategy random,
#     seeds SEED*100+1 ..), each fine-tuned as the methods are (not timed: their shapes vary);
# each followed by FT_STEPS steps of recovery fine-tuning, once on the task loss alone and once with
# distillation from the unpruned model (--distill-weight 0.5 --distill-temperature 2; gates: the same
# for their recovery). Then every result model of a seed is timed beside the unpruned one
# (`headprune bench`, batch BENCH_BATCH x BENCH_SEQ). Each step is skipped when its output exists.
# Writes OUT.json: per model and seed the runs' summaries (metric before / after fine-tuning, heads
# kept, emptied layers) and the bench records; scripts/doc_tables.py makes the table and
# `headprune plot pareto` the figure. A run adds to an existing OUT.json: the models it did not do, and
# the seeds it did not do that ran with the same settings, are kept (so a study longer than a session
# can run one seed at a time: SEEDS_SST2=1, then SEEDS_SST2=2, ...).
#
#   studies/methods.sh [RUN_ROOT] [OUT.json]     defaults: runs/methods_full  bench/results/methods_full.json
# Needs ../shared/data. Environment: MODELS (default "sst2 llama"), SEEDS (default "1 2 3"; SEEDS_SST2 and
# SEEDS_LLAMA for one model), STEPS_SST2
# (default 1200), STEPS_LLAMA (default 600), FT_STEPS (default 100), GATE_STEPS (default 300),
# GATE_PERIOD (default 50), MAX_EXAMPLES (evaluate and score on the first N examples of each split;
# default all), BENCH_BATCH (16), BENCH_SEQ (64), HP, THREADS, REPS (bench repetitions, default 10),
# MIN_TIME (seconds each model is timed at least, in the benches and the budget planner; default 2),
# N_RANDOM (random plans per seed and variant, default 8).
set -euo pipefail
models=${MODELS:-sst2 llama}
seeds=${SEEDS:-1 2 3}
root=${1:-runs/methods_full}
out=${2:-bench/results/methods_full.json}
ft=${FT_STEPS:-100}
gate_steps=${GATE_STEPS:-300}
gate_period=${GATE_PERIOD:-50}
bench_batch=${BENCH_BATCH:-16}
bench_seq=${BENCH_SEQ:-64}
min_time=${MIN_TIME:-2}
n_random=${N_RANDOM:-8}
source "$(dirname "$0")/lib.sh"
scorers="gradient taylor activation magnitude layer_drop"
gate_methods="passconc dsp cofi"
kd=(--distill-weight 0.5 --distill-temperature 2)
limit=()
[ -n "${MAX_EXAMPLES:-}" ] && limit=(--max-examples "$MAX_EXAMPLES")

config_of() { case $1 in sst2) echo configs/sst2_heldout.json ;; llama) echo configs/shakespeare_llama_heldout.json ;;
              *) echo "methods.sh: unknown model '$1' (sst2 or llama)" >&2; exit 2 ;; esac; }
seeds_of() { case $1 in sst2) echo "${SEEDS_SST2:-$seeds}" ;; llama) echo "${SEEDS_LLAMA:-$seeds}" ;; esac; }
steps_of() { case $1 in sst2) echo "${STEPS_SST2:-1200}" ;; llama) echo "${STEPS_LLAMA:-600}" ;; esac; }
stage() { echo "== $(date +%H:%M:%S) $MODEL seed $SEED: $1" >&2; }

# The latency share of MODEL_DIR beside BASE at the bench shape (median of paired ratios).
share_of() {
  h bench "$1" "$2" --batch "$bench_batch" --seq "$bench_seq" --reps "$reps" --min-time "$min_time" --no-gemm-probe \
    --json "$3" > /dev/null
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["records"]; print("%.4f" % min(1.0, 1 / r[1]["paired_speedup"]))' "$3"
}

for MODEL in $models; do
  cfg=$(config_of "$MODEL")
  report=(--config "$cfg" --split test --score-split valid "${limit[@]}")
  for SEED in $(seeds_of "$MODEL"); do
    export SEED
    run=$root/$MODEL/seed$SEED
    stage train
    train_once "$cfg" "$(steps_of "$MODEL")" "$run"
    base=$run/train/best
    mkdir -p "$run/plain" "$run/kd"
    for variant in plain kd; do
      opt=(--finetune-steps "$ft")
      [ $variant = kd ] && opt+=("${kd[@]}")
      for m in $scorers; do
        dir=$run/$variant/score_$m
        [ -f "$dir/summary.json" ] || { stage "$variant $m";
          h prune "$base" "${report[@]}" --strategy score --method "$m" --target 0.5 "${opt[@]}" --out "$dir" > "$dir.txt"; }
      done
      for g in $gate_methods; do
        gates_to 0.5 "$base" "$g" "$run/$variant/gates_$g" --config "$cfg" --split test "${limit[@]}" "${opt[@]}" \
          --complete-by-rank  # equal budgets: a gate count PASS misses by one is completed by P(open)
      done
      # Random plans of the same count, the baseline every method is read against.
      for r in $(seq 1 "$n_random"); do
        dir=$run/$variant/random_$r
        [ -f "$dir/summary.json" ] || { stage "$variant random plan $r of $n_random";
          SEED=$((SEED * 100 + r)) h prune "$base" "${report[@]}" --strategy random --target 0.5 "${opt[@]}" \
            --out "$dir" > "$dir.txt"; }
      done
      # The budget planner at PASSCONC's measured latency share.
      dir=$run/$variant/budget
      if [ ! -f "$dir/summary.json" ]; then
        stage "$variant budget at passconc's latency"
        s=$(share_of "$base" "$run/$variant/gates_passconc/model" "$run/$variant/passconc_share.json")
        h prune "$base" "${report[@]}" --budget "latency=${s}x" --method gradient --budget-batch "$bench_batch" \
          --budget-len "$bench_seq" --budget-min-time "$min_time" "${opt[@]}" --out "$dir" > "$dir.txt"
      fi
    done
    bench_json=$run/bench.json
    if [ ! -s "$bench_json" ]; then
      stage "every model timed beside the unpruned one"
      models_=("$base")
      for variant in plain kd; do
        for m in $scorers; do models_+=("$run/$variant/score_$m/model"); done
        for g in $gate_methods; do models_+=("$run/$variant/gates_$g/model"); done
        models_+=("$run/$variant/budget/model")
      done
      h bench "${models_[@]}" --batch "$bench_batch" --seq "$bench_seq" --reps "$reps" --min-time "$min_time" --no-gemm-probe \
        --json "$bench_json.tmp" > "$run/bench.txt"
      mv "$bench_json.tmp" "$bench_json"
    fi
  done
done

parts=()
seed_json=""
for MODEL in $models; do
  seed_json+="${seed_json:+, }\"$MODEL\": \"$(seeds_of "$MODEL")\""
  for s in $(seeds_of "$MODEL"); do
    p="$MODEL/seed$s"
    parts+=("$MODEL/$s/train=$p/train.json" "$MODEL/$s/bench=$p/bench.json")
    for variant in plain kd; do
      for m in $scorers; do parts+=("$MODEL/$s/$variant/score_$m=$p/$variant/score_$m/summary.json"); done
      for g in $gate_methods; do parts+=("$MODEL/$s/$variant/gates_$g=$p/$variant/gates_$g/gates.json"); done
      parts+=("$MODEL/$s/$variant/budget=$p/$variant/budget/summary.json")
      for r in $(seq 1 "$n_random"); do parts+=("$MODEL/$s/$variant/random_$r=$p/$variant/random_$r/summary.json"); done
    done
  done
done
# What this run did, per model (a later run of other MODELS keeps these models' results and this record).
env_=""
for v in MODELS SEEDS SEEDS_SST2 SEEDS_LLAMA STEPS_SST2 STEPS_LLAMA FT_STEPS GATE_STEPS GATE_PERIOD MAX_EXAMPLES REPS MIN_TIME; do
  if [ -n "${!v:-}" ]; then env_+="$v=\"${!v}\" "; fi
done
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
run_json() {  # this run's record for model $1: the command, the machine, its seeds and the settings a seed's results depend on
  echo "{\"command\": \"${env_//\"/\\\"}studies/methods.sh $root $out\", \"date\": \"$(date +%F)\", \"cpu\": \"$cpu\", \"threads\": \"${THREADS:-2}\", \"seeds\": \"$(seeds_of "$1")\", \"settings\": {\"steps\": $(steps_of "$1"), \"finetune_steps\": $ft, \"gate_steps\": $gate_steps, \"gate_period\": $gate_period, \"max_examples\": \"${MAX_EXAMPLES:-}\", \"bench\": [$bench_batch, $bench_seq]}}"
}
runs_json=""
for MODEL in $models; do runs_json+="${runs_json:+, }\"$MODEL\": $(run_json "$MODEL")"; done
earlier=""
if [ -f "$out" ]; then earlier=$out.earlier; cp "$out" "$earlier"; fi
collect "$root" "$out" "{\"command\": \"studies/methods.sh $root $out\", \"models\": \"$models\", \"runs\": {$runs_json}, \"seeds\": {$seed_json}, \"finetune_steps\": $ft, \"gate_steps\": $gate_steps, \"gate_period\": $gate_period, \"steps_sst2\": $(steps_of sst2), \"steps_llama\": $(steps_of llama), \"max_examples\": \"${MAX_EXAMPLES:-}\", \"bench\": [$bench_batch, $bench_seq]}" \
  "${parts[@]}"
# What OUT held before is kept where this run did not redo it: models this run did not do (with that run's
# record), and seeds of a model this run did that were run with the same settings (a study too long for one
# session is run seed by seed, e.g. SEEDS_SST2=2 after SEEDS_SST2=1, each run adding its seed to OUT; the
# earlier runs' records are kept under the model's "earlier"). Earlier seeds run with other settings are
# dropped, and the run says so.
if [ -n "$earlier" ]; then
  python3 - "$earlier" "$out" <<'PY'
import json, os, sys
earlier, out = (json.load(open(p)) for p in sys.argv[1:])
mine = out["models"].split()
for model in earlier["models"].split():
    run = earlier.get("runs", {}).get(model) or {
        k: earlier[k] for k in ("command", "finetune_steps", "gate_steps", "gate_period", "steps_sst2", "steps_llama",
                                "max_examples") if k in earlier}
    old_seeds = earlier["seeds"][model] if isinstance(earlier["seeds"], dict) else earlier["seeds"]
    if model not in mine:
        out[model] = earlier[model]
        out.setdefault("runs", {})[model] = run
        out["seeds"][model] = old_seeds
        continue
    new = out["runs"][model]
    keep = [s for s in old_seeds.split() if s not in new["seeds"].split() and s in earlier.get(model, {})]
    if not keep:
        continue
    if run.get("settings") != new["settings"]:
        print("methods.sh: %s seeds %s of %s were run with other settings (%s, not %s): not kept"
              % (model, " ".join(keep), sys.argv[2], run.get("settings", "not recorded"), new["settings"]), file=sys.stderr)
        continue
    for s in keep:
        out[model][s] = earlier[model][s]
    records = []  # the earlier runs, each with the seeds of it that are kept
    for r in run.pop("earlier", []) + [run]:
        seeds_r = [s for s in r.get("seeds", old_seeds).split() if s in keep]
        if seeds_r:
            records.append(dict(r, seeds=" ".join(seeds_r)))
    new["earlier"] = records
    out["seeds"][model] = " ".join(sorted(set(keep) | set(new["seeds"].split()), key=int))
mine = set(out["runs"])
out["models"] = " ".join(m for m in ("sst2", "llama") if m in mine)
tmp = sys.argv[2] + ".tmp"
with open(tmp, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
os.replace(tmp, sys.argv[2])
PY
  rm -f "$earlier"
fi
