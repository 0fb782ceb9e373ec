"""`python -m function synth`, `speakers` and `verify` on the tiny artifact. No torch.

Each command runs as a user runs it (a subprocess) where the interpreter's start, the environment or the
exit status is what is tested; the modes, formats and seeds of `synth` run its same code in this process
(`in_process`), without an interpreter's start each.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile

import function.instance.model
import function.instance.settings
from function.__main__ import main as function_main
from function.audio.encode import iter_encode
from function.cli.synth import write_audio
from function.core.formats import Output
from tests.function.support import serving

ROOT = Path(__file__).resolve().parents[3]
SPEAKER = "英文女"
TEXT = "Hello there, how are you today?"
WAV = Output.of("wav", 22050)


def cli(*args: str | Path, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("COSYVOICE_")},
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        **settings,
    }
    if "COSYVOICE_WHISPER_ASSETS" in os.environ:
        env["COSYVOICE_WHISPER_ASSETS"] = os.environ["COSYVOICE_WHISPER_ASSETS"]
    return subprocess.run(
        [sys.executable, "-m", "function", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def synth_command(artifact: Path, output: Path, *args: str | Path) -> list[str | Path]:
    return ["synth", "--artifacts", artifact, "-o", output, *args]


def synth(
    artifact: Path, output: Path, *args: str | Path, **settings: str
) -> subprocess.CompletedProcess[str]:
    return cli(*synth_command(artifact, output, *args), cwd=output.parent, **settings)


def synth_here(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    artifact: Path,
    output: Path,
    *args: str | Path,
) -> subprocess.CompletedProcess[str]:
    """As `synth`, in this process (`in_process`)."""
    command = synth_command(artifact, output, *args)
    return in_process(monkeypatch, capsys, *command, cwd=output.parent, loads_the_model=True)


def voiced_wav(seconds: float, rate: int = 16000) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    audio = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2)
    buffer = io.BytesIO()
    soundfile.write(buffer, audio.astype(np.float32), rate, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def prompt_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prompt") / "prompt.wav"
    path.write_bytes(voiced_wav(3.0))
    return path


def test_speakers_lists_the_manifests_speakers(tiny_artifact: Path, tmp_path: Path) -> None:
    result = cli("speakers", "--artifacts", tiny_artifact, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    speakers = json.loads((tiny_artifact / "manifest.json").read_text())["speakers"]
    assert result.stdout.splitlines() == sorted(speakers) and SPEAKER in speakers


def test_speakers_without_an_artifact_is_one_line(tmp_path: Path) -> None:
    result = cli("speakers", "--artifacts", tmp_path / "missing", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "manifest.json is missing" in result.stderr


def test_verify_passes_a_good_artifact_and_names_a_damaged_file(
    tiny_artifact: Path, damaged_artifact: Path, tmp_path: Path
) -> None:
    good = cli("verify", "--artifacts", tiny_artifact, cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    assert "sha256 match the manifest" in good.stdout
    bad = cli("verify", "--artifacts", damaged_artifact, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    expected = "function: error: artifact file weights.bin does not match its sha256 in the manifest\n"
    assert bad.stderr == expected


@pytest.mark.parametrize("mode", ["sft", "instruct", "zero_shot", "cross_lingual"])
def test_synth_every_mode_writes_a_wav(
    tiny_artifact: Path,
    tmp_path: Path,
    prompt_wav: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    mode: str,
) -> None:
    voices: dict[str, list[str | Path]] = {
        "sft": ["--speaker", SPEAKER],
        "instruct": ["--speaker", SPEAKER, "--instruct", "A calm voice."],
        "zero_shot": ["--prompt-wav", prompt_wav, "--prompt-text", "This is my voice."],
        "cross_lingual": ["--prompt-wav", prompt_wav],
    }
    output = tmp_path / "out.wav"
    result = synth_here(
        monkeypatch, capsys, tiny_artifact, output, "--text", TEXT, "--seed", "1", *voices[mode]
    )
    assert result.returncode == 0, result.stderr
    audio, rate = soundfile.read(output, dtype="float32")
    assert rate == 22050 and audio.ndim == 1 and len(audio) > rate // 2 and np.std(audio) > 1e-3
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]  # no temporary left behind


def test_synth_stream_writes_a_complete_wav_and_reports_the_first_chunk(
    tiny_artifact: Path, tmp_path: Path
) -> None:
    output = tmp_path / "streamed.wav"
    result = synth(tiny_artifact, output, "--speaker", SPEAKER, "--text", TEXT, "--seed", "1", "--stream")
    assert result.returncode == 0, result.stderr
    assert "first chunk after" in result.stderr
    data = output.read_bytes()
    riff_size, data_size = struct.unpack_from("<I", data, 4)[0], struct.unpack_from("<I", data, 40)[0]
    assert (
        riff_size == len(data) - 8 and data_size == len(data) - 44
    )  # exact sizes, not the stream's "unknown"
    assert soundfile.info(output).frames == data_size // 2 > 22050


def test_synth_is_reproducible_with_a_seed_and_speed_scales_duration(
    tiny_artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {}
    for name, speed in (("a", "1.0"), ("b", "1.0"), ("fast", "2.0")):
        output = tmp_path / f"{name}.wav"
        spoken = ("--speaker", SPEAKER, "--text", TEXT, "--seed", "7", "--speed", speed)
        result = synth_here(monkeypatch, capsys, tiny_artifact, output, *spoken)
        assert result.returncode == 0, result.stderr
        runs[name] = output.read_bytes()
    assert runs["a"] == runs["b"]
    normal, fast = soundfile.info(tmp_path / "a.wav").frames, soundfile.info(tmp_path / "fast.wav").frames
    assert abs(fast - normal / 2) <= 256


@pytest.mark.parametrize(
    ("name", "args", "container"),
    [
        ("out.flac", [], "FLAC"),
        ("out.ogg", [], "OGG"),
        ("out.mp3", [], "MP3"),
        ("out.pcm", [], None),
        ("out.bin", ["--format", "pcm"], None),
        ("out.audio", ["--format", "FLAC", "--stream"], "FLAC"),
    ],
)
def test_synth_formats_from_the_suffix_or_the_flag(
    tiny_artifact: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    args: list[str],
    container: str | None,
) -> None:
    if container is not None and container not in soundfile.available_formats():
        pytest.skip(f"this libsndfile cannot write {container}")
    output = tmp_path / name
    spoken = ("--speaker", SPEAKER, "--text", TEXT, "--seed", "2", *args)
    result = synth_here(monkeypatch, capsys, tiny_artifact, output, *spoken)
    assert result.returncode == 0, result.stderr
    if container is None:  # raw s16le: twice the samples, a whole number of them
        assert output.stat().st_size % 2 == 0 and output.stat().st_size > 2 * 22050
    else:
        info = soundfile.info(output)
        assert info.format == container and info.samplerate == 22050 and info.frames > 22050


NOT_AUDIO = "not-audio.wav"
SHORT_PROMPT = "short.wav"

# Refused before the model loads (function.cli.synth.main checks the request, the output's directory and
# the settings first): run in this process, which is the same code without an interpreter's start.
BAD_REQUESTS: list[tuple[str, list[str], str]] = [
    ("empty text", ["--speaker", SPEAKER, "--text", "  "], "text is empty"),
    ("no text", ["--speaker", SPEAKER], "required: --text"),
    ("no voice", ["--text", TEXT], "speaker is required"),
    (
        "unknown suffix",
        ["--speaker", SPEAKER, "--text", TEXT, "-o", "out.xyz"],
        "cannot tell the audio format",
    ),
    (
        "unknown format",
        ["--speaker", SPEAKER, "--text", TEXT, "--format", "aiff"],
        "format 'aiff' is not supported",
    ),
    ("speed", ["--speaker", SPEAKER, "--text", TEXT, "--speed", "2.5"], "speed must be between 0.5 and 2.0"),
    ("seed", ["--speaker", SPEAKER, "--text", TEXT, "--seed", "one"], "invalid int value"),
    (
        "prompt text alone",
        ["--speaker", SPEAKER, "--text", TEXT, "--prompt-text", "hi"],
        "without prompt_audio",
    ),
    (
        "prompt and speaker",
        ["--speaker", SPEAKER, "--text", TEXT, "--prompt-wav", SHORT_PROMPT],
        "cannot be combined with --speaker",
    ),
    (
        "prompt missing",
        ["--text", TEXT, "--prompt-wav", "missing.wav"],
        "No such file or directory: missing.wav",
    ),
    (
        "no output directory",
        ["--speaker", SPEAKER, "--text", TEXT, "-o", "missing/out.wav"],
        "output directory does not exist",
    ),
]

# Refused by the model itself (its speakers, the prompt's decoding): run as a user runs them.
BAD_VOICES: list[tuple[str, list[str], str]] = [
    ("unknown speaker", ["--speaker", "nobody", "--text", TEXT], "known speakers: "),
    ("prompt not audio", ["--text", TEXT, "--prompt-wav", NOT_AUDIO], "could not be decoded"),
    ("prompt too short", ["--text", TEXT, "--prompt-wav", SHORT_PROMPT], "between 1 and 30 s"),
]


def in_process(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str | Path,
    cwd: Path,
    loads_the_model: bool = False,
    **settings: str,
) -> subprocess.CompletedProcess[str]:
    """As `cli`, in this process. A command that loads the model takes this process's settings for the
    test's length. Any other is refused before it takes the deployment's settings and builds an engine:
    doing either here fails the test."""
    for name in [name for name in os.environ if name.startswith("COSYVOICE_")]:
        if name != "COSYVOICE_WHISPER_ASSETS":
            monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(cwd)

    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("this command was meant to be refused before the model loads")

    if loads_the_model:  # put back when the test ends
        monkeypatch.setattr(function.instance.settings, "_settings", None)
    else:
        monkeypatch.setattr(function.instance.settings, "use_settings", no_engine)
        monkeypatch.setattr(function.instance.model, "build_engine", no_engine)
    try:
        code = function_main([*map(str, args)])
    except SystemExit as exit:  # argparse's own usage errors
        code = int(exit.code or 0)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def assert_refused_in_one_line(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("function: error: ")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert result.stderr.splitlines()[-1] == errors[0]  # nothing after the error line


@pytest.mark.parametrize(
    ("args", "message", "loads_the_model"),
    [(*case[1:], False) for case in BAD_REQUESTS] + [(*case[1:], True) for case in BAD_VOICES],
    ids=[case[0] for case in BAD_REQUESTS + BAD_VOICES],
)
def test_synth_errors_are_one_line_exit_2_and_leave_no_file(
    tiny_artifact: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
    loads_the_model: bool,
) -> None:
    (tmp_path / NOT_AUDIO).write_text("just text")
    (tmp_path / SHORT_PROMPT).write_bytes(voiced_wav(0.5))
    existing = tmp_path / "out.wav"
    existing.write_bytes(b"the previous result")
    before = sorted(p.name for p in tmp_path.iterdir())
    command = ["synth", "--artifacts", tiny_artifact, *(["-o", "out.wav"] if "-o" not in args else []), *args]
    if loads_the_model:
        result = cli(*command, cwd=tmp_path)
    else:
        result = in_process(monkeypatch, capsys, *command, cwd=tmp_path)
    assert_refused_in_one_line(result, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing new, nothing half-written
    assert existing.read_bytes() == b"the previous result"


def test_write_audio_failing_midway_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    output = tmp_path / "out.wav"
    output.write_bytes(b"old")

    def chunks() -> Iterator[np.ndarray]:
        yield np.zeros(1000, dtype=np.float32)
        raise RuntimeError("the engine failed after the first chunk")

    with pytest.raises(RuntimeError):
        write_audio(output, iter_encode(chunks(), WAV), WAV)
    assert output.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["out.wav"]

    write_audio(output, iter_encode([np.full(100, 0.5, dtype=np.float32)], WAV), WAV)
    audio, rate = soundfile.read(output, dtype="float32")
    assert rate == 22050 and len(audio) == 100 and np.allclose(audio, 0.5, atol=1e-4)


# Two segments on the tiny model, so that a decode batch of two rows has two to decode.
TWO_SEGMENTS = " ".join(
    f"Sentence {i} of a longer request, which goes on for a while before it stops." for i in range(8)
)
DEPLOYMENT = {"COSYVOICE_FLOW_STEPS": "5", "COSYVOICE_DECODE_BATCH": "2", "COSYVOICE_THREADS": "1"}


def test_synth_builds_its_engine_from_the_deployments_settings_as_serve_does(
    tiny_artifact: Path, tmp_path: Path
) -> None:
    spoken = ["--speaker", SPEAKER, "--text", TWO_SEGMENTS, "--seed", "6"]  # a seed the tiny model ends early
    with serving(str(tiny_artifact), tmp_path / "server.log", **DEPLOYMENT) as url:
        body = {"text": TWO_SEGMENTS, "speaker": SPEAKER, "seed": 6, "format": "wav"}
        served = httpx.post(f"{url}/v1/tts", json=body, timeout=300)
    assert served.status_code == 200, served.text
    assert served.headers["x-flow-steps"] == "5"

    runs = {}
    for name, args, settings in (
        ("deployment", [], DEPLOYMENT),
        ("flag", ["--flow-steps", "5"], {"COSYVOICE_THREADS": "1"}),
        ("default", [], {"COSYVOICE_THREADS": "1"}),
    ):
        result = synth(tiny_artifact, tmp_path / f"{name}.wav", *spoken, *args, **settings)
        assert result.returncode == 0, result.stderr
        runs[name] = (tmp_path / f"{name}.wav").read_bytes()
    assert runs["deployment"] == served.content  # the same settings and seed: the same audio
    assert runs["flag"] == runs["deployment"]  # --flow-steps is the request's own choice of the same
    assert runs["default"] != runs["deployment"]  # the settings took effect: v1's 10 steps differ


@pytest.mark.parametrize(
    ("args", "settings", "message"),
    [
        (["--flow-steps", "11"], {}, "flow_steps must be an integer from 2 to 10"),
        ([], {"COSYVOICE_DECODE_BATCH": "many"}, "COSYVOICE_DECODE_BATCH='many' is not an integer"),
        (["--threads", "0"], {}, "--threads 0 is below its minimum 1"),
    ],
)
def test_synth_refuses_bad_settings_in_one_line(
    tiny_artifact: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    settings: dict[str, str],
    message: str,
) -> None:
    output = tmp_path / "out.wav"
    command = synth_command(tiny_artifact, output, "--speaker", SPEAKER, "--text", TEXT, *args)
    result = in_process(monkeypatch, capsys, *command, cwd=tmp_path, **settings)
    assert result.returncode == 2 and not output.exists()
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"function: error: {message}"), result.stderr
