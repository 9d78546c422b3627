"""Every job's keyword signature against the option tables its request is read with (issue 80).

The library reads a job's options from option tables (util/options.h); the Python package restates
them as keyword arguments by hand, in headprune/__init__.py and again in its stub __init__.pyi. This
holds both against the tables the extension reports (_C.option_keys): a key added to a table and not
to Python, or a keyword added to Python and to no table, fails here. The maps below are the one
place a keyword differs from its key (RENAMES), is no table's (the model, the data, the runtime, the
request's plumbing: OWN) or is deliberately left out of Python (ABSENT, with why)."""
import ast
import inspect
from typing import Dict, List, Set

import pytest

from conftest import REPO

import headprune  # noqa: E402  (conftest put HEADPRUNE_PYTHONPATH first on sys.path)
from headprune import _headprune as _C  # noqa: E402

STUB = REPO / "python" / "headprune" / "__init__.pyi"

RUNTIME = {"progress", "device", "dtype", "seed", "threads"}  # _runtime(): the runtime, not the request
FINETUNE = {  # _finetune(): finetune={...}
    "finetune_steps": "finetune.steps", "finetune_lr": "finetune.lr", "finetune_batch_tokens": "finetune.batch_tokens",
    "distill_weight": "finetune.distill_weight", "distill_temperature": "finetune.distill_temperature",
    "distill_hidden": "finetune.distill_hidden_weight",
}
PLAN_RENAMES = {"scores": "plan.scores_file"}  # scores= takes an Importance, a map or a file

# job -> the tables its keywords come from (the first one a key is looked up in unless RENAMES names
# another), the keywords that are no table's, the renames (keyword -> "table.key"), and the table
# keys Python lacks on purpose ("table.key" -> why).
JOBS: Dict[str, dict] = {
    "importance": dict(
        tables=["importance"],
        own={"model", "data", "out", "overwrite"} | RUNTIME,
        renames={},
        absent={"importance.pipeline": "several processes (the CLI's launch or torchrun), which a Python session is not"}),
    "plan": dict(
        tables=["plan", "plan_request"],
        own={"model", "data", "strategy", "budget_shape"} | RUNTIME,
        renames=PLAN_RENAMES,
        absent={}),
    "prune": dict(
        tables=["plan", "prune", "finetune"],
        own={"model", "data", "plan", "strategy", "budget_shape", "out", "overwrite"} | RUNTIME,
        renames={**PLAN_RENAMES, **FINETUNE},
        absent={}),
    "gates": dict(
        tables=["gates", "finetune", "gate"],
        own={"model", "data", "out", "overwrite"} | RUNTIME,
        renames={"method": "gate.method", **FINETUNE},
        absent={}),
    "bench": dict(
        tables=["bench"],
        own={"models", "precisions", "textbook", "json_path"} | RUNTIME,
        renames={"save_io": "bench.io_path", "profile": "bench.profile_path"},
        absent={}),
    "export": dict(
        tables=["export"],
        own={"model", "overwrite"},
        renames={"hf": "export.hf_dir", "native": "export.native_dir", "gguf": "export.gguf_path",
                 "onnx": "export.onnx_path"},
        absent={}),
    "train": dict(
        tables=["train"],
        own={"out", "overwrite"} | RUNTIME,
        renames={},
        absent={}),
}
# gates(): the gate table's keys beyond the named ones come as **gate_options, by their keys.
KEYWORD_TABLES = {"gates": "gate"}
# Nested objects given whole as one keyword: keyword -> the table its keys are read with.
NESTED = {"budget_shape": "budget_shape"}


def table_keys(part: str) -> Set[str]:
    return set(_C.option_keys(part))


def keywords(params: List[inspect.Parameter]) -> Set[str]:
    return {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"}


def expected_keys(job: str) -> Dict[str, str]:
    """Every "table.key" a job's keywords must cover -> the keyword expected for it (a key of two
    tables, neither renamed, is one keyword)."""
    spec = JOBS[job]
    renamed = {target: kw for kw, target in spec["renames"].items()}
    want: Dict[str, str] = {}
    for part in spec["tables"]:
        if KEYWORD_TABLES.get(job) == part:
            continue
        for key in sorted(table_keys(part)):
            target = f"{part}.{key}"
            if target not in spec["absent"]:
                want[target] = renamed.get(target, key)
    return want


def check(job: str, params: List[inspect.Parameter], where: str) -> None:
    spec = JOBS[job]
    given = keywords(params)
    want = expected_keys(job)
    missing = {target: kw for target, kw in want.items() if kw not in given}
    assert not missing, f"{where}: {job}() lacks keywords for table keys {missing} (add them, or list them in ABSENT)"
    known = set(want.values()) | spec["own"]
    for kw, target in spec["renames"].items():
        part, key = target.split(".")
        assert key in table_keys(part), f"RENAMES: {job}'s {kw} -> {target}, which table {part} no longer has"
        known.add(kw)
    extra = given - known
    assert not extra, f"{where}: {job}() has keywords {sorted(extra)} that no table of {spec['tables']} has"
    for target in spec["absent"]:
        part, key = target.split(".")
        assert key in table_keys(part), f"ABSENT: {target} is no longer a key of table {part}"
    if job in KEYWORD_TABLES:
        assert any(p.kind == p.VAR_KEYWORD for p in params), f"{where}: {job}() takes its gate options as **kwargs"


def stub_params(name: str, cls: str = "") -> List[inspect.Parameter]:
    """A function's parameters as __init__.pyi declares them."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    body = tree.body
    if cls:
        body = next(n.body for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    a = fn.args
    P = inspect.Parameter
    params = [P(x.arg, P.POSITIONAL_OR_KEYWORD) for x in a.posonlyargs + a.args]
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [P(x.arg, P.KEYWORD_ONLY) for x in a.kwonlyargs]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return params


@pytest.mark.parametrize("job", sorted(JOBS))
def test_keywords_match_the_option_tables(job):
    check(job, list(inspect.signature(getattr(headprune, job)).parameters.values()), "headprune/__init__.py")


@pytest.mark.parametrize("job", sorted(JOBS))
def test_the_stub_declares_the_same_keywords(job):
    runtime = list(inspect.signature(getattr(headprune, job)).parameters.values())
    stub = stub_params(job)
    check(job, stub, "__init__.pyi")
    assert [(p.name, p.kind) for p in stub] == [(p.name, p.kind) for p in runtime], \
        f"__init__.pyi declares {job}() otherwise than headprune/__init__.py"


def test_model_export_is_export_without_the_model():
    method = [p for p in inspect.signature(headprune.Model.export).parameters.values() if p.name != "self"]
    function = [p for p in inspect.signature(headprune.export).parameters.values() if p.name != "model"]
    assert [(p.name, p.kind) for p in method] == [(p.name, p.kind) for p in function]
    stub = [p for p in stub_params("export", "Model") if p.name != "self"]
    assert [(p.name, p.kind) for p in stub] == [(p.name, p.kind) for p in function]


def test_nested_keywords_and_every_table_are_known():
    for kw, part in NESTED.items():
        assert table_keys(part), f"{kw}: table {part} has no keys"
    for spec in JOBS.values():
        for part in spec["tables"]:
            assert table_keys(part), part
    with pytest.raises(ValueError, match="no option table 'nonesuch'"):
        _C.option_keys("nonesuch")
