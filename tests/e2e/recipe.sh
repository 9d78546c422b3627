#!/usr/bin/env bash
# docs/recipe-llama.md run as written: its ```sh blocks in order (one shell, so variables carry over)
# and its ```js block saved as generate.mjs, on a copy of llama2.c's stories260K with a stand-in
# tokenizer (one character per id; the recipe's last section) and text the model samples itself. Then
# checks what the recipe promises: the pruned model is uniform and smaller, its native HF export
# reloads, llama.cpp completes from the q8_0 GGUF, transformers.js generates headprune's tokens from
# the ONNX folder, and perplexity is measured before and after. With RESULTS_JSON, the run's numbers
# go there (bench/results/recipe_stories260k.json is made so).
# Usage: recipe.sh HEADPRUNE_BINARY WORK_DIR [STORIES260K_DIR [RESULTS_JSON]]   (exit 77: a client missing)
set -euo pipefail
bin=$(readlink -f "$1")
work=$2
here=$(cd "$(dirname "$0")/.." && pwd)
clients=$here/clients
doc=$here/../docs/recipe-llama.md
stories=$(readlink -f "${3:-$here/../../shared/models/stories260K}" || true)
results=${4:+$(readlink -f "$(dirname "$4")")/$(basename "$4")}
for m in node-llama-cpp @huggingface/transformers; do
  [ -d "$clients/node_modules/$m" ] || { echo "skipped: $m is not installed (scripts/setup.sh runs npm ci in tests/clients)"; exit 77; }
done
[ -f "$stories/model.safetensors" ] || { echo "skipped: no stories260K at $stories"; exit 77; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "skipped: python3-torch is not installed"; exit 77; }
rm -rf "$work"
mkdir -p "$work/bin" "$work/model"
cd "$work"
ln -s "$bin" bin/headprune
ln -s "$clients/node_modules" node_modules  # generate.mjs imports @huggingface/transformers from here
export PATH=$PWD/bin:$clients/node_modules/.bin:$PATH
cp "$stories/config.json" "$stories/model.safetensors" model/
for s in 11 12 13; do  # 264 calibration stories (256 blocks), 32 held out, 32 to take a prompt from
  /usr/bin/python3 "$clients/llama2c_reference.py" sample --model "$stories" --n $([ $s = 11 ] && echo 264 || echo 32) \
    --length 128 --seed "$s" --out "sample$s.json"
done
/usr/bin/python3 - <<'PY'
import json
# llama2.c's layout: specials 0-2, the 256 byte tokens <0x00>..<0xFF> (llama.cpp's SentencePiece
# vocabulary needs them; the text writes a byte id as its literal name, an added token), then 253
# pieces, one CJK character each.
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
vocab.update({chr(0x4E00 + i): 259 + i for i in range(253)})
bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
json.dump({"model": {"type": "BPE", "byte_fallback": True, "unk_token": "<unk>", "vocab": vocab, "merges": []},
           "added_tokens": [{"id": i, "content": t, "special": True} for t, i in list(vocab.items())[:259]],
           "post_processor": {"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}},
          open("model/tokenizer.json", "w"), ensure_ascii=False)
piece = {i: t for t, i in vocab.items()}
text = lambda seq: "".join(piece[i] for i in seq[1:])  # after the BOS the tokenizer adds back  # noqa: E731
for seed, name in ((11, "calib.txt"), (12, "held.txt")):
    open(name, "w").write("".join(text(s) + "\n" for s in json.load(open(f"sample{seed}.json"))["sequences"]))
# The prompt: 12 tokens of a sampled story without byte ids (llama.cpp reads the prompt as plain text).
prompt = next(s[:12] for s in json.load(open("sample13.json"))["sequences"] if min(s[1:12]) >= 259)
open("prompt_text", "w").write(text(prompt))
PY
export MODEL=$PWD/model PROMPT
PROMPT=$(cat prompt_text)
# The recipe's blocks, as written.
/usr/bin/python3 - "$doc" <<'PY'
import re, sys
doc = open(sys.argv[1], encoding="utf-8").read()
sh = re.findall(r"```sh\n(.*?)```", doc, re.S)
js = re.findall(r"```js\n(.*?)```", doc, re.S)
assert len(sh) >= 6 and len(js) == 1, (len(sh), len(js))
open("recipe_steps.sh", "w").write("set -euo pipefail\nset -x\n" + "\n".join(sh))
open("generate.mjs", "w").write(js[0])
PY
bash recipe_steps.sh 2>&1 | tee recipe.log
/usr/bin/python3 - "$results" <<'PY'
import datetime, json, os, platform, sys
before, after = json.load(open("eval_before.json")), json.load(open("eval_after.json"))
summary = json.load(open("pruned/summary.json"))
hf = json.load(open("pruned-hf/config.json"))
assert (hf["num_attention_heads"], hf["num_key_value_heads"], hf["head_dim"]) == (6, 3, 8), hf  # a quarter removed: one key/value group of four
js, hp = json.load(open("js_ids.json")), json.load(open("hp_generate.json"))["ids"]
# HF's generate() keeps the end-of-text id it stopped at; headprune's ids end before it.
assert js in (hp, hp + [2]) and (len(hp) == 32 or js[-1] == 2), f"transformers.js {js}, headprune {hp}"
complete = open("complete.txt", encoding="utf-8", errors="replace").read()
assert "Completion:" in complete, complete[-500:]
bench = json.load(open("bench.json"))
stage = {x["stage"]: x["metric"] for x in summary["stages"]}  # on the calibration text
assert stage["fine-tuned"] < stage["removed"], stage  # the recovery recovers
assert before["perplexity"] < after["perplexity"] < 20 * before["perplexity"], (before["perplexity"], after["perplexity"])
recs = bench["records"]
r = {"command": "tests/e2e/recipe.sh build/headprune WORK ../shared/models/stories260K bench/results/recipe_stories260k.json",
     "date": datetime.date.today().isoformat(), "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                                                          if l.startswith("model name")), platform.machine()),
     "perplexity_before": before["perplexity"], "perplexity_after": after["perplexity"], "held_out_tokens": after["n_tokens"],
     "prune_stages": summary["stages"],
     "hf_config": {k: hf[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim")},
     "bytes": {"model.safetensors": os.path.getsize("model/model.safetensors"),
               "pruned-hf/model.safetensors": os.path.getsize("pruned-hf/model.safetensors"),
               "pruned-q8_0.gguf": os.path.getsize("pruned-q8_0.gguf")},
     "generated_tokens": len(hp), "stopped_at_end_of_text": len(js) > len(hp), "same_tokens_transformers_js": True,
     "bench": recs}
print(f"recipe: perplexity {before['perplexity']:.3f} -> {after['perplexity']:.3f} (pruned uniformly to "
      f"{hf['num_attention_heads']} query heads, {hf['num_key_value_heads']} key/value heads per layer); transformers.js "
      f"and headprune generate the same {len(hp)} tokens{' (then end-of-text)' if len(js) > len(hp) else ''}; llama.cpp completed "
      f"from the q8_0 GGUF")
if sys.argv[1]:
    tmp = sys.argv[1] + ".tmp"
    json.dump(r, open(tmp, "w"), indent=1)
    os.replace(tmp, sys.argv[1])
PY
echo "recipe OK"
