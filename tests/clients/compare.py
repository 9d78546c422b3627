#!/usr/bin/env python3
"""headprune's tokenizers against real clients, line by line.

Usage: compare.py HEADPRUNE TOKENIZERS_DIR TEXTS KNOWN_DIFFERENCES WORK_DIR

For each real tokenizer in TOKENIZERS_DIR (../shared/tokenizers), encodes every line of TEXTS with
`headprune tokenize` and with the reference client -- transformers.js (hf_encode.mjs) for
tokenizer.json, Debian's python3-sentencepiece (spm_encode.py) for tokenizer.model / source.spm --
with special tokens and without, and decodes the reference's ids with both. Lines that differ must be
listed in KNOWN_DIFFERENCES (TSV: case, mode, line, reason; the reasons are in docs/tokenizers.md);
an unlisted difference, or a listed line that no longer differs, fails the test. Exit 77 (skipped)
when the tokenizers or the clients are not installed.
"""
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's python3-sentencepiece lives there


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="surrogateescape")
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    out = r.stdout.split("\n")
    if out and out[-1] == "":
        out.pop()
    return [json.loads(x) for x in out]


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    headprune, tokdir, texts, known_file, work = sys.argv[1:]
    tokdir = os.path.abspath(tokdir)
    if not os.path.isdir(tokdir):
        print(f"skipped: no tokenizers at {tokdir}")
        sys.exit(77)
    if not os.path.isdir(os.path.join(HERE, "node_modules", "@huggingface", "transformers")):
        print("skipped: transformers.js is not installed (scripts/setup.sh runs npm ci in tests/clients)")
        sys.exit(77)
    if subprocess.run([PYTHON, "-c", "import sentencepiece"], capture_output=True).returncode != 0:
        print("skipped: python3-sentencepiece is not installed (scripts/setup.sh)")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    # Mistral's tokenizer.model alone (its folder's tokenizer.json would be read first).
    mistral_spm = os.path.join(work, "mistral_spm")
    os.makedirs(mistral_spm, exist_ok=True)
    for f in ("tokenizer.model", "tokenizer_config.json"):
        link = os.path.join(mistral_spm, f)
        if not os.path.lexists(link):
            os.symlink(os.path.join(tokdir, "mistral-7b-v0.1", f), link)

    node = lambda d: lambda mode, f: ["node", os.path.join(HERE, "hf_encode.mjs"), d, f, mode]
    spm = lambda m, *extra: lambda mode, f: [PYTHON, os.path.join(HERE, "spm_encode.py"), m, f, mode, *extra]
    t = lambda *p: os.path.join(tokdir, *p)
    cases = [
        ("mistral-json", t("mistral-7b-v0.1"), node(t("mistral-7b-v0.1"))),
        ("t5-json", t("t5-small"), node(t("t5-small"))),
        ("phi2-json", t("phi-2"), node(t("phi-2"))),
        ("mistral-spm", mistral_spm, spm(t("mistral-7b-v0.1", "tokenizer.model"))),
        ("llama2-spm", t("llama2"), spm(t("llama2", "tokenizer.model"))),
        ("marian-spm", t("marian-opus-mt-en-mg"),
         spm(t("marian-opus-mt-en-mg", "source.spm"), "--vocab", t("marian-opus-mt-en-mg", "vocab.json"))),
    ]
    known = {}
    with open(known_file, encoding="utf-8") as f:
        for row in csv.reader((l for l in f if l.strip() and not l.startswith("#")), delimiter="\t"):
            known[(row[0], row[1], int(row[2]))] = row[3]
    texts_lines = open(texts, encoding="utf-8", newline="").read().split("\n")
    if texts_lines and texts_lines[-1] == "":
        texts_lines.pop()

    failures, seen = [], set()
    total = 0
    for name, hp_dir, ref in cases:
        ref_special = run(ref("special", texts))
        ids_file = os.path.join(work, f"{name}.ids")
        with open(ids_file, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(x) + "\n" for x in ref_special)
        results = {
            "special": (run([headprune, "tokenize", hp_dir, "--file", texts]), ref_special),
            "plain": (run([headprune, "tokenize", hp_dir, "--file", texts, "--no-special-tokens"]), run(ref("plain", texts))),
            "decode": (run([headprune, "tokenize", hp_dir, "--file", ids_file, "--decode"]), run(ref("decode", ids_file))),
        }
        for mode, (ours, theirs) in results.items():
            if len(ours) != len(theirs):
                failures.append(f"{name} {mode}: {len(ours)} lines from headprune, {len(theirs)} from the reference")
                continue
            differ = 0
            for i, (a, b) in enumerate(zip(ours, theirs), start=1):
                key = (name, mode, i)
                if a == b:
                    if key in known:
                        failures.append(f"{name} {mode} line {i}: listed as a known difference but now equal")
                    continue
                differ += 1
                seen.add(key)
                if key not in known:
                    failures.append(f"{name} {mode} line {i}: text {texts_lines[i - 1]!r}\n  headprune {a}\n  reference {b}")
            total += len(ours)
            print(f"{name:13s} {mode:8s} {len(ours)} lines, {len(ours) - differ} equal, {differ} known differences")
    if failures:
        print("\n".join(failures))
        print(f"tokenizer clients: {len(failures)} problems")
        sys.exit(1)
    print(f"tokenizer clients OK ({total} comparisons)")


if __name__ == "__main__":
    main()
