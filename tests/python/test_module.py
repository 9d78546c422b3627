"""The Python module against the CLI (issue 57's acceptance): it imports from the tree under test;
importance equals the CLI's JSON for the same seed; prune -> save -> reload gives the C++ path's
logits; errors carry the library's message; tensors from forward outlive the model; and every
```python block of docs/python.md (and of README.md's "Python" section) runs, in order."""
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from conftest import PYTHONPATH, REPO

import headprune  # noqa: E402  (conftest put HEADPRUNE_PYTHONPATH first on sys.path)


def batch(n: int = 4, length: int = 12, vocab: int = 50, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n, length), generator=g)
    ids[:, 0] = 1  # [CLS]
    return ids


def test_imports_from_the_tree_under_test(cli):
    assert Path(headprune.__file__).resolve().is_relative_to(PYTHONPATH)
    assert cli("--version").stdout.split() == ["headprune", headprune.__version__]
    for name in ("load", "importance", "plan", "prune", "gates", "bench", "export", "Model"):
        assert hasattr(headprune, name)


def test_model_config_heads_and_forward(tiny):
    m = headprune.load(tiny)
    assert m.arch == "encoder_classifier" and m.config["n_heads"] == 3
    assert m.heads() == {("encoder_self", 0): [0, 1, 2], ("encoder_self", 1): [0, 1, 2]}
    logits = m(batch())
    assert logits.shape == (4, 2) and logits.dtype == torch.float32
    ragged = m([[1, 5, 6, 2], [1, 7, 2]])  # lists: padded here, masked by the attention mask
    assert ragged.shape == (2, 2)
    m.mask_heads([("encoder_self", 0, 1)])
    assert m.masked_heads() == [("encoder_self", 0, 1)]
    masked = m(batch())
    m.remove_heads()  # the masked ones
    assert m.heads()[("encoder_self", 0)] == [0, 2]
    torch.testing.assert_close(m(batch()), masked, rtol=0, atol=1e-6)


def test_importance_equals_the_cli(tiny, cli):
    r = cli("--threads", "1", "--seed", "7", "importance", tiny, "--method", "gradient", "--method", "magnitude",
            "--synthetic", "32", "--json")
    want = json.loads(r.stdout)
    got = headprune.importance(tiny, {"synthetic_examples": 32}, methods=["gradient", "magnitude"], seed=7,
                               threads=1, progress=False)
    assert [m["method"] for m in got.json["maps"]] == [m["method"] for m in want["maps"]] == ["gradient", "magnitude"]
    for a, b in zip(got.json["maps"], want["maps"]):
        assert a["heads"] == b["heads"]  # every score, exactly
        assert a["normalization"] == b["normalization"]
    g = got["gradient"]
    for row in want["maps"][0]["heads"]:
        key = (row["attn_type"], row["layer"], row["head"])
        assert g.scores[key] == row["score"]
        assert g.tensor("encoder_self")[row["layer"], row["head"]].item() == row["score"]
    assert g.tensor().shape == (2, 3)


def test_importance_of_token_ids(tiny):
    m = headprune.load(tiny)
    ids = batch(8)
    imp = headprune.importance(m, {"input_ids": ids, "labels": torch.arange(8) % 2}, methods=["gradient", "magnitude"],
                               progress=False)
    assert set(imp["gradient"].scores) == {("encoder_self", l, h) for l in range(2) for h in range(3)}
    assert not torch.isnan(imp["magnitude"].tensor()).any()


def test_prune_save_reload_gives_the_cli_logits(tiny, cli, tmp_path):
    cli("--threads", "1", "prune", tiny, "--strategy", "random", "--target", "0.5", "--synthetic", "8",
        "--out", tmp_path / "cli")
    cli_plan = json.loads((tmp_path / "cli" / "plan.json").read_text())
    ref = headprune.load(tmp_path / "cli" / "model")  # what the C++ path saved

    plan = headprune.plan(tiny, {"synthetic_examples": 8}, strategy="random", target=0.5, threads=1, progress=False)
    assert [f"{t}:{l}:{h}" for t, l, h in plan.heads] == cli_plan["heads"]
    m = headprune.load(tiny).remove_heads(plan.heads)
    m.save(tmp_path / "py")
    reloaded = headprune.load(tmp_path / "py")
    ids = batch()
    assert reloaded.heads() == ref.heads()
    assert torch.equal(reloaded(ids), ref(ids))
    assert torch.equal(m(ids), ref(ids))

    res = headprune.prune(tiny, {"synthetic_examples": 8}, strategy="random", target=0.5, out=tmp_path / "job",
                          threads=1, progress=False)
    assert res.checks["reloaded_max_abs_diff"] == 0
    assert [f"{t}:{l}:{h}" for t, l, h in res.plan.heads] == cli_plan["heads"]
    assert torch.equal(res.load()(ids), ref(ids))


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert lines, stderr
    return lines[-1][len("error: "):]


def test_errors_carry_the_library_message(tmp_path, cli, tiny):
    missing = tmp_path / "no-such-model"
    r = cli("importance", missing, "--method", "magnitude", check=False)
    assert r.returncode == 1
    message = error_line(r.stderr)
    assert str(missing) in message  # the library names the path
    with pytest.raises((ValueError, RuntimeError)) as job:
        headprune.importance(missing, methods=["magnitude"], progress=False)
    assert str(job.value) == message
    with pytest.raises((ValueError, RuntimeError)) as opened:
        headprune.load(missing)
    assert str(opened.value) == message
    with pytest.raises(ValueError, match="nope"):
        headprune.importance(tiny, methods=["nope"], progress=False)
    with pytest.raises(ValueError, match="argument 'beam'"):
        headprune.importance(tiny, methods=["magnitude"], beam=0, progress=False)
    with pytest.raises(ValueError, match="'plan.budget_shape.table' is not valid: expected \"linear\" or \"measured\""):
        headprune.plan(tiny, {"synthetic_examples": 8}, budget="latency=0.9x", budget_shape={"table": "sideways"},
                       progress=False)
    # A job that writes into a temporary directory of its own (out=None) removes it when it fails.
    scratch = lambda: sorted(p.name for p in Path(tempfile.gettempdir()).glob("headprune-prune-*"))
    before = scratch()
    with pytest.raises(ValueError, match="argument 'beam'"):
        headprune.prune(tiny, {"synthetic_examples": 8}, strategy="random", target=0.5, beam=0, progress=False)
    assert scratch() == before


def test_options_have_one_range_for_the_cli_and_python(tmp_path, cli, tiny):
    """Each option table (util/options.h) bounds an option once: the command line and the module refuse
    the same value in the same words, before any work. Before the tables, Python refused a negative
    Hard Concrete temperature or fine-tuning rate only when the job reached it, in other words than
    the command line's, and took train(max_steps=0) and gates(lr=0) (the run config's), which the
    command line refuses."""
    out = str(tmp_path / "out")
    cases = [
        (["bench", tiny, "--reps", "0"], lambda: headprune.bench(tiny, reps=0, progress=False),
         "must be an integer >= 1, not"),
        (["gates", tiny, "--target", "0.5", "--temperature", "-1", "--out", out],
         lambda: headprune.gates(tiny, target=0.5, temperature=-1, out=out, progress=False),
         "must be a number > 0, not"),
        (["prune", tiny, "--strategy", "random", "--target", "0.5", "--finetune-lr", "-1", "--out", out],
         lambda: headprune.prune(tiny, strategy="random", target=0.5, finetune_lr=-1, out=out, progress=False),
         "must be a number > 0, not"),
        (["prune", tiny, "--budget", "latency=0.9x", "--budget-margin", "0.7", "--out", out],
         lambda: headprune.plan(tiny, {"synthetic_examples": 8}, budget="latency=0.9x", budget_shape={"margin": 0.7},
                                progress=False),
         "must be a number in [0, 0.5], not"),
        (["importance", tiny, "--method", "magnitude", "--calibration-length", "1"],
         lambda: headprune.importance(tiny, {"calibration_length": 1}, methods=["magnitude"], progress=False),
         "must be an integer in [2, 1048576], not"),
        (["importance", tiny, "--method", "ablation", "--alpha", "1"],
         lambda: headprune.importance(tiny, {"synthetic_examples": 8}, methods=["ablation"], alpha=1, progress=False),
         "must be a number in (0, 1), not"),
        (["gates", tiny, "--target", "0.5", "--lr", "0", "--out", out],
         lambda: headprune.gates(tiny, target=0.5, lr=0, out=out, progress=False), "must be a number > 0, not"),
        (["train", "--max-steps", "0", "--out", out], lambda: headprune.train(max_steps=0, out=out, progress=False),
         "must be an integer >= 1, not"),
        (["bench", tiny, "--graphs", "on"], lambda: headprune.bench(tiny, graphs="on", progress=False),
         "graph replay 'on': expected off, cuda or emulate"),
        (["export", tiny, "--gguf", os.path.join(out, "m.gguf"), "--dtype", "f8"],
         lambda: headprune.export(tiny, gguf=os.path.join(out, "m.gguf"), gguf_dtype="f8"),
         "GGUF dtype 'f8': expected f32, f16, bf16, q8_0 or q4_0"),
        (["export", tiny, "--gguf", os.path.join(out, "m.gguf"), "--gguf-output-dtype", "q6_k"],
         lambda: headprune.export(tiny, gguf=os.path.join(out, "m.gguf"), gguf_output_dtype="q6_k"),
         "GGUF dtype 'q6_k': expected f32, f16, bf16, q8_0 or q4_0"),
        (["gates", tiny, "--target", "0.5", "--shape", "uniform", "--method", "passconc", "--out", out],
         lambda: headprune.gates(tiny, target=0.5, shape="uniform", method="passconc", out=out, progress=False),
         "--shape uniform does not go with passconc"),
        # The strategy follows from the inputs in one place (settle_plan_strategy): a plan file and a
        # budget contradict each other for both front ends (Python used to drop the budget).
        (["prune", tiny, "--plan", "p.json", "--budget", "params=0.8x", "--out", out],
         lambda: headprune.plan(tiny, plan_file="p.json", budget="params=0.8x", progress=False),
         "--budget params=0.8x is the input of strategy budget, not of strategy plan (implied by --plan p.json"),
    ]
    for args, call, words in cases:
        r = cli(*args, check=False)
        assert r.returncode != 0 and words in r.stderr, (args, r.stderr)
        with pytest.raises(ValueError) as e:
            call()
        assert words in str(e.value), (args, str(e.value))
    assert not os.path.exists(out)


def storage_range(t: torch.Tensor):
    s = t.storage()
    return s.data_ptr(), s.data_ptr() + s.size() * s.element_size()


def test_forward_tensors_outlive_the_model(tiny):
    m = headprune.load(tiny)
    ids = batch()
    y = m(ids)
    want = y.clone()
    state = m.state_dict()
    name, weight = next((k, v) for k, v in state.items() if v.dim() == 2)
    weight_values = weight.clone()
    lo, hi = storage_range(y)
    for t in state.values():  # the result shares memory with no parameter or buffer
        a, b = storage_range(t)
        assert hi <= a or b <= lo, name
    assert y.storage_offset() == 0 and y.storage().size() == y.numel()  # no view into a larger buffer
    y2 = m(ids)  # a second call writes elsewhere
    del m, state
    gc.collect()
    assert torch.equal(y, want) and torch.equal(y2, want)
    assert torch.equal(weight, weight_values)  # a weight Python kept (mapped from its file) stays valid
    assert torch.isfinite((y * 2).sum())


def test_progress_callback_and_interrupt(tiny):
    seen = []
    headprune.importance(tiny, {"synthetic_examples": 16}, methods=["gradient"],
                         progress=lambda phase, done, total, unit, extra: seen.append((phase, done, total)))
    assert seen and seen[-1][1] == seen[-1][2]

    def stop(*args):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        headprune.importance(tiny, {"synthetic_examples": 16}, methods=["gradient"], progress=stop)


def kernels_in_new_python(code: str, **env_vars: str) -> dict:
    """headprune.blas_kernels() of a new interpreter that runs `code` (which imports headprune)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "HP_BLAS_"))}
    env.update(PYTHONPATH=str(PYTHONPATH), **env_vars)
    r = subprocess.run([sys.executable, "-c", code + "; import json; print(json.dumps(headprune.blas_kernels()))"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_chooses_the_openblas_kernels_the_cli_would():
    # HP_BLAS_TREAT_AS_DETECTED=1: a preset Prescott stands for OpenBLAS's own generic pick (as in the
    # e2e_blas_kernels test), so that the choice is tested on any CPU.
    generic = {"OPENBLAS_CORETYPE": "Prescott", "HP_BLAS_TREAT_AS_DETECTED": "1"}
    k = kernels_in_new_python("import headprune", **generic)
    if not k["openblas"]:
        pytest.skip(k["reason"])
    better = k["cpu_level"] in ("avx", "avx2", "avx512")
    if better:  # chosen in a child process, set before torch loaded OpenBLAS
        assert k["loaded"] == k["recommended"] != "Prescott", k
        assert k["chosen_from"] == "Prescott" and "chosen by headprune" in k["reason"], k
    else:
        assert k["loaded"] == "Prescott", k
    # torch first: too late to choose; the reason says so and how to do better.
    late = kernels_in_new_python("import torch, headprune", **generic)
    assert late["loaded"] == "Prescott" and late["chosen_from"] == "", late
    if better:
        assert "import headprune before torch" in late["reason"], late
    # Turned off.
    off = kernels_in_new_python("import headprune", **generic, HP_BLAS_AUTO="0")
    assert off["loaded"] == "Prescott", off
    if better:  # the user turned the choice off: no advice about import order then
        assert "HP_BLAS_AUTO=0 keeps headprune from choosing" in off["reason"], off
        assert "import headprune before torch" not in off["reason"], off
    # A user's own setting wins.
    if k["cpu_level"] in ("avx2", "avx512"):
        own = kernels_in_new_python("import headprune", OPENBLAS_CORETYPE="Haswell")
        assert own["loaded"] == "Haswell" and own["user_setting"] == "Haswell", own


def python_blocks(text: str):
    return [m.group(1) for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def run_blocks(blocks, where, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": "__docs__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{where}, python block {i + 1}", "exec"), scope)


def test_docs_python_md_runs(tmp_path, monkeypatch):
    blocks = python_blocks((REPO / "docs" / "python.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 5
    run_blocks(blocks, "docs/python.md", tmp_path, monkeypatch)


def test_readme_python_section_runs(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## [^\n]*\bPython\b.*?(?=^## |\Z)", readme, re.S | re.M)
    assert section, "README.md has no Python section (a '## ... Python' heading)"
    blocks = python_blocks(section.group(0))
    assert blocks, "README.md's Python section has no python block"
    run_blocks(blocks, "README.md", tmp_path, monkeypatch)


def test_threads_with_their_own_models_give_the_lone_run_logits_exactly(tmp_path):
    """Issue 78: the module releases the GIL, so several threads run forwards at once; each result equals
    the lone run's bit for bit (oneDNN's primitives and packed weights are shared between threads)."""
    import threading
    cfg = {"arch": "decoder_lm", "vocab_size": 300, "d_model": 256, "d_ff": 1024, "n_heads": 8,
           "n_decoder_layers": 2, "max_positions": 64, "norm": "pre", "activation": "gelu"}
    path = tmp_path / "lm"
    headprune.init(cfg, path, seed=3)
    torch.manual_seed(0)
    xs = [torch.randint(0, 300, (b, t)) for b, t in ((1, 7), (3, 33), (8, 64))]
    lone = [headprune.load(path)(x) for x in xs]
    bad = []

    def work(k):
        m = headprune.load(path)
        for i in range(15):
            j = (i + k) % len(xs)
            if not torch.equal(m(xs[j]), lone[j]):
                bad.append((k, i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, f"{len(bad)} of 45 concurrent forwards differ from the lone run"


def test_a_checkpoint_truncated_while_loaded_is_an_error_not_a_bus_error(tmp_path):
    """Issue 78: re-saving a checkpoint in place while a model reads it killed the interpreter with SIGBUS."""
    cfg = {"arch": "decoder_lm", "vocab_size": 300, "d_model": 256, "d_ff": 1024, "n_heads": 8,
           "n_decoder_layers": 2, "max_positions": 64, "norm": "pre", "activation": "gelu"}
    path = tmp_path / "lm"
    headprune.init(cfg, path, seed=3)
    m = headprune.load(path)
    os.truncate(path / "model.safetensors", 8192)
    with pytest.raises(RuntimeError, match=r"model\.safetensors: the file was truncated while headprune had it mapped"):
        m(torch.randint(0, 300, (1, 8)))
    del m
    gc.collect()


def test_ctrl_c_stops_a_long_job_within_a_layer_not_at_its_next_step(tmp_path):
    """Issue 78: Ctrl-C took 52-100 s to stop importance; the signal is now checked in every layer's forward.
    The job here (ablation over 2 x 8 heads on 512 samples, some 20 s a head) runs for minutes; it must stop within a few seconds."""
    cfg = {"arch": "decoder_lm", "vocab_size": 300, "d_model": 256, "d_ff": 1024, "n_heads": 8,
           "n_decoder_layers": 2, "max_positions": 64, "norm": "pre", "activation": "gelu"}
    path = tmp_path / "lm"
    headprune.init(cfg, path, seed=3)
    script = tmp_path / "job.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # a background process may start with it ignored
        "import headprune\n"
        "def progress(*a):\n"
        "    print('started', flush=True)\n"
        "try:\n"
        f"    headprune.importance({str(path)!r}, {{'calibration': 'random', 'calibration_samples': 512,\n"
        "                         'calibration_length': 64}, methods=['ablation'], progress=progress)\n"
        "    print('finished')\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(PYTHONPATH))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "started"
    import time
    t0 = time.monotonic()
    p.send_signal(2)
    out, _ = p.communicate(timeout=60)
    took = time.monotonic() - t0
    assert "interrupted" in out and "finished" not in out, out
    assert took < 10, f"Ctrl-C took {took:.1f} s to stop the job"


def test_forward_arguments_are_checked_at_the_boundary_naming_the_argument(tiny):
    """Issue 78: an id past the vocabulary was a bare IndexError; float ids were truncated (1.5 -> 1)."""
    m = headprune.load(tiny)  # vocabulary 50, 2 segments
    ok = torch.tensor([[3, 4, 5]])
    cases = [
        (dict(input_ids=torch.tensor([[3, 50]])), r"input_ids: 50 is outside the model's vocabulary \[0, 50\)"),
        (dict(input_ids=torch.tensor([[3, -1]])), r"input_ids: -1 is outside"),
        (dict(input_ids=torch.tensor([[1.5, 2.0]])), r"input_ids: expected integers, got a torch.float32 tensor"),
        (dict(input_ids=[[1.5, 2]]), r"input_ids: expected integer token ids, got 1.5"),
        (dict(input_ids=torch.zeros(1, 2, 3, dtype=torch.long)), r"input_ids: expected a \[batch, length\] tensor, got shape \[1, 2, 3\]"),
        (dict(input_ids=ok, attention_mask=torch.ones(1, 2, dtype=torch.long)), r"attention_mask: shape \[1, 2\] differs from input_ids's \[1, 3\]"),
        (dict(input_ids=ok, attention_mask=torch.tensor([[1, 2, 1]])), r"attention_mask: 2 is outside \{0, 1\}"),
        (dict(input_ids=ok, segment_ids=torch.tensor([[0, 1, 2]])), r"segment_ids: 2 is outside the model's segments \[0, 2\)"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            m(**kwargs)
    assert m(ok).shape == (1, 2)


def test_export_writes_an_onnx_folder_with_a_key_value_cache(tmp_path):
    """export(onnx_dir=...): the transformers.js / optimum folder of a decoder, its weights outside on request
    (the files' contents are checked against ONNX Runtime and transformers.js by tests/e2e/onnx.sh)."""
    from conftest import FIXTURES
    m = headprune.load(FIXTURES / "hf" / "llama_gqa")
    m.mask_heads([("decoder_self", 1, 2), ("decoder_self", 1, 3)])  # layer 1 loses its key/value group 1
    line = m.export(onnx_dir=tmp_path / "kv", onnx_external_data=True)
    assert "onnx folder, llama" in line and "key/value cache in 2 layers" in line and "model.onnx_data" in line
    assert sorted(p.name for p in (tmp_path / "kv").iterdir()) == [".headprune-output", "config.json",
                                                                    "generation_config.json", "onnx"]
    onnx = (tmp_path / "kv" / "onnx" / "model.onnx").read_bytes()
    for name in (b"past_key_values.0.key", b"past_key_values.1.value", b"present.1.key", b"position_ids"):
        assert name in onnx
    assert (tmp_path / "kv" / "onnx" / "model.onnx_data").stat().st_size > len(onnx)
    line = headprune.export(FIXTURES / "hf" / "bert", onnx_dir=tmp_path / "bert")  # a classifier: no cache
    assert "onnx folder, bert" in line and "key/value cache" not in line
    assert not (tmp_path / "bert" / "onnx" / "model.onnx_data").exists()
    with pytest.raises(ValueError, match="--onnx-external-data is for --onnx FILE or --onnx-dir DIR"):
        headprune.export(FIXTURES / "hf" / "bert", native=tmp_path / "n", onnx_external_data=True)
