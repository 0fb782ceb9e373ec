"""`python -m function synth`: one request from the command line into an audio file.

    python -m function synth --artifacts DIR --text TEXT -o out.wav
        (--speaker NAME [--instruct TEXT] | --prompt-wav FILE [--prompt-text TEXT])
        [--stream] [--format wav|flac|ogg|mp3|pcm] [--seed N] [--speed X] [--flow-steps N] [--threads N]

The engine is built as a deployment's is (function.instance.model.build_engine) from the same settings
(function.instance.settings: COSYVOICE_FLOW_STEPS, COSYVOICE_DECODE_BATCH, COSYVOICE_THREADS, ...), so a
command and `serve` with the same settings and seed give the same audio; --artifacts and --threads
override their variables, and --flow-steps is this request's own choice, as a request's `flow_steps` is.

The file appears complete or not at all: audio goes to a temporary file beside it, renamed when done (an
existing file is replaced only then). With --stream, wav and pcm reach that file chunk by chunk as the
engine yields them, and the time to the first chunk goes to stderr. The format comes from the output's
suffix unless --format names it. Every error is one line on stderr and exit status 2 (function.cli.base).
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from function.cli import base
from function.core.errors import ArtifactError, InvalidRequest, TTSError, UnsupportedFormat
from function.core.formats import FORMATS, Output
from function.core.options import MAX_FLOW_STEPS, MIN_FLOW_STEPS, SynthesisOptions
from function.instance.settings import Settings, SettingsError

ARTIFACT_VARIABLE = "COSYVOICE_ARTIFACT"


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("synth", help="synthesize text into an audio file")
    base.add_artifacts_option(parser)
    parser.add_argument("--text", required=True, help="what to say")
    parser.add_argument("-o", "--output", type=Path, required=True, help="audio file to write")
    voice = parser.add_argument_group("voice: a built-in speaker (optionally instructed), or prompt audio")
    voice.add_argument("--speaker", help="built-in speaker (see `python -m function speakers`)")
    voice.add_argument("--instruct", help="style instruction for the speaker (-Instruct model)")
    voice.add_argument("--prompt-wav", type=Path, help="recording of the voice to clone (1-30 s)")
    voice.add_argument("--prompt-text", help="transcript of --prompt-wav; without it: cross-lingual")
    parser.add_argument("--format", help=f"one of {', '.join(FORMATS)} (default: the output's suffix)")
    parser.add_argument("--stream", action="store_true", help="stream chunks into the file as they come")
    parser.add_argument("--seed", type=int, help="the same seed and options give the same audio")
    parser.add_argument("--speed", type=float, default=1.0, help="tempo factor in [0.5, 2.0]")
    parser.add_argument(
        "--flow-steps",
        type=int,
        help=f"the flow's Euler steps, {MIN_FLOW_STEPS}..{MAX_FLOW_STEPS} (default: $COSYVOICE_FLOW_STEPS,"
        " else the artifact's: v1's 10; 5 is the fast tier)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="onnxruntime intra-op threads (default: $COSYVOICE_THREADS, else every CPU)",
    )
    parser.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    try:
        options = request_options(args)  # before the model loads: a bad request fails at once
        if not args.output.absolute().parent.is_dir():
            raise FileNotFoundError(errno.ENOENT, "output directory does not exist", str(args.output.parent))
        settings = deployment_settings(args)
        from function.instance.model import build_engine
        from function.instance.settings import use_settings
        from function.service.synthesis import Allowance, prepare

        use_settings(settings)  # what the service path reads (a saved voice's storage) is the same too
        started = time.perf_counter()
        engine = build_engine(settings)
        say(f"model loaded in {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        synthesis = prepare(options, Allowance(max_text_chars=None), engine=engine)
        pieces = synthesis.pieces()
        output = synthesis.output
        write_audio(args.output, _reporting_first(pieces, started) if options.stream else pieces, output)
    except (TTSError, OSError, SettingsError) as exc:
        return fail(exc)
    except KeyboardInterrupt:
        return 130
    seconds = synthesis.samples / engine.sample_rate
    say(
        f"wrote {args.output}: {seconds:.2f} s of audio ({output.name}, {output.rate} Hz)"
        f" in {time.perf_counter() - started:.2f} s"
    )
    return 0


def request_options(args: argparse.Namespace) -> SynthesisOptions:
    if args.prompt_wav is not None and (args.speaker or args.instruct):
        raise InvalidRequest(
            "--prompt-wav clones a voice: it cannot be combined with --speaker or --instruct"
        )
    return SynthesisOptions(
        text=args.text,
        speaker=args.speaker,
        instruct=args.instruct,
        prompt_audio=args.prompt_wav.read_bytes() if args.prompt_wav is not None else None,
        prompt_text=args.prompt_text,
        format=args.format.lower() if args.format else format_of(args.output),
        speed=args.speed,
        seed=args.seed,
        stream=args.stream,
        flow_steps=args.flow_steps,
    ).validated(max_text_chars=None)  # a local command: no request-size limit


def deployment_settings(args: argparse.Namespace) -> Settings:
    """The settings from the environment, with --artifacts and --threads in place of their variables."""
    settings = Settings.from_env(artifact=artifact_location(args.artifacts))
    if args.threads is not None:
        if args.threads < 1:
            raise SettingsError(f"--threads {args.threads} is below its minimum 1")
        settings = dataclasses.replace(settings, threads=args.threads)
    return settings


def format_of(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise UnsupportedFormat(
            f"cannot tell the audio format from {path.name!r}: name the file"
            f" .{', .'.join(FORMATS)} or pass --format"
        )
    return suffix


def _reporting_first(pieces: Iterator[bytes], started: float) -> Iterator[bytes]:
    """The encoded pieces, saying on stderr when the first one came."""
    for index, piece in enumerate(pieces):
        if index == 0:
            say(f"first chunk after {time.perf_counter() - started:.3f} s")
        yield piece


def write_audio(path: Path, pieces: Iterable[bytes], output: Output) -> None:
    """Write encoded `pieces` into `path` atomically, each as it comes (wav and pcm come chunk by chunk);
    a wav written that way gets its exact sizes into the header at the end."""
    from function.audio.encode import wav_header

    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with temporary.open("xb") as handle:
            for piece in pieces:
                handle.write(piece)
                handle.flush()
            if output.name == "wav":
                header = wav_header(output.rate, 0)
                data_bytes = handle.tell() - len(header)
                handle.seek(0)
                handle.write(wav_header(output.rate, data_bytes))
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def artifact_location(given: str | None) -> str:
    location = given or os.environ.get(ARTIFACT_VARIABLE)
    if not location:
        raise ArtifactError(f"no artifact: pass --artifacts DIR or set {ARTIFACT_VARIABLE}")
    return location


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fail(error: TTSError | OSError | SettingsError) -> int:
    """One line on stderr, exit status 2 (function.cli.base's error style)."""
    if isinstance(error, SettingsError):
        message = str(error)
    elif isinstance(error, TTSError):
        message = error.message
    elif error.filename is not None and error.strerror:
        message = f"{error.strerror}: {error.filename}"
    else:
        message = str(error)
    return base.fail("function", message)


__all__ = [
    "artifact_location",
    "fail",
    "format_of",
    "register",
    "say",
    "write_audio",
]
