# Type stubs of headprune's Python module (python/headprune/__init__.py): what editors complete.
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch

__version__: str

HeadKey = Tuple[str, int, int]
PathLike = Union[str, os.PathLike[str]]
Progress = Union[bool, None, Callable[[str, int, int, str, str], Any]]
Device = Union[str, torch.device, None]
Target = Union[None, int, float, str]

def set_log_level(level: str) -> None: ...
def blas_kernels() -> Dict[str, Any]: ...

class Model:
    @property
    def path(self) -> str: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def arch(self) -> str: ...
    @property
    def n_parameters(self) -> int: ...
    def describe(self) -> str: ...
    def heads(self) -> Dict[Tuple[str, int], List[int]]: ...
    def masked_heads(self) -> List[HeadKey]: ...
    def n_active_heads(self) -> int: ...
    def mask_heads(self, heads: Any, hf_type: Optional[str] = ...) -> Model: ...
    def unmask_heads(self) -> Model: ...
    def remove_heads(self, heads: Any = ..., hf_type: Optional[str] = ...) -> Model: ...
    def forward(self, input_ids: Any, attention_mask: Any = ..., *, segment_ids: Any = ...,
                decoder_input_ids: Any = ..., decoder_attention_mask: Any = ...,
                return_attention: bool = ...) -> Any: ...
    def __call__(self, input_ids: Any, attention_mask: Any = ..., *, segment_ids: Any = ...,
                 decoder_input_ids: Any = ..., decoder_attention_mask: Any = ...,
                 return_attention: bool = ...) -> Any: ...
    def state_dict(self) -> Dict[str, torch.Tensor]: ...
    def encode(self, texts: Union[str, Sequence[str]], add_special_tokens: bool = ...) -> Any: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def save(self, path: PathLike, overwrite: bool = ...) -> str: ...
    def checkpoint(self) -> str: ...
    def export(self, *, hf: Optional[PathLike] = ..., gguf: Optional[PathLike] = ..., onnx: Optional[PathLike] = ...,
               native: Optional[PathLike] = ..., hf_layout: Optional[str] = ..., gguf_dtype: Optional[str] = ...,
               gguf_output_dtype: Optional[str] = ..., onnx_attention: Optional[str] = ...,
               onnx_dir: Optional[PathLike] = ...,
               onnx_external_data: bool = ..., overwrite: bool = ...) -> str: ...

def load(path: PathLike, device: Union[str, torch.device] = ..., dtype: Optional[str] = ...) -> Model: ...
def info(model: Union[Model, PathLike]) -> Dict[str, Any]: ...

@dataclass
class ImportanceMap:
    method: str
    unit: str
    higher_is_important: bool
    normalization: str
    scores: Dict[HeadKey, float]
    columns: Dict[str, Dict[HeadKey, float]]
    info: Dict[str, Any]
    tensors: Dict[str, torch.Tensor]
    def tensor(self, attn_type: Optional[str] = ...) -> torch.Tensor: ...

class Importance:
    json: Dict[str, Any]
    config: Dict[str, Any]
    maps: List[ImportanceMap]
    def __getitem__(self, key: Union[str, Tuple[str, str]]) -> ImportanceMap: ...
    def __iter__(self) -> Iterator[ImportanceMap]: ...
    def __len__(self) -> int: ...
    def save(self, path: PathLike) -> str: ...

@dataclass
class Plan:
    heads: List[HeadKey]
    strategy: str
    info: Dict[str, Any]
    json: Dict[str, Any]

class Result:
    json: Dict[str, Any]
    text: str
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...

class PruneResult(Result):
    @property
    def plan(self) -> Plan: ...
    @property
    def model_path(self) -> str: ...
    def load(self, device: Union[str, torch.device] = ..., dtype: Optional[str] = ...) -> Model: ...

class GatesResult(PruneResult): ...
class BenchResult(Result): ...
class TrainResult(Result): ...

def importance(model: Union[Model, PathLike], data: Any = ..., *, methods: Sequence[str] = ...,
               units: Optional[Sequence[str]] = ..., normalize: Optional[str] = ..., granularity: Optional[str] = ...,
               metric: Optional[str] = ..., beam: Optional[int] = ..., bootstrap: Optional[int] = ...,
               alpha: Optional[float] = ..., special_ids: Optional[Sequence[int]] = ..., cost: bool = ...,
               layerwise: bool = ..., out: Optional[PathLike] = ..., overwrite: bool = ..., progress: Progress = ...,
               device: Device = ..., dtype: Optional[str] = ..., seed: int = ...,
               threads: Optional[int] = ...) -> Importance: ...

def plan(model: Union[Model, PathLike], data: Any = ..., *, strategy: Optional[str] = ..., method: Optional[str] = ...,
         target: Target = ..., per_layer: Optional[bool] = ..., unit: Optional[str] = ..., shape: Optional[str] = ...,
         min_per_layer: Optional[int] = ..., layer_strategy: Optional[str] = ..., step: Optional[float] = ...,
         min_ratio: Optional[float] = ..., heads: Any = ..., hf_type: Optional[str] = ..., layers: Any = ...,
         plan_file: Optional[PathLike] = ..., scores: Union[None, PathLike, Importance] = ...,
         budget: Optional[str] = ..., budget_shape: Optional[Mapping[str, Any]] = ..., metric: Optional[str] = ...,
         beam: Optional[int] = ..., progress: Progress = ..., device: Device = ..., dtype: Optional[str] = ...,
         seed: int = ..., threads: Optional[int] = ...) -> Plan: ...

def prune(model: Union[Model, PathLike], data: Any = ..., *, plan: Any = ..., strategy: Optional[str] = ...,
          method: Optional[str] = ..., target: Target = ..., per_layer: Optional[bool] = ..., unit: Optional[str] = ...,
          shape: Optional[str] = ..., min_per_layer: Optional[int] = ..., layer_strategy: Optional[str] = ..., step: Optional[float] = ...,
          min_ratio: Optional[float] = ..., heads: Any = ..., hf_type: Optional[str] = ..., layers: Any = ...,
          plan_file: Optional[PathLike] = ..., scores: Union[None, PathLike, Importance] = ...,
          budget: Optional[str] = ..., budget_shape: Optional[Mapping[str, Any]] = ..., mask_only: bool = ...,
          metric: Optional[str] = ..., beam: Optional[int] = ..., finetune_steps: Optional[int] = ...,
          finetune_lr: Optional[float] = ..., finetune_batch_tokens: Optional[int] = ...,
          distill_weight: Optional[float] = ..., distill_temperature: Optional[float] = ...,
          distill_hidden: Optional[float] = ..., out: Optional[PathLike] = ..., overwrite: bool = ...,
          progress: Progress = ..., device: Device = ..., dtype: Optional[str] = ..., seed: int = ...,
          threads: Optional[int] = ...) -> PruneResult: ...

def gates(model: Union[Model, PathLike], data: Any = ..., *, method: Optional[str] = ..., target: Target = ...,
          steps: Optional[int] = ..., lr: Optional[float] = ..., from_scratch: bool = ..., metric: Optional[str] = ...,
          beam: Optional[int] = ..., finetune_steps: Optional[int] = ..., finetune_lr: Optional[float] = ...,
          finetune_batch_tokens: Optional[int] = ..., distill_weight: Optional[float] = ...,
          distill_temperature: Optional[float] = ..., distill_hidden: Optional[float] = ...,
          out: Optional[PathLike] = ..., overwrite: bool = ..., progress: Progress = ..., device: Device = ...,
          dtype: Optional[str] = ..., seed: int = ..., threads: Optional[int] = ...,
          **gate_options: Any) -> GatesResult: ...

def bench(*models: Union[Model, PathLike], batch_sizes: Optional[Sequence[int]] = ...,
          seq_lens: Optional[Sequence[int]] = ..., warmup: Optional[int] = ..., reps: Optional[int] = ...,
          min_seconds: Optional[float] = ..., precisions: Optional[Sequence[str]] = ..., textbook: bool = ..., json_path: Optional[PathLike] = ...,
          train: bool = ..., gemm_probe: Optional[bool] = ..., generation: bool = ..., new_tokens: Optional[int] = ...,
          decode_after: Optional[int] = ..., save_io: Optional[PathLike] = ..., profile: Optional[PathLike] = ...,
          graphs: Optional[str] = ..., progress: Progress = ..., device: Device = ..., dtype: Optional[str] = ...,
          seed: int = ..., threads: Optional[int] = ...) -> BenchResult: ...

def export(model: Union[Model, PathLike], *, hf: Optional[PathLike] = ..., gguf: Optional[PathLike] = ...,
           onnx: Optional[PathLike] = ..., native: Optional[PathLike] = ..., hf_layout: Optional[str] = ...,
           gguf_dtype: Optional[str] = ..., gguf_output_dtype: Optional[str] = ...,
           onnx_attention: Optional[str] = ..., onnx_dir: Optional[PathLike] = ...,
           onnx_external_data: bool = ..., overwrite: bool = ...) -> str: ...

def init(config: Union[PathLike, Mapping[str, Any]], out: PathLike, *, overwrite: bool = ..., seed: int = ...,
         threads: Optional[int] = ...) -> str: ...

def train(family: Optional[str] = ..., *, config: Optional[PathLike] = ..., out: PathLike,
          max_steps: Optional[int] = ..., eval_every: Optional[int] = ..., keep_every: Optional[int] = ...,
          data_root: Optional[PathLike] = ..., resume: bool = ..., overwrite: bool = ..., progress: Progress = ...,
          device: Device = ..., dtype: Optional[str] = ..., seed: int = ...,
          threads: Optional[int] = ...) -> TrainResult: ...
