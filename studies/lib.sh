# Sourced by the study scripts (studies/*.sh): `h` runs a headprune subcommand with the study's
# threads (and seed), echoing it; `train_once` trains the study's model unless it is there; `stage`,
# `once` and `gates_to` are the stages' helpers; `collect` gathers the study's outputs into one
# results JSON. Environment: HP (default build/headprune),
# THREADS (default 2), REPS (bench repetitions, default 10), SEED (headprune's --seed; default its own).
hp=${HP:-build/headprune}
threads=${THREADS:-2}
reps=${REPS:-10}

h() { echo "+ headprune ${SEED:+--seed $SEED }$*" >&2; "$hp" --threads "$threads" ${SEED:+--seed "$SEED"} "$@"; }

# train_once CONFIG STEPS RUN_DIR [OPTION...]: RUN_DIR/train (best/, last/, history.json), its report
# in RUN_DIR/train.json (written when the run ends); skipped when that report exists; a run stopped
# before it (interrupted, or a study continued in a later session) is resumed from RUN_DIR/train/last.
train_once() {
  local cfg=$1 steps=$2 dir=$3 resume=()
  shift 3
  mkdir -p "$dir"
  [ -s "$dir/train.json" ] && return 0
  [ -f "$dir/train/last/trainer_state.json" ] && resume=(--resume)
  h train --config "$cfg" --max-steps "$steps" "$@" "${resume[@]}" --out "$dir/train" > "$dir/train.json.tmp"
  mv "$dir/train.json.tmp" "$dir/train.json"
}

# stage MESSAGE: a timestamped progress line on stderr (the seed studies redefine it with their seed)
stage() { echo "== $(date +%H:%M:%S) $1" >&2; }

# once FILE COMMAND...: run COMMAND unless FILE exists and is not empty (its standard output to FILE,
# through FILE.tmp)
once() {
  local f=$1
  shift
  [ -s "$f" ] && return 0
  "$@" > "$f.tmp"
  mv "$f.tmp" "$f"
}

# gates_to TARGET MODEL METHOD OUT_DIR [OPTION...]: `gates` to exactly TARGET heads pruned (a
# fraction or a count) in $gate_steps steps, then up to $gate_extra more (default as many again;
# hard_concrete's λ search $hc_extra where the study sets it)
# while the count is not exact, a period of $gate_period steps when the study set one, GATE_ARGS
# added; its table in OUT_DIR.txt; skipped when OUT_DIR/gates.json exists. A run that ends off the
# count exits non-zero but saves its results, whose "reached_target" says so: that does not stop the
# study (any other failure does).
gates_to() {
  local target=$1 model=$2 method=$3 dir=$4 extra=${gate_extra:-$gate_steps}
  shift 4
  [ "$method" = hard_concrete ] && extra=${hc_extra:-$extra}
  mkdir -p "$(dirname "$dir")"
  [ -f "$dir/gates.json" ] ||
    h gates "$model" --method "$method" --target "$target" --steps "$gate_steps" --extra-steps "$extra" \
      ${gate_period:+--period "$gate_period"} ${GATE_ARGS:-} "$@" --out "$dir" > "$dir.txt" ||
    [ -f "$dir/gates.json" ]
}

# collect RUN_DIR OUT.json HEADER_JSON KEY=PATH...: OUT = HEADER plus, for each KEY, the JSON file
# RUN_DIR/PATH as headprune wrote it (a KEY a/b nests: OUT["a"]["b"]; the KEY . adds the file's
# fields to OUT's top level; DROP="k1 k2" leaves those top-level fields out of every file, e.g. the
# gates' per-period log); written atomically (OUT.tmp, then renamed).
collect() {
  DROP=${DROP:-} python3 - "$@" <<'PY'
import json, os, sys
run, out, header = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
drop = os.environ["DROP"].split()
res = dict(header)
for kv in sys.argv[4:]:
    key, path = kv.split("=", 1)
    with open(os.path.join(run, path)) as f:
        data = json.load(f)
    for k in drop if isinstance(data, dict) else ():  # a list (agreement's rows) has no fields
        data.pop(k, None)
    if key == ".":
        res.update(data)
        continue
    *parents, leaf = key.split("/")
    node = res
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = data
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print("wrote", out)
PY
}
