# Sourced by the study scripts (studies/*.sh): `h` runs a headprune subcommand with the study's
# threads (and seed), echoing it; `train_once` trains the study's model unless it is there; `collect`
# gathers the study's outputs into one results JSON. Environment: HP (default build/headprune),
# THREADS (default 2), REPS (bench repetitions, default 10), SEED (headprune's --seed; default its own).
hp=${HP:-build/headprune}
threads=${THREADS:-2}
reps=${REPS:-10}

h() { echo "+ headprune ${SEED:+--seed $SEED }$*" >&2; "$hp" --threads "$threads" ${SEED:+--seed "$SEED"} "$@"; }

# train_once CONFIG STEPS RUN_DIR: RUN_DIR/train (best/, last/, history.json), its report in
# RUN_DIR/train.json; skipped when RUN_DIR/train/best exists (rerun after an interruption).
train_once() {
  mkdir -p "$3"
  [ -f "$3/train/best/model.safetensors" ] ||
    h train --config "$1" --max-steps "$2" --out "$3/train" > "$3/train.json"
}

# gates_to_half MODEL METHOD OUT_DIR [OPTION...]: `gates` to exactly half the heads in GATE_STEPS
# steps (as many again if the count is not exact by then), a period of $gate_period steps when the
# study set one, GATE_ARGS added; its table in OUT_DIR.txt; skipped when OUT_DIR/gates.json exists.
gates_to_half() {
  local model=$1 method=$2 dir=$3
  shift 3
  [ -f "$dir/gates.json" ] ||
    h gates "$model" --method "$method" --target 0.5 --steps "$gate_steps" --extra-steps "$gate_steps" \
      ${gate_period:+--period "$gate_period"} ${GATE_ARGS:-} "$@" --out "$dir" > "$dir.txt"
}

# collect RUN_DIR OUT.json HEADER_JSON KEY=PATH...: OUT = HEADER plus, for each KEY, the JSON file
# RUN_DIR/PATH as headprune wrote it (a KEY a/b nests: OUT["a"]["b"]; DROP="k1 k2" leaves those
# top-level fields out of every file, e.g. the gates' per-period log); written atomically (OUT.tmp,
# then renamed).
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
    for k in drop:
        data.pop(k, None)
    *parents, leaf = key.split("/")
    node = res
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = data
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print("wrote", out)
PY
}
