"""One export per model part (llm, flow, hift): each module has the same small interface, `Part`.

A part turns its checkpoint's state dict into an export-friendly torch module (`load_module`, refusing a
state dict that does not fit the config with an ExportError) and that module into its ONNX graphs
(`export_graphs`, named as function.contract names them). export.build drives every part through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import onnx
    import torch

ConfigT = TypeVar("ConfigT", contravariant=True)
ModuleT = TypeVar("ModuleT")


class Part(Protocol[ConfigT, ModuleT]):
    def load_module(self, state_dict: dict[str, torch.Tensor], config: ConfigT) -> ModuleT: ...

    def export_graphs(self, module: ModuleT, config: ConfigT) -> dict[str, onnx.ModelProto]: ...


__all__ = ["ConfigT", "ModuleT", "Part"]
