"""Typed exporter errors: every refusal the exporter makes on purpose, each one line for the command.

`python -m export` reports an ExportError (or an OSError) as one line with exit status 2; anything else
is a bug and keeps its traceback. ExportError is a ValueError too: the inputs are what is wrong.
"""

from __future__ import annotations


class ExportError(ValueError):
    """Base of the exporter's refusals."""


class ConfigError(ExportError):
    """The model directory's configuration is not a CosyVoice-300M (v1) one we can export."""


class UnsupportedModel(ExportError):
    """A configuration value the export modules do not reproduce (upstream would run it differently)."""


class CheckpointError(ExportError):
    """A checkpoint file is missing, truncated, or not what the configuration describes."""


class CheckpointMismatch(CheckpointError):
    """A state dict's keys or shapes do not fit the module the configuration describes."""


class ContractError(ExportError):
    """An exported or shipped graph does not match function.cosyvoice.contract (names, arity, weights)."""


class OptionsError(ExportError):
    """The export was asked for something it cannot do (an unknown weight mode or model size)."""


__all__ = [
    "CheckpointError",
    "CheckpointMismatch",
    "ConfigError",
    "ContractError",
    "ExportError",
    "OptionsError",
    "UnsupportedModel",
]
