"""headprune from Python: the C++ library's model and jobs as a module (docs/python.md).

Thin bindings. Every job function fills one of the library's request structs (the fields the
command line fills from its options; keyword arguments left as None keep the library's defaults),
calls that one job and returns its result: the JSON the CLI writes, as attributes, with tensors
where the library has tensors. Errors are the library's exceptions with the library's message
(std::invalid_argument -> ValueError, std::runtime_error -> RuntimeError).

    import headprune
    model = headprune.load("runs/demo/encoder_classifier/train/best")
    imp = headprune.importance(model, methods=["gradient", "magnitude"])
    res = headprune.prune(model, strategy="score", method="gradient", target=0.5, out="runs/pruned")
    pruned = res.load()
"""
from __future__ import annotations

import contextlib
import json
import logging
import numbers
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _blas


def _choose_blas_kernels() -> None:
    """OpenBLAS reads OPENBLAS_CORETYPE once, when it loads (with torch, next). On a CPU it does not
    know it picks slow generic kernels; the CLI's launcher then starts its program with better ones,
    and this does the same for this process (util/blas.h): the choice is made in a child process and
    set here before torch loads OpenBLAS. A user's own OPENBLAS_CORETYPE wins; HP_BLAS_AUTO=0 turns
    it off; nothing can be chosen once torch was imported (blas_kernels() then says what runs)."""
    for name, value in _blas.choice_for_later_load().items():
        os.environ[name] = value


_choose_blas_kernels()

import torch  # noqa: E402  (first of the two: the extension's tensor conversions need torch's Python types)

from . import _headprune as _C  # noqa: E402

__version__: str = _C.version

__all__ = [
    "Model", "load", "info", "init", "train", "importance", "plan", "prune", "gates", "bench", "export",
    "Importance", "ImportanceMap", "Plan", "Result", "PruneResult", "GatesResult", "BenchResult", "TrainResult",
    "set_log_level", "blas_kernels", "__version__",
]

_log = logging.getLogger("headprune")

HeadKey = Tuple[str, int, int]  # (attention type, layer, original head id)
PathLike = Union[str, "os.PathLike[str]"]
Progress = Union[bool, None, Callable[[str, int, int, str, str], Any]]


def blas_kernels() -> Dict[str, Any]:
    """Which OpenBLAS kernels this process runs and why: openblas, loaded (e.g. "SkylakeX"),
    cpu_level, recommended, user_setting, chosen_from (the set OpenBLAS had picked, when headprune
    chose another) and reason, the sentence the CLI's [blas] log line and bench environments give."""
    return dict(_blas.kernels())


def set_log_level(level: str) -> None:
    """The library's own log lines on stderr: "error", "warn", "info" (the CLI's default) or "debug"."""
    _C.set_log_level(level)


# ---- progress, runtime, requests ---------------------------------------------------------------

class _Bars:
    """One tqdm bar per phase of a job, as the CLI draws one bar per phase on stderr."""

    def __init__(self, tqdm: Any) -> None:
        self._tqdm = tqdm
        self._phase: Optional[str] = None
        self._bar: Any = None

    def __call__(self, phase: str, done: int, total: int, unit: str, extra: str) -> None:
        if phase != self._phase or self._bar is None:
            self.close()
            self._bar = self._tqdm(total=total, desc=phase, unit=unit, leave=False)
            self._phase = phase
        self._bar.update(done - self._bar.n)
        if extra:
            self._bar.set_postfix_str(extra, refresh=False)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar, self._phase = None, None


def _progress(progress: Progress) -> Any:
    if progress is None or progress is False:
        return None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return None
        return _Bars(tqdm)
    if callable(progress):
        return progress
    raise TypeError("progress must be True (a tqdm bar when tqdm is installed), False/None or a callable "
                    "(phase, done, total, unit, extra)")


def _note(tag: str, line: str) -> None:
    _log.info("[%s] %s", tag, line)


def _run(fn: Callable[..., Any], *args: Any, progress: Progress = True) -> Any:
    """Calls a job with the progress callable and the note logger; Ctrl-C raises KeyboardInterrupt at
    the job's next step."""
    cb = _progress(progress)
    try:
        return fn(*args, cb, _note)
    finally:
        if isinstance(cb, _Bars):
            cb.close()


def _runtime(device: Any, dtype: Optional[str], seed: int, threads: Optional[int], model: Any = None) -> str:
    rt: Dict[str, Any] = {"seed": int(seed)}
    if isinstance(model, Model):
        device = model._device if device is None else device
        dtype = model._dtype if dtype is None else dtype
    if device is not None:
        rt["device"] = str(device)
    if dtype is not None:
        rt["dtype"] = str(dtype)
    if threads is not None:
        rt["threads"] = int(threads)
    return json.dumps(rt)


def _fields(**kwargs: Any) -> Dict[str, Any]:
    """The arguments that were given (None: the library's default)."""
    return {k: v for k, v in kwargs.items() if v is not None}


def _target(t: Union[None, int, float, str]) -> Optional[str]:
    """A fraction (0.3), a percentage ("30%") or a count (12), as parse_target reads it."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, bool):
        raise TypeError("target must be a fraction, a count or a string, not a bool")
    return str(int(t)) if isinstance(t, int) else repr(float(t))


def _head_key(h: Any) -> str:
    if isinstance(h, str):
        return h
    t, layer, head = h
    return f"{t}:{int(layer)}:{int(head)}"


def _heads_spec(heads: Any) -> str:
    """Heads as `prune --heads` takes them: "TYPE:LAYER:HEAD,..." or HF's {"layer": [heads]} JSON.
    Accepts that string, HF's dict {layer: [heads]}, {(type, layer): [heads]} or (type, layer, head)
    tuples."""
    if isinstance(heads, str):
        return heads
    if isinstance(heads, Mapping):
        keys = list(heads)
        if all(isinstance(k, tuple) for k in keys):
            return ",".join(f"{k[0]}:{int(k[1])}:{int(h)}" for k in keys for h in heads[k])
        return json.dumps({str(int(k)): [int(h) for h in v] for k, v in heads.items()})
    return ",".join(_head_key(h) for h in heads)


def _parse_head(s: str) -> HeadKey:
    t, layer, head = s.split(":")
    return (t, int(layer), int(head))


# ---- the model ----------------------------------------------------------------------------------

class Model:
    """A model directory loaded by the library (a headprune checkpoint or an HF directory, with its
    tokenizer): its heads by original id, masks, physical head removal, forward passes, saving and
    export. Tensors it returns are the caller's: they stay valid after the model is gone."""

    def __init__(self, impl: Any, device: str, dtype: Optional[str]) -> None:
        self._impl = impl
        self._device = device
        self._dtype = dtype
        self._config: Optional[Dict[str, Any]] = None
        self._saved: Optional[str] = impl.dir  # a directory that holds exactly these weights
        self._scratch: Optional[tempfile.TemporaryDirectory] = None
        self._version = 0

    # -- what it is
    @property
    def path(self) -> str:
        """The directory the model was loaded from."""
        return self._impl.dir

    @property
    def device(self) -> torch.device:
        return torch.device(self._impl.device)

    @property
    def config(self) -> Dict[str, Any]:
        """The model's config.json (ModelConfig::to_json), kept heads included."""
        if self._config is None:
            self._config = json.loads(self._impl.config_json())
        return self._config

    @property
    def arch(self) -> str:
        return self.config["arch"]

    @property
    def n_parameters(self) -> int:
        return self._impl.n_parameters()

    def __repr__(self) -> str:
        return f"headprune.Model({self.path!r}, {self.arch}, {self.n_parameters} parameters)"

    def describe(self) -> str:
        """The summary `headprune info` prints."""
        return self._impl.describe()

    # -- heads
    def heads(self) -> Dict[Tuple[str, int], List[int]]:
        """Kept heads by original id per (attention type, layer); a removed head is absent."""
        return {(t, layer): list(hs) for t, layer, hs in self._impl.heads()}

    def masked_heads(self) -> List[HeadKey]:
        return [tuple(h) for h in self._impl.masked_heads()]  # type: ignore[misc]

    def n_active_heads(self) -> int:
        return self._impl.n_active_heads()

    def _changed(self) -> None:
        self._config = None
        self._saved = None
        self._version += 1

    def mask_heads(self, heads: Any, hf_type: Optional[str] = None) -> "Model":
        """Masks heads (their contribution becomes exactly 0): (type, layer, head) tuples,
        "TYPE:LAYER:HEAD" strings, {(type, layer): [heads]} or HF's {layer: [heads]} (of hf_type,
        default the model's first attention type)."""
        self._impl.mask_heads(_heads_spec(heads), hf_type or "")
        self._changed()
        return self

    def unmask_heads(self) -> "Model":
        self._impl.unmask_all()
        self._changed()
        return self

    def remove_heads(self, heads: Any = None, hf_type: Optional[str] = None) -> "Model":
        """Removes heads physically (the model gets smaller); None removes the masked heads. Heads are
        named as for mask_heads, by original id."""
        spec = "" if heads is None else _heads_spec(heads)
        if heads is not None and not spec:
            return self
        self._impl.remove_heads(spec, hf_type or "")
        self._changed()
        return self

    # -- tensors
    def forward(self, input_ids: Any, attention_mask: Any = None, *, segment_ids: Any = None,
                decoder_input_ids: Any = None, decoder_attention_mask: Any = None,
                return_attention: bool = False) -> Any:
        """Logits of a batch ([B, n_classes] or [B, T, V]) without gradients, on the model's device.
        input_ids: a [B, T] (or [T]) tensor, or lists of token ids (ragged rows are padded here with the
        pad id, and the attention mask made from their lengths). Without attention_mask every token of a
        tensor is real, as in HF: an id equal to the pad id (end-of-text, for most LLaMA-family models)
        is never taken for padding. With return_attention, (logits, {type: [per layer [B, H, T, S]]})."""
        pad = int(self.config.get("pad_id", 0))
        ids, mask = _as_ids(input_ids, pad)
        if attention_mask is not None:
            mask = _as_ids(attention_mask, 0, "attention_mask")[0]
        segs = None if segment_ids is None else _as_ids(segment_ids, 0, "segment_ids")[0]
        dec, dec_mask = (None, None) if decoder_input_ids is None else _as_ids(decoder_input_ids, pad, "decoder_input_ids")
        if decoder_attention_mask is not None:
            dec_mask = _as_ids(decoder_attention_mask, 0, "decoder_attention_mask")[0]
        logits, attention = self._impl.forward(ids, mask, segs, dec, dec_mask, bool(return_attention))
        return (logits, attention) if return_attention else logits

    __call__ = forward

    def state_dict(self) -> Dict[str, torch.Tensor]:
        """Parameters and head-mask buffers by module path, sharing storage with the model."""
        return self._impl.state_dict()

    # -- text
    def encode(self, texts: Union[str, Sequence[str]], add_special_tokens: bool = False) -> Any:
        """Token ids of a text (or a list of them) with the model's tokenizer."""
        if isinstance(texts, str):
            return self._impl.encode([texts], add_special_tokens)[0]
        return self._impl.encode(list(texts), add_special_tokens)

    def decode(self, ids: Sequence[int]) -> str:
        return self._impl.decode([int(i) for i in ids])

    # -- files
    def save(self, path: PathLike, overwrite: bool = False) -> str:
        """Writes a headprune checkpoint (config.json, model.safetensors, the tokenizer files) to a new
        directory; overwrite replaces an earlier checkpoint there (never the model's own directory)."""
        path = os.fspath(path)
        self._impl.save(path, bool(overwrite))
        self._saved = path
        return path

    def checkpoint(self) -> str:
        """A directory holding exactly these weights, for the jobs (which read checkpoints): the one it
        was loaded from or last saved to, else a copy saved to a temporary directory of its own."""
        if self._saved is None:
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="headprune-model-")
            path = os.path.join(self._scratch.name, f"v{self._version}")
            self._impl.save(path, False)
            self._saved = path
        return self._saved

    def export(self, *, hf: Optional[PathLike] = None, gguf: Optional[PathLike] = None,
               onnx: Optional[PathLike] = None, native: Optional[PathLike] = None, hf_layout: Optional[str] = None,
               gguf_dtype: Optional[str] = None, gguf_output_dtype: Optional[str] = None,
               onnx_attention: Optional[str] = None, onnx_dir: Optional[PathLike] = None,
               onnx_external_data: bool = False, overwrite: bool = False) -> str:
        """headprune export: see headprune.export."""
        return export(self, hf=hf, gguf=gguf, onnx=onnx, native=native, hf_layout=hf_layout, gguf_dtype=gguf_dtype,
                      gguf_output_dtype=gguf_output_dtype, onnx_attention=onnx_attention, onnx_dir=onnx_dir, onnx_external_data=onnx_external_data,
                      overwrite=overwrite)


def _as_ids(x: Any, pad: int, name: str = "input_ids") -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """A [B, T] int64 tensor of x and, when x was ragged lists, the mask of its real tokens."""
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex():
            raise ValueError(f"{name}: expected integers, got a {x.dtype} tensor")
        t = x.to(torch.long)
        return (t.unsqueeze(0) if t.dim() == 1 else t), None
    rows = _rows_of(x, name)
    n = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), n), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, :len(r)] = 1
    return ids, mask


def load(path: PathLike, device: Union[str, torch.device] = "cpu", dtype: Optional[str] = None) -> Model:
    """Opens a headprune checkpoint or an HF directory (BERT, GPT-2, LLaMA family, MarianMT, T5) as the
    CLI's jobs do: weights mapped from the files, moved to `device`; dtype "fp32", "bf16" or "f16"
    converts (None: as stored)."""
    impl = _C.Model.open(os.fspath(path), str(device), dtype or "auto")
    return Model(impl, str(device), dtype)


def info(model: Union[Model, PathLike]) -> Dict[str, Any]:
    """headprune info --json: the config, n_parameters, heads_per_layer and masked_heads."""
    return json.loads(_C.info(_checkpoint(model)))


def _checkpoint(model: Union[Model, PathLike]) -> str:
    if isinstance(model, Model):
        return model.checkpoint()
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    raise TypeError(f"expected a headprune.Model or a model directory, not {type(model).__name__}")


def _as_model(model: Union[Model, PathLike], device: Any, dtype: Optional[str]) -> Model:
    return model if isinstance(model, Model) else load(model, device or "cpu", dtype)


# ---- data ---------------------------------------------------------------------------------------

_DATA_FIELDS = set(_C.option_keys("data"))  # DataSource's option table (jobs/job.h)


class _Data:
    """A job's `data` argument as the library's DataSource (jobs/job.h), or as token-id examples.

      None                      the built-in synthetic task, for the built-in families' own models only;
                                a model imported from HF or with a tokenizer needs data (or, knowingly,
                                {"synthetic_examples": N})
      a path                    a run config whose "data" section is used
      {"kind": ...}             a data section (written to a run config in a scratch directory)
      {"data": {...}, ...}      a whole run config (written likewise)
      {DataSource fields}       config, data_root, split, score_split, max_examples, synthetic_examples,
                                synthetic_train, calibration, calibration_length, calibration_samples
      [str, ...]                texts (decoder LMs: calibration blocks of the model's tokenizer)
      [(text, label), ...]      classification, also (text_a, text_b, label) (a TSV data section)
      [(source, target), ...]   translation (a parallel data section)
      token ids                 a [B, T] tensor, lists of ids, or {"input_ids", "attention_mask",
                                "labels", "segment_ids", "decoder_input_ids"}: importance only
    Files written here live as long as the call."""

    def __init__(self, data: Any, model: Any, device: Any, dtype: Optional[str]) -> None:
        self._scratch: Optional[tempfile.TemporaryDirectory] = None
        self.source: Dict[str, Any] = {}
        self.examples: Optional[List[Dict[str, Any]]] = None
        self._read(data, model, device, dtype)

    def __enter__(self) -> "_Data":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()

    def _file(self, name: str) -> str:
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="headprune-data-")
        return os.path.join(self._scratch.name, name)

    def _run_config(self, config: Mapping[str, Any]) -> None:
        path = self._file("run_config.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        self.source = {"config": path}

    def _read(self, data: Any, model: Any, device: Any, dtype: Optional[str]) -> None:
        if data is None:
            return
        if isinstance(data, (str, os.PathLike)):
            self.source = {"config": os.fspath(data)}
        elif isinstance(data, Mapping) and "input_ids" in data:
            self.examples = _examples(data)
        elif isinstance(data, Mapping) and "kind" in data:
            self._run_config({"data": dict(data)})
        elif isinstance(data, Mapping) and "data" in data:
            self._run_config(dict(data))
        elif isinstance(data, Mapping):
            unknown = set(data) - _DATA_FIELDS
            if unknown:
                raise ValueError(f"data: unknown field(s) {sorted(unknown)}; expected {sorted(_DATA_FIELDS)}")
            self.source = dict(data)
        elif isinstance(data, torch.Tensor):
            self.examples = _examples({"input_ids": data})
        elif isinstance(data, Sequence) and len(data) > 0:
            self._sequence(data, model, device, dtype)
        else:
            raise TypeError(f"data: expected None, a run config path, a dict, texts, pairs or token ids, "
                            f"not {type(data).__name__}")

    def _sequence(self, data: Sequence[Any], model: Any, device: Any, dtype: Optional[str]) -> None:
        first = data[0]
        if isinstance(first, str):
            self._texts([str(t) for t in data], _as_model(model, device, dtype))
        elif isinstance(first, (tuple, list)) and len(first) > 0 and isinstance(first[0], str):
            self._rows([tuple(r) for r in data], _as_model(model, device, dtype))
        elif isinstance(first, Mapping):
            self.examples = [dict(e) for e in data]
        else:
            self.examples = _examples({"input_ids": data})

    def _texts(self, texts: List[str], model: Model) -> None:
        if model.arch != "decoder_lm":
            raise ValueError(f"data: plain texts are language-modelling text for decoder LMs; this model is an "
                             f"{model.arch}: give (text, label) rows, (source, target) pairs or a run config")
        lines = [_one_line(t) for t in texts if t.strip()]
        total = sum(len(ids) + 1 for ids in model.encode(lines))  # each line and its eos, as calibration reads them
        length = min(128, int(model.config.get("max_positions", 128)), total)
        if length < 2:
            raise ValueError(f"data: the texts give {total} tokens, too few for one block")
        path = self._file("texts.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        self.source = {"calibration": path, "calibration_length": length, "calibration_samples": total // length}

    def _rows(self, rows: List[Tuple[Any, ...]], model: Model) -> None:
        arch = model.arch
        if arch == "encoder_decoder":
            src, tgt = self._file("source.txt"), self._file("target.txt")
            with open(src, "w", encoding="utf-8") as s, open(tgt, "w", encoding="utf-8") as t:
                for r in rows:
                    if len(r) != 2:
                        raise ValueError("data: translation rows are (source, target) pairs")
                    s.write(_one_line(str(r[0])) + "\n")
                    t.write(_one_line(str(r[1])) + "\n")
            pair = [src, tgt]
            self._run_config({"data": {"kind": "parallel", "train": pair, "valid": pair, "test": pair}})
        elif arch == "encoder_classifier":
            self._run_config({"data": self._tsv(rows)})
        else:
            raise ValueError("data: a decoder LM reads plain texts, not rows")

    def _tsv(self, rows: List[Tuple[Any, ...]]) -> Dict[str, Any]:
        pairs = len(rows[0]) == 3
        path = self._file("examples.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("sentence\tsentence2\tlabel\n" if pairs else "sentence\tlabel\n")
            for r in rows:
                if len(r) != (3 if pairs else 2) or isinstance(r[-1], bool) or not isinstance(r[-1], int):
                    raise ValueError("data: classification rows are (text, label) or (text_a, text_b, label) with "
                                     "integer labels, all of one form")
                f.write("\t".join(_one_line(str(v)) for v in r[:-1]) + f"\t{r[-1]}\n")
        section = {"kind": "tsv", "train": path, "valid": path, "test": path, "text_a": "sentence", "label": "label"}
        if pairs:
            section["text_b"] = "sentence2"
        return section


def _one_line(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def _id(v: Any, name: str) -> int:
    """One token id: an integer (1.5 or True is an error, not id 1)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{name}: expected integer token ids, got {v!r}")
    return int(v)


def _rows_of(x: Any, name: str = "input_ids") -> List[List[int]]:
    """Rows of token ids from a [B, T] or [T] tensor, a list of ids, or a list of rows."""
    if isinstance(x, torch.Tensor):
        if x.is_floating_point() or x.is_complex():
            raise ValueError(f"{name}: expected integers, got a {x.dtype} tensor")
        x = x.unsqueeze(0) if x.dim() == 1 else x
        return [[int(v) for v in row] for row in x.tolist()]
    if len(x) == 0 or not isinstance(x[0], (list, tuple, torch.Tensor)):
        return [[_id(v, name) for v in x]]
    return [[_id(v, name) for v in (r.tolist() if isinstance(r, torch.Tensor) else r)] for r in x]


def _examples(batch: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Token ids as the library's examples (src, tgt, segments, label), padding dropped by the mask."""
    ids = _rows_of(batch["input_ids"])
    mask = _rows_of(batch["attention_mask"]) if batch.get("attention_mask") is not None else None
    segs = _rows_of(batch["segment_ids"]) if batch.get("segment_ids") is not None else None
    tgt = _rows_of(batch["decoder_input_ids"]) if batch.get("decoder_input_ids") is not None else None
    labels = batch.get("labels")
    if isinstance(labels, torch.Tensor):
        labels = labels.tolist()
    out = []
    for i, row in enumerate(ids):
        n = sum(mask[i]) if mask is not None else len(row)
        e: Dict[str, Any] = {"src": row[:n]}
        if segs is not None:
            e["segments"] = segs[i][:n]
        if tgt is not None:
            e["tgt"] = tgt[i]
        if labels is not None:
            e["label"] = int(labels[i])
        out.append(e)
    return out


def _check_examples(examples: List[Dict[str, Any]], arch: str) -> None:
    """What the family's loss needs of token-id examples (the scorers take the loss of each)."""
    if arch == "encoder_classifier" and any("label" not in e for e in examples):
        raise ValueError('data: token ids of a classifier need labels: {"input_ids": ..., "labels": [class per row]}')
    if arch == "encoder_decoder" and any("tgt" not in e for e in examples):
        raise ValueError('data: token ids of a translation model need targets: {"input_ids": ..., '
                         '"decoder_input_ids": [bos] target [eos] per row}')


# ---- importance ---------------------------------------------------------------------------------

@dataclass
class ImportanceMap:
    """One method's scores, keyed by original head id (or key/value head id for unit "kv_group")."""
    method: str
    unit: str
    higher_is_important: bool
    normalization: str
    scores: Dict[HeadKey, float]
    columns: Dict[str, Dict[HeadKey, float]]
    info: Dict[str, Any]
    tensors: Dict[str, torch.Tensor]  # per attention type: [layers, heads] float64, NaN where absent
    json: Dict[str, Any] = field(default_factory=dict)  # the map as importance.json holds it

    def tensor(self, attn_type: Optional[str] = None) -> torch.Tensor:
        """The [layers, heads] map of one attention type (optional when the model has one)."""
        if attn_type is None:
            if len(self.tensors) != 1:
                raise ValueError(f"the model has attention types {sorted(self.tensors)}: name one")
            return next(iter(self.tensors.values()))
        return self.tensors[attn_type]

    @staticmethod
    def _from(j: Mapping[str, Any], tensors: Dict[str, torch.Tensor]) -> "ImportanceMap":
        scores: Dict[HeadKey, float] = {}
        columns: Dict[str, Dict[HeadKey, float]] = {}
        for row in j["heads"]:
            key = (row["attn_type"], int(row["layer"]), int(row["head"]))
            scores[key] = row["score"]
            for name, v in row.items():
                if name not in ("attn_type", "layer", "head", "score"):
                    columns.setdefault(name, {})[key] = v
        return ImportanceMap(j["method"], j.get("unit", "head"), j.get("higher_is_important", True),
                             j.get("normalization", "none"), scores, columns, j.get("info", {}), tensors, dict(j))


class Importance:
    """run_importance's result: the maps (one per method and unit), the importance.json document
    (`json`) and the model's config. imp["gradient"] is the gradient map of query heads;
    imp["gradient", "kv_group"] that of key/value groups."""

    def __init__(self, j: Dict[str, Any], tensors: List[Dict[str, torch.Tensor]]) -> None:
        self.json = j
        self.config: Dict[str, Any] = j.get("config", {})
        self.maps = [ImportanceMap._from(m, t) for m, t in zip(j["maps"], tensors)]

    def __getitem__(self, key: Union[str, Tuple[str, str]]) -> ImportanceMap:
        method, unit = (key, "head") if isinstance(key, str) else key
        for m in self.maps:
            if m.method == method and m.unit == unit:
                return m
        raise KeyError(f"no {method} map of unit {unit} (have {[(m.method, m.unit) for m in self.maps]})")

    def __iter__(self) -> Iterator[ImportanceMap]:
        return iter(self.maps)

    def __len__(self) -> int:
        return len(self.maps)

    def save(self, path: PathLike) -> str:
        """Writes the importance.json document (what `prune --scores` and `plot` read)."""
        path = os.fspath(path)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.json, f, indent=2)
        return path

    def __repr__(self) -> str:
        return f"headprune.Importance({[(m.method, m.unit) for m in self.maps]})"


def importance(model: Union[Model, PathLike], data: Any = None, *, methods: Sequence[str] = ("gradient",),
               units: Optional[Sequence[str]] = None, normalize: Optional[str] = None,
               granularity: Optional[str] = None, metric: Optional[str] = None, beam: Optional[int] = None,
               bootstrap: Optional[int] = None, alpha: Optional[float] = None,
               special_ids: Optional[Sequence[int]] = None, cost: bool = False, layerwise: bool = False,
               out: Optional[PathLike] = None, overwrite: bool = False, progress: Progress = True,
               device: Any = None, dtype: Optional[str] = None, seed: int = 1234,
               threads: Optional[int] = None) -> Importance:
    """headprune importance: scores every head with each method (gradient, ablation, all_but_one,
    confidence, entropy, magnitude, output_norm, lrp, random, activation, taylor, layer_drop, or
    "all") on the data; `out` also writes importance.json and importance.csv there."""
    req = _fields(methods=list(methods), units=None if units is None else list(units), normalize=normalize,
                  granularity=granularity, metric=metric, beam=beam, bootstrap=bootstrap, alpha=alpha,
                  special_ids=None if special_ids is None else [int(i) for i in special_ids],
                  cost=cost, layerwise=layerwise, overwrite=overwrite,
                  out_dir=None if out is None else os.fspath(out))
    rt = _runtime(device, dtype, seed, threads, model)
    with _Data(data, model, device, dtype) as d:
        if d.examples is not None:
            m = _as_model(model, device, dtype)
            _check_examples(d.examples, m.arch)
            j, tensors = _run(lambda *cb: _C.importance_examples(m._impl, json.dumps(d.examples), json.dumps(req),
                                                                  rt, *cb), progress=progress)
        else:
            req.update(checkpoint=_checkpoint(model), data=d.source)
            j, tensors = _run(_C.run_importance, json.dumps(req), rt, progress=progress)
    return Importance(json.loads(j), tensors)


# ---- plans and pruning --------------------------------------------------------------------------

@dataclass
class Plan:
    """A pruning plan: the heads to prune by original id, how they were chosen (plan.json)."""
    heads: List[HeadKey]
    strategy: str
    info: Dict[str, Any]
    json: Dict[str, Any]

    @staticmethod
    def _from(j: Dict[str, Any]) -> "Plan":
        return Plan([_parse_head(h) for h in j["heads"]], j.get("strategy", ""), j.get("info", {}), j)


def _plan_fields(strategy: Optional[str], method: Optional[str], target: Any, per_layer: Optional[bool],
                 unit: Optional[str], shape: Optional[str], min_per_layer: Optional[int], layer_strategy: Optional[str],
                 step: Optional[float], min_ratio: Optional[float], heads: Any, hf_type: Optional[str],
                 layers: Any, plan_file: Optional[PathLike], scores: Any, budget: Optional[str],
                 budget_shape: Optional[Mapping[str, Any]], scratch: "_Data") -> Dict[str, Any]:
    """PlanSpec's fields (prune/strategy.h) from keyword arguments."""
    if isinstance(scores, ImportanceMap):  # one map, e.g. imp["gradient"]: its method unless one is named
        method = method or scores.method
        path = scratch._file("importance.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"maps": [scores.json]}, f)
        scores = path
    elif isinstance(scores, Importance):
        path = scratch._file("importance.json")
        scores = scores.save(path)
    elif scores is not None and not isinstance(scores, (str, bytes, os.PathLike)):
        raise TypeError(f"scores: expected an Importance (headprune.importance's result), one of its maps "
                        f"(imp['gradient']) or the path of an importance.json, got {type(scores).__name__}")
    if layers is not None and not isinstance(layers, str):
        layers = ",".join(f"{t}:{int(layer)}" for t, layer in layers)
    spec = _fields(strategy=strategy, method=method, target=_target(target), per_layer=per_layer, unit=unit,
                   shape=shape, min_per_layer=min_per_layer, layer_strategy=layer_strategy, step=step, min_ratio=min_ratio,
                   heads=None if heads is None else _heads_spec(heads), hf_type=hf_type, layers=layers,
                   plan_file=None if plan_file is None else os.fspath(plan_file),
                   scores_file=None if scores is None else os.fspath(scores), budget=budget,
                   budget_shape=None if budget_shape is None else dict(budget_shape))
    return spec  # the strategy, when not named, follows from these in the library (settle_plan_strategy)


def plan(model: Union[Model, PathLike], data: Any = None, *, strategy: Optional[str] = None,
         method: Optional[str] = None, target: Union[None, int, float, str] = None, per_layer: Optional[bool] = None,
         unit: Optional[str] = None, shape: Optional[str] = None, min_per_layer: Optional[int] = None,
         layer_strategy: Optional[str] = None, step: Optional[float] = None, min_ratio: Optional[float] = None,
         heads: Any = None,
         hf_type: Optional[str] = None, layers: Any = None, plan_file: Optional[PathLike] = None, scores: Any = None,
         budget: Optional[str] = None, budget_shape: Optional[Mapping[str, Any]] = None,
         metric: Optional[str] = None, beam: Optional[int] = None, progress: Progress = True, device: Any = None,
         dtype: Optional[str] = None, seed: int = 1234, threads: Optional[int] = None) -> Plan:
    """The plan `headprune prune` would apply with these settings (strategy score, iterative, random,
    layers, manual, plan or budget), without applying it. `scores`: an importance.json or an
    Importance to rank by instead of scoring again."""
    rt = _runtime(device, dtype, seed, threads, model)
    with _Data(data, model, device, dtype) as d:
        if d.examples is not None:
            raise TypeError("headprune.plan: token ids are for importance only; give a run config, texts, rows, "
                            "or score them with headprune.importance and pass scores=")
        spec = _plan_fields(strategy, method, target, per_layer, unit, shape, min_per_layer, layer_strategy, step,
                            min_ratio, heads, hf_type, layers, plan_file, scores, budget, budget_shape, d)
        req = _fields(checkpoint=_checkpoint(model), plan=spec, metric=metric, beam=beam, data=d.source)
        j = _run(_C.make_plan, json.dumps(req), rt, progress=progress)
    return Plan._from(json.loads(j))


class Result:
    """A job's result: its JSON (what the CLI writes) as items and attributes, and what the CLI prints
    as str()."""

    def __init__(self, j: Dict[str, Any], text: str = "") -> None:
        self.json = j
        self.text = text

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "json" not in self.__dict__:
            raise AttributeError(name)
        try:
            return self.__dict__["json"][name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __getitem__(self, key: str) -> Any:
        return self.json[key]

    def __str__(self) -> str:
        return self.text or json.dumps(self.json, indent=2)

    def __repr__(self) -> str:
        return f"headprune.{type(self).__name__}({sorted(self.json)})"


class PruneResult(Result):
    """run_prune's summary.json: plan, stages, sizes, checks; the pruned model is in model_path."""

    @property
    def plan(self) -> Plan:
        return Plan._from(self.json["plan"])

    @property
    def model_path(self) -> str:
        return self.json["model"]

    def load(self, device: Union[str, torch.device] = "cpu", dtype: Optional[str] = None) -> Model:
        return load(self.model_path, device, dtype)


class GatesResult(PruneResult):
    """run_gates' gates.json: options, result (kept, closed, reached_target), stages, log, checks."""

    @property
    def plan(self) -> Plan:
        """The plan the gates gave (OUT/plan.json)."""
        with open(os.path.join(os.path.dirname(self.model_path), "plan.json"), encoding="utf-8") as f:
            return Plan._from(json.load(f))


class BenchResult(Result):
    """run_bench's records (one per model, precision and shape) and environment."""


class TrainResult(Result):
    """run_train's report: steps, losses, best metric, the best/ and last/ checkpoints, history."""


def _finetune(steps: Optional[int], lr: Optional[float], batch_tokens: Optional[int], distill_weight: Optional[float],
              distill_temperature: Optional[float], distill_hidden: Optional[float]) -> Dict[str, Any]:
    return _fields(steps=steps, lr=lr, batch_tokens=batch_tokens, distill_weight=distill_weight,
                   distill_temperature=distill_temperature, distill_hidden_weight=distill_hidden)


@contextlib.contextmanager
def _out_dir(out: Optional[PathLike], job: str) -> Iterator[str]:
    """The output directory, or a fresh one under the temporary directory: kept when the job succeeds
    (the result's model lives there), removed when it fails."""
    if out is not None:
        yield os.fspath(out)
        return
    parent = tempfile.mkdtemp(prefix=f"headprune-{job}-")
    try:
        yield os.path.join(parent, "out")
    except BaseException:
        shutil.rmtree(parent, ignore_errors=True)
        raise


def prune(model: Union[Model, PathLike], data: Any = None, *, plan: Any = None, strategy: Optional[str] = None,
          method: Optional[str] = None, target: Union[None, int, float, str] = None, per_layer: Optional[bool] = None,
          unit: Optional[str] = None, shape: Optional[str] = None, min_per_layer: Optional[int] = None,
          layer_strategy: Optional[str] = None, step: Optional[float] = None, min_ratio: Optional[float] = None,
          heads: Any = None,
          hf_type: Optional[str] = None, layers: Any = None, plan_file: Optional[PathLike] = None, scores: Any = None,
          budget: Optional[str] = None, budget_shape: Optional[Mapping[str, Any]] = None, mask_only: bool = False,
          metric: Optional[str] = None, beam: Optional[int] = None, finetune_steps: Optional[int] = None,
          finetune_lr: Optional[float] = None, finetune_batch_tokens: Optional[int] = None,
          distill_weight: Optional[float] = None, distill_temperature: Optional[float] = None,
          distill_hidden: Optional[float] = None, out: Optional[PathLike] = None, overwrite: bool = False,
          progress: Progress = True, device: Any = None, dtype: Optional[str] = None, seed: int = 1234,
          threads: Optional[int] = None) -> PruneResult:
    """headprune prune: plan (the strategy's settings as for headprune.plan, or `plan=` a Plan made
    earlier), mask, remove physically (unless mask_only), fine-tune (finetune_steps), evaluate every
    stage, save OUT/model, OUT/plan.json, OUT/summary.json (out None: a new temporary directory)."""
    rt = _runtime(device, dtype, seed, threads, model)
    with _Data(data, model, device, dtype) as d:
        if d.examples is not None:
            raise TypeError("headprune.prune: token ids are for importance only; give a run config, texts or rows")
        if isinstance(plan, Plan) or (isinstance(plan, Mapping) and "heads" in plan):
            given = plan.json if isinstance(plan, Plan) else dict(plan)  # a Plan, or a plan.json document
            spec: Dict[str, Any] = {"strategy": "given", "given": given}
        else:
            spec = _plan_fields(strategy, method, target, per_layer, unit, shape, min_per_layer, layer_strategy, step,
                                min_ratio, plan if heads is None else heads, hf_type, layers, plan_file, scores,
                                budget, budget_shape, d)
        with _out_dir(out, "prune") as where:
            req = _fields(checkpoint=_checkpoint(model), out_dir=where, overwrite=overwrite, plan=spec,
                          mask_only=mask_only, metric=metric, beam=beam, data=d.source,
                          finetune=_finetune(finetune_steps, finetune_lr, finetune_batch_tokens, distill_weight,
                                             distill_temperature, distill_hidden))
            j, text = _run(_C.run_prune, json.dumps(req), rt, progress=progress)
    return PruneResult(json.loads(j), text)


def gates(model: Union[Model, PathLike], data: Any = None, *, method: Optional[str] = None,
          target: Union[None, int, float, str] = None, steps: Optional[int] = None, lr: Optional[float] = None,
          from_scratch: bool = False, metric: Optional[str] = None, beam: Optional[int] = None,
          finetune_steps: Optional[int] = None, finetune_lr: Optional[float] = None,
          finetune_batch_tokens: Optional[int] = None, distill_weight: Optional[float] = None,
          distill_temperature: Optional[float] = None, distill_hidden: Optional[float] = None,
          out: Optional[PathLike] = None, overwrite: bool = False, progress: Progress = True, device: Any = None,
          dtype: Optional[str] = None, seed: int = 1234, threads: Optional[int] = None,
          **gate_options: Any) -> GatesResult:
    """headprune gates: learned gates (hard_concrete, pass, passconc, dsp, cofi) trained with the model
    to `target` heads pruned, then applied as prune applies a plan. gate_options are GateOptions'
    fields (the gate option table, prune/gates.h): <gate fields>. gate_distill_weight and
    gate_distill_hidden are also taken for distill_weight and distill_hidden_weight;
    distill_temperature is both distillations' temperature."""
    rt = _runtime(device, dtype, seed, threads, model)
    gate = dict(gate_options)
    if method is not None:
        gate["method"] = method
    for k in ("gate_distill_weight", "gate_distill_hidden"):
        if k in gate:
            gate["distill_weight" if k == "gate_distill_weight" else "distill_hidden_weight"] = gate.pop(k)
    with _Data(data, model, device, dtype) as d:
        if d.examples is not None:
            raise TypeError("headprune.gates: token ids are for importance only; give a run config, texts or rows")
        with _out_dir(out, "gates") as where:
            req = _fields(checkpoint=_checkpoint(model), out_dir=where, overwrite=overwrite, gate=gate,
                          target=_target(target), steps=steps, lr=lr, from_scratch=from_scratch, metric=metric,
                          beam=beam, data=d.source, finetune=_finetune(finetune_steps, finetune_lr,
                                                                       finetune_batch_tokens, distill_weight,
                                                                       distill_temperature, distill_hidden))
            j, text = _run(_C.run_gates, json.dumps(req), rt, progress=progress)
    res = GatesResult(json.loads(j), text)
    if not res.json["result"].get("reached_target", True):
        warnings.warn(f"gates: kept {len(res.json['result'].get('kept', []))} heads, not the target "
                      f"(results saved; train longer, allow extra_steps or raise coef)", RuntimeWarning)
    return res


if gates.__doc__:  # the gate keys from the table both front ends read, not a second list here
    gates.__doc__ = gates.__doc__.replace("<gate fields>", ", ".join(_C.option_keys("gate")))


def bench(*models: Union[Model, PathLike], batch_sizes: Optional[Sequence[int]] = None,
          seq_lens: Optional[Sequence[int]] = None, warmup: Optional[int] = None, reps: Optional[int] = None,
          min_seconds: Optional[float] = None, precisions: Optional[Sequence[str]] = None, textbook: bool = False, json_path: Optional[PathLike] = None,
          train: bool = False, gemm_probe: Optional[bool] = None, generation: bool = False,
          new_tokens: Optional[int] = None, decode_after: Optional[int] = None, save_io: Optional[PathLike] = None,
          profile: Optional[PathLike] = None, graphs: Optional[str] = None, progress: Progress = True,
          device: Any = None, dtype: Optional[str] = None, seed: int = 1234,
          threads: Optional[int] = None) -> BenchResult:
    """headprune bench: the models timed side by side (speedups against the first) over batch sizes
    and sequence lengths, at each precision (fp32, bf16, int8). graphs: "cuda" replays each model's
    forward pass (or decoding step) from a CUDA graph per shape; "emulate" the same buffers anywhere."""
    rt = _runtime(device, dtype, seed, threads, models[0] if models else None)
    req = _fields(checkpoints=[_checkpoint(m) for m in models],
                  precisions=None if precisions is None else list(precisions), textbook=textbook,
                  json_path=None if json_path is None else os.fspath(json_path),
                  batch_sizes=None if batch_sizes is None else [int(b) for b in batch_sizes],
                  seq_lens=None if seq_lens is None else [int(s) for s in seq_lens], warmup=warmup, reps=reps,
                  min_seconds=min_seconds, train=train, gemm_probe=gemm_probe, generation=generation, new_tokens=new_tokens,
                  decode_after=decode_after, io_path=None if save_io is None else os.fspath(save_io),
                  profile_path=None if profile is None else os.fspath(profile), graphs=graphs)
    j, text = _run(_C.run_bench, json.dumps(req), rt, progress=progress)
    return BenchResult(json.loads(j), text)


# ---- checkpoints --------------------------------------------------------------------------------

def export(model: Union[Model, PathLike], *, hf: Optional[PathLike] = None, gguf: Optional[PathLike] = None,
           onnx: Optional[PathLike] = None, native: Optional[PathLike] = None, hf_layout: Optional[str] = None,
           gguf_dtype: Optional[str] = None, gguf_output_dtype: Optional[str] = None,
           onnx_attention: Optional[str] = None, onnx_dir: Optional[PathLike] = None,
           onnx_external_data: bool = False, overwrite: bool = False) -> str:
    """headprune export: an HF directory (hf_layout auto, native, dense or pruned_heads), a GGUF file for
    llama.cpp (LLaMA family; gguf_dtype f32, f16, bf16, q8_0 or q4_0; gguf_output_dtype the output
    projection's, auto: f16 under q8_0, q8_0 under q4_0), an ONNX file (onnx_attention auto, fused or
    standard), an ONNX folder for transformers.js and optimum (onnx_dir: a decoder LM with a key/value cache;
    onnx_external_data puts the weights in model.onnx_data) and/or a headprune checkpoint. Returns one line per
    output written."""
    def path(p: Optional[PathLike]) -> Optional[str]:
        return None if p is None else os.fspath(p)
    req = _fields(checkpoint=_checkpoint(model), hf_dir=path(hf), native_dir=path(native), gguf_path=path(gguf),
                  onnx_path=path(onnx), hf_layout=hf_layout, gguf_dtype=gguf_dtype,
                  gguf_output_dtype=gguf_output_dtype, onnx_attention=onnx_attention,
                  onnx_dir=path(onnx_dir), onnx_external_data=onnx_external_data, overwrite=overwrite)
    return _C.run_export(json.dumps(req))


def init(config: Union[PathLike, Mapping[str, Any]], out: PathLike, *, overwrite: bool = False, seed: int = 1234,
         threads: Optional[int] = None) -> str:
    """headprune init: a randomly initialized checkpoint of a model config (a file, or the config as a
    dict), seeded. Returns the library's one-line description."""
    with _Data(None, None, None, None) as d:
        if isinstance(config, Mapping):
            path = d._file("model.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(dict(config), f)
            config = path
        req = {"config": os.fspath(config), "out_dir": os.fspath(out), "overwrite": bool(overwrite)}
        return _C.run_init(json.dumps(req), _runtime(None, None, seed, threads))


def train(family: Optional[str] = None, *, config: Optional[PathLike] = None, out: PathLike,
          max_steps: Optional[int] = None, eval_every: Optional[int] = None, keep_every: Optional[int] = None,
          data_root: Optional[PathLike] = None, resume: bool = False, overwrite: bool = False,
          progress: Progress = True, device: Any = None, dtype: Optional[str] = None, seed: int = 1234,
          threads: Optional[int] = None) -> TrainResult:
    """headprune train: a run config (config), or the built-in synthetic task of a family
    (encoder_classifier, decoder_lm, encoder_decoder); OUT/best, OUT/last, OUT/history.json."""
    req = _fields(family=family, config=None if config is None else os.fspath(config), out_dir=os.fspath(out),
                  max_steps=max_steps, eval_every=eval_every, keep_every=keep_every,
                  data_root=None if data_root is None else os.fspath(data_root), resume=resume, overwrite=overwrite)
    j = _run(_C.run_train, json.dumps(req), _runtime(device, dtype, seed, threads), progress=progress)
    return TrainResult(json.loads(j))
