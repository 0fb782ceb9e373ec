"""One export per model part (llm, flow, vocoder): torch module → ONNX graphs, one interface (`Part`).

A part turns its checkpoint's state dict into an export-friendly torch module (`load_module`, refusing a
state dict that does not fit the config with an ExportError) and that module into its ONNX graphs
(`export_graphs`, named as function.cosyvoice.contract names them); each also quantises its graphs
(`QuantizablePart`), a part that calibrates on the model's own mels taking them from `Samples`. export.build
drives every part through these, with no branch per part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import onnx
    import torch

    from export.graphs.samples import Samples

ConfigT = TypeVar("ConfigT", contravariant=True)
ModuleT = TypeVar("ModuleT")


class Part(Protocol[ConfigT, ModuleT]):
    def load_module(self, state_dict: dict[str, torch.Tensor], config: ConfigT) -> ModuleT: ...

    def export_graphs(self, module: ModuleT, config: ConfigT) -> dict[str, onnx.ModelProto]: ...


class QuantizablePart(Part[ConfigT, ModuleT], Protocol):
    """A part whose graphs can be quantised (llm, flow, hift), and that measures what that costs."""

    def quantize_graphs(
        self, graphs: dict[str, onnx.ModelProto], mode: str, samples: Samples
    ) -> dict[str, onnx.ModelProto]: ...

    def quality_report(
        self,
        fp32_graphs: dict[str, onnx.ModelProto],
        quant_graphs: dict[str, onnx.ModelProto],
        config: ConfigT,
        samples: Samples,
    ) -> dict: ...


__all__ = ["ConfigT", "ModuleT", "Part", "QuantizablePart"]
