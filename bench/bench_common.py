"""Helpers the Python benchmark scripts in bench/ share (imported from the script's own directory)."""
import json
import os
import platform
import subprocess
import sys


def run(cmd, **kw):
    """Runs cmd and returns its stdout; exits naming the command and the end of its stderr on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r.stdout


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def write_json(path, obj):
    """obj as indented JSON at path, atomically (path.tmp, then renamed)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def random_llama(work, tokenizer, cfg, clients):
    """WORK/base: a LLaMA-style HF folder with random weights around a real tokenizer
    (tests/clients/make_random_llama.py), made once; returns its path."""
    base = os.path.join(work, "base")
    if not os.path.exists(os.path.join(base, "model.safetensors")):
        run(["/usr/bin/python3", os.path.join(clients, "make_random_llama.py"), base, tokenizer, json.dumps(cfg)])
    return base


def pruned_variant(hp, base, out, heads):
    """`headprune prune --strategy manual` of the given "type:layer:head" list into OUT, made once;
    returns the pruned model's path (OUT/model)."""
    if not os.path.exists(os.path.join(out, "model", "config.json")):
        run([hp, "--log-level", "warn", "prune", base, "--strategy", "manual", "--heads", ",".join(heads),
             "--calibration", "random", "--out", out, "--overwrite"])
    return os.path.join(out, "model")
