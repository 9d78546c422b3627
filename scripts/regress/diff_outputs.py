#!/usr/bin/env python3
"""diff_outputs.py A B: compare two outputs.sh trees file by file, ignoring timings and the output paths.

Intended differences of the refactor, and only those, are normalised away:
  - checkpoints are version 2 ("version" key of config.json) and name the mask buffers head_mask
    instead of head_gate (safetensors compared tensor by tensor, bytes equal, after that rename);
  - prune's summary.json has a new "checks" object and its stdout a new "checks: ..." line.
"""
import json, os, re, struct, sys
A, B = sys.argv[1], sys.argv[2]
TIME_KEYS = {"seconds", "wall_s", "elapsed_s", "tokens_per_s", "forward_ms", "train_seconds", "cost",
             "peak_rss_bytes", "device_peak_bytes"}  # measurements of the run, not results
TIME_RE = re.compile(r"(\d+(\.\d+)? ?(s|ms)\b|[\d.]+ (tok|ex|step|it|sent|shape)/s|ETA \S+|elapsed \S+|x[0-9.]+ a forward)")
NEW_KEYS = {"checks"}

def strip(o, top=True):
    if isinstance(o, dict):
        return {k: strip(v, False) for k, v in o.items()
                if k not in TIME_KEYS and not (top and (k in NEW_KEYS or k == "version"))}
    if isinstance(o, list): return [strip(v, False) for v in o]
    return o

def safetensors(p):
    data = open(p, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__": continue
        b, en = e["data_offsets"]
        out[name.replace(".head_gate", ".head_mask")] = (e["dtype"], e["shape"], data[8 + n + b: 8 + n + en])
    return out

def load(p, root):
    if p.endswith(".stdout"):
        txt = open(p).read().replace(root, "<OUT>")
        lines = [l for l in txt.splitlines() if not l.startswith("checks: ")]
        body = "\n".join(l for l in lines if not l.startswith("rc="))
        try: return (strip(json.loads(body)), [l for l in lines if l.startswith("rc=")])
        except Exception: return TIME_RE.sub("<t>", "\n".join(lines))
    if p.endswith(".json"):
        try: return strip(json.loads(open(p).read().replace(root, "<OUT>")))
        except Exception: pass
    if p.endswith(".safetensors"):
        return safetensors(p)
    if p.endswith((".gguf", ".onnx", "_data")):
        return open(p, "rb").read()  # exports: byte for byte
    txt = open(p, errors="replace").read().replace(root, "<OUT>")
    return TIME_RE.sub("<t>", txt)

def files(root):
    out = set()
    for d, _, fs in os.walk(root):
        for f in fs:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out

fa, fb = files(A), files(B)
bad = 0
for f in sorted(fa | fb):
    if f.endswith(".stderr"): continue
    if f not in fa or f not in fb:
        print("only in one:", f); bad += 1; continue
    if load(os.path.join(A, f), A) != load(os.path.join(B, f), B):
        bad += 1
        print("DIFF", f)
n = len([f for f in fa | fb if not f.endswith(".stderr")])
print(f"{n} files compared, {bad} differ")
sys.exit(1 if bad else 0)
