"""The exporter's commands: `export` (MODEL_DIR OUT_DIR, the default), `fake` (a random-weight model) and
`assets` (whisper's tokenizer files, for `make setup`).

Parsing needs no torch import; each command imports the exporter when it runs. Errors the exporter
raises on purpose are one line (function.cli.base's style), exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from function.cli.base import fail

# Weight modes per part (export.build checks them again; kept here so parsing needs no torch import).
WEIGHT_CHOICES = {"llm": ("fp32", "int8", "int4"), "flow": ("fp32", "int8"), "vocoder": ("fp32", "int8")}


def _also(text: str) -> tuple[Path, dict[str, str]]:
    """`DIR:llm=int8,flow=int8,vocoder=int8` → (DIR, {"llm_weights": "int8", ...}); omitted: fp32."""
    directory, _, spec = text.rpartition(":")
    pairs = [item.partition("=") for item in spec.split(",")]
    if not directory or any(value not in WEIGHT_CHOICES.get(key, ()) for key, _, value in pairs):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected DIR:llm=fp32|int8|int4,flow=fp32|int8,vocoder=fp32|int8"
        )
    return Path(directory), {f"{key}_weights": value for key, _, value in pairs}


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export",
        prog="python -m export",
        help="export a model directory to an artifact (the default command)",
        description="Export a CosyVoice-300M model directory to an ONNX artifact.",
    )
    parser.set_defaults(run=export)
    parser.add_argument(
        "model_dir", type=Path, help="directory with cosyvoice.yaml, llm.pt, flow.pt, hift.pt, ..."
    )
    parser.add_argument("out_dir", type=Path, help="artifact directory to create")
    parser.add_argument(
        "--llm-weights",
        choices=WEIGHT_CHOICES["llm"],
        default="fp32",
        help="weight-only quantisation of the LLM's MatMuls",
    )
    parser.add_argument(
        "--flow-weights",
        choices=WEIGHT_CHOICES["flow"],
        default="fp32",
        help=(
            "int8 weights and dynamically quantised activations for the flow's MatMuls"
            " (faster: `python -m bench speed` measures how much)"
        ),
    )
    parser.add_argument(
        "--vocoder-weights",
        choices=WEIGHT_CHOICES["vocoder"],
        default="fp32",
        help=(
            "int8 convolutions in the vocoder, calibrated on the model's own mels"
            " (faster: `python -m bench speed` measures how much)"
        ),
    )
    parser.add_argument(
        "--also",
        type=_also,
        action="append",
        default=[],
        metavar="DIR:llm=W,flow=W,vocoder=W",
        help="write another artifact with these weights from the same torch export (repeatable)",
    )
    parser.add_argument("--force", action="store_true", help="replace the output directories if they exist")
    parser.add_argument(
        "--instruct",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the model is (or is not) an -Instruct one; default: '-Instruct' in MODEL_DIR as given",
    )
    parser.add_argument(
        "--no-quality-report",
        action="store_true",
        help="skip measuring what quantisation costs against fp32 (each quantised part) and how far"
        " fewer flow steps move the mel",
    )

    fake = commands.add_parser("fake", help="write a random-weight model directory (its audio is noise)")
    fake.set_defaults(run=make_fake)
    fake.add_argument("out_dir", type=Path)
    fake.add_argument("--size", choices=("tiny", "full"), default="tiny")
    fake.add_argument("--seed", type=int, default=0)
    legacy = "store hift.pt weight norm as weight_g/weight_v, like older releases"
    fake.add_argument("--legacy-weight-norm", action="store_true", help=legacy)

    assets = commands.add_parser("assets", help="extract whisper's tokenizer files from its source archive")
    assets.set_defaults(run=extract_assets)
    assets.add_argument("sdist_dir", type=Path, help="directory holding openai_whisper-*.tar.gz")
    assets.add_argument("dest", type=Path, help="directory to write them to")


def export(args: argparse.Namespace) -> int:
    from export.build import ExportOptions, export_artifacts
    from export.errors import ExportError

    quality = not args.no_quality_report
    targets = {
        args.out_dir: ExportOptions(
            llm_weights=args.llm_weights,
            flow_weights=args.flow_weights,
            vocoder_weights=args.vocoder_weights,
            quality_report=quality,
        )
    }
    for directory, fields in args.also:
        if directory in targets:
            return fail("export", f"{directory} is given twice")
        targets[directory] = ExportOptions(quality_report=quality, **fields)
    try:
        for summary in export_artifacts(args.model_dir, targets, force=args.force, instruct=args.instruct):
            print("\n".join(summary.lines()))
    except (ExportError, OSError) as exc:
        return fail("export", str(exc))
    return 0


def make_fake(args: argparse.Namespace) -> int:
    from export.errors import ExportError
    from export.fake import make_fake_model

    try:
        path = make_fake_model(args.out_dir, args.size, args.seed, args.legacy_weight_norm)
    except (ExportError, OSError) as exc:
        return fail("export", str(exc))
    print(f"wrote a random-weight {args.size} model to {path}")
    return 0


def extract_assets(args: argparse.Namespace) -> int:
    from export.assets import extract

    try:
        extract(args.sdist_dir, args.dest)
    except OSError as exc:
        return fail("export", str(exc))
    return 0


__all__ = ["WEIGHT_CHOICES", "register"]
