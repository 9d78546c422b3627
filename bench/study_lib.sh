# Sourced by the study scripts (bench/*_study.sh): `h` runs a headprune subcommand with the study's
# threads, echoing it; `collect` gathers the study's outputs into one results JSON.
# Needs: hp (the binary), threads.

h() { echo "+ headprune $*" >&2; "$hp" --threads "$threads" "$@"; }

# collect RUN_DIR OUT.json HEADER_JSON KEY=PATH...: OUT = HEADER plus, for each KEY, the JSON file
# RUN_DIR/PATH as headprune wrote it; written atomically (OUT.tmp, then renamed).
collect() {
  python3 - "$@" <<'PY'
import json, os, sys
run, out, header = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
res = dict(header)
for kv in sys.argv[4:]:
    key, path = kv.split("=", 1)
    with open(os.path.join(run, path)) as f:
        res[key] = json.load(f)
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
print("wrote", out)
PY
}
