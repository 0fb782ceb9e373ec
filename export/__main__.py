"""Command line: `python -m export MODEL_DIR OUT_DIR` and `python -m export fake --size tiny|full DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

USAGE = """\
python -m export MODEL_DIR OUT_DIR [--llm-weights fp32|int8|int4] [--flow-weights fp32|int8] [--force]
                        [--also DIR:llm=int8,flow=int8 ...] [--no-quality-report]
       python -m export fake [--size tiny|full] [--seed N] [--legacy-weight-norm] DIR"""
# Weight modes per part (export.build checks them again; kept here so parsing needs no torch import).
WEIGHT_CHOICES = {"llm": ("fp32", "int8", "int4"), "flow": ("fp32", "int8")}


def _also(text: str) -> tuple[Path, dict[str, str]]:
    """`DIR:llm=int8,flow=int8` → (DIR, {"llm_weights": "int8", "flow_weights": "int8"}); omitted: fp32."""
    directory, _, spec = text.rpartition(":")
    pairs = [item.partition("=") for item in spec.split(",")]
    if not directory or any(value not in WEIGHT_CHOICES.get(key, ()) for key, _, value in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: expected DIR:llm=fp32|int8|int4,flow=fp32|int8")
    return Path(directory), {f"{key}_weights": value for key, _, value in pairs}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line like every other error of this command."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"export: error: {message} (see {self.prog} --help)\n")


def _export_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m export",
        usage=USAGE,
        description="Export a CosyVoice-300M model directory to an ONNX artifact.",
    )
    parser.add_argument(
        "model_dir", type=Path, help="directory with cosyvoice.yaml, llm.pt, flow.pt, hift.pt, ..."
    )
    parser.add_argument("out_dir", type=Path, help="artifact directory to create")
    parser.add_argument(
        "--llm-weights",
        choices=WEIGHT_CHOICES["llm"],
        default="fp32",
        help="weight-only quantisation of the LLM (flow and vocoder stay fp32)",
    )
    parser.add_argument(
        "--flow-weights",
        choices=WEIGHT_CHOICES["flow"],
        default="fp32",
        help="int8 weights and dynamically quantised activations for the flow's MatMuls (~1.5x faster)",
    )
    parser.add_argument(
        "--also",
        type=_also,
        action="append",
        default=[],
        metavar="DIR:llm=W,flow=W",
        help="write another artifact with these weights from the same torch export (repeatable)",
    )
    parser.add_argument("--force", action="store_true", help="replace the output directories if they exist")
    parser.add_argument(
        "--no-quality-report",
        action="store_true",
        help="skip measuring what quantisation costs against fp32 (LLM and flow)",
    )
    return parser


def _fake_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m export fake",
        description="Write a random-weight CosyVoice-300M model directory (its audio is noise).",
    )
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--size", choices=("tiny", "full"), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--legacy-weight-norm",
        action="store_true",
        help="store hift.pt weight norm as weight_g/weight_v, like older releases",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from export.checkpoints import CheckpointError
    from export.config import ConfigError

    try:
        if argv[:1] == ["fake"]:
            from export.fake import make_fake_model

            args = _fake_parser().parse_args(argv[1:])
            path = make_fake_model(args.out_dir, args.size, args.seed, args.legacy_weight_norm)
            print(f"wrote a random-weight {args.size} model to {path}")
            return 0
        args = _export_parser().parse_args(argv)
        from export.build import ExportOptions, export_artifacts

        quality = not args.no_quality_report
        targets = {
            args.out_dir: ExportOptions(
                llm_weights=args.llm_weights, flow_weights=args.flow_weights, quality_report=quality
            )
        }
        for directory, fields in args.also:
            if directory in targets:
                raise ValueError(f"{directory} is given twice")
            targets[directory] = ExportOptions(quality_report=quality, **fields)
        for summary in export_artifacts(args.model_dir, targets, force=args.force):
            print("\n".join(summary.lines()))
        return 0
    except (ConfigError, CheckpointError, FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"export: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
