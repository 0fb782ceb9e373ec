"""What goes into the two deployment packages: requirements from pyproject.toml (one source of truth),
the Dockerfile, and the zip builder (everything but the pip download, which needs the network)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from function.cosyvoice.frontend.fst import GRAPH_FILES
from infra import build_zip
from infra.requirements import PROVIDED_BY_LAMBDA, requirement_name, runtime_requirements

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
DOCKERFILE = ROOT / "infra" / "Dockerfile"
PROJECT = tomllib.loads(PYPROJECT.read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {requirement_name(r) for r in requirements}


# --- requirements ---------------------------------------------------------------------------------


def test_runtime_requirements_are_the_package_dependencies_and_function_extra_less_the_runtime_client():
    declared = PROJECT["dependencies"] + PROJECT["optional-dependencies"]["function"]
    requirements = runtime_requirements(PYPROJECT)
    assert set(requirements) == {r for r in declared if requirement_name(r) not in PROVIDED_BY_LAMBDA}
    assert set(PROJECT["dependencies"]) <= set(requirements)
    assert "awslambdaric" in _names(declared) and "awslambdaric" not in _names(requirements)
    # The handler registers SnapStart hooks at import: the zip carries the pinned library.
    assert "snapshot-restore-py" in _names(requirements)


def test_runtime_requirements_hold_nothing_of_the_exporter():
    export_only = _names(PROJECT["optional-dependencies"]["export"]) - _names(PROJECT["dependencies"])
    assert "torch" in export_only
    assert _names(runtime_requirements(PYPROJECT)).isdisjoint(export_only)


def test_requirements_script_runs_alone_as_in_the_docker_build(tmp_path):
    # The image build runs the file by path with only the stdlib: no project, no venv packages.
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    script = shutil.copy(ROOT / "infra" / "requirements.py", tmp_path / "requirements.py")
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(script), str(tmp_path / "pyproject.toml")],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert out.stdout.split() == runtime_requirements(PYPROJECT)


@pytest.mark.parametrize(
    ("requirement", "name"),
    [("Mangum==0.22.0", "mangum"), ("snapshot_restore.py>=1", "snapshot-restore-py"), ("numpy", "numpy")],
)
def test_requirement_names_are_normalised(requirement, name):
    assert requirement_name(requirement) == name


# --- Dockerfile -----------------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _stages() -> list[list[tuple[str, str]]]:
    """The build stages, each from its FROM on (ARGs before the first FROM are left out)."""
    stages: list[list[tuple[str, str]]] = []
    for op, args in _instructions():
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, args))
    return stages


BASE_ARG = re.compile(r"BASE_IMAGE=(\S+)")
# A dated release (3.12.YYYY.MM.DD.HH), optionally with its digest: never a moving tag like 3.12.
PINNED_BASE = re.compile(r"public\.ecr\.aws/lambda/python:3\.12\.\d{4}(\.\d{2}){3}(@sha256:[0-9a-f]{64})?")


def test_dockerfile_installs_exactly_the_runtime_requirements():
    requirements_stage, image = _stages()
    # Generated from pyproject.toml by the shared script, in a stage of its own...
    assert requirements_stage[0] == ("FROM", "${BASE_IMAGE} AS requirements")
    assert ("COPY", "pyproject.toml infra/requirements.py /tmp/build/") in requirements_stage
    (generate,) = [args for op, args in requirements_stage if op == "RUN"]
    assert re.fullmatch(
        r"python3 \S*requirements\.py \S*pyproject\.toml > /tmp/build/requirements\.txt", generate
    )
    # ...and the image installs from that file and nothing else.
    assert ("COPY", "--from=requirements /tmp/build/requirements.txt /tmp/build/requirements.txt") in image
    installs = [args for op, args in image if op == "RUN" and "pip" in args and "install" in args]
    assert len(installs) == 1
    pip = installs[0].split("pip3 install", 1)[1].split("&&")[0].split()
    assert [arg for arg in pip if not arg.startswith("-") and not arg.startswith('"$')] == [
        "/tmp/build/requirements.txt"
    ]
    assert "--only-binary=:all:" in pip


def test_dockerfile_layers_go_dependencies_then_model_then_code():
    _, image = _stages()
    # pyproject.toml is not in the image's stage: editing it cannot invalidate the model layer.
    assert not any(op in ("COPY", "ADD") and "pyproject" in args for op, args in image)
    install = next(i for i, (op, args) in enumerate(image) if op == "RUN" and "pip3 install" in args)
    model = image.index(("COPY", "${ARTIFACT_DIR}/ /opt/cosyvoice/artifact/"))
    code = image.index(("COPY", "function/ ${LAMBDA_TASK_ROOT}/function/"))
    assert install < model < code
    assert [i for i, (op, _) in enumerate(image) if op in ("COPY", "ADD")][-1] == code


def test_dockerfile_base_is_a_pinned_release_used_by_every_stage():
    instructions = _instructions()
    assert instructions[0][0] == "ARG"
    match = BASE_ARG.fullmatch(instructions[0][1])
    assert match and PINNED_BASE.fullmatch(match.group(1)), instructions[0]
    assert [stage[0][1].split()[0] for stage in _stages()] == ["${BASE_IMAGE}", "${BASE_IMAGE}"]
    assert not PINNED_BASE.fullmatch("public.ecr.aws/lambda/python:3.12")


def test_dockerfile_is_a_lambda_image_with_the_artifact_and_function_package():
    _, image = _stages()
    copies = [args for op, args in image if op == "COPY"]
    assert "${ARTIFACT_DIR}/ /opt/cosyvoice/artifact/" in copies
    assert "function/ ${LAMBDA_TASK_ROOT}/function/" in copies
    assert not any("export" in c for c in copies)
    assert ("ARG", "ARTIFACT_DIR=artifact") in image
    assert ("ENV", "COSYVOICE_ARTIFACT=/opt/cosyvoice/artifact") in image
    assert image[-1] == ("CMD", '["function.awslambda.handler.lambda_handler"]')


def test_dockerignore_lets_in_only_what_the_dockerfile_copies():
    patterns = [p for p in (ROOT / ".dockerignore").read_text().splitlines() if p and not p.startswith("#")]
    assert patterns[0] == "*"
    assert {"!pyproject.toml", "!infra/requirements.py", "!function/", "!artifact/"} <= set(patterns)
    assert not any(p.startswith("!") and ("venv" in p or "export" in p or ".cache" in p) for p in patterns)


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, "")


# --- zip builder ----------------------------------------------------------------------------------


def test_pip_command_fetches_lambda_wheels_of_the_runtime_requirements(tmp_path):
    command = build_zip.pip_command(runtime_requirements(PYPROJECT), tmp_path, "arm64", "3.12")
    assert command[command.index("--python-version") + 1] == "3.12"
    assert command[command.index("--implementation") + 1] == "cp"
    assert command[command.index("--target") + 1] == str(tmp_path)
    assert "--only-binary=:all:" in command
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    assert "manylinux2014_aarch64" in platforms and "manylinux_2_34_aarch64" in platforms
    assert not any("x86_64" in p for p in platforms)
    assert set(runtime_requirements(PYPROJECT)) <= set(command)


def test_the_function_package_goes_in_without_torch_or_bytecode(tmp_path):
    build_zip.copy_package(ROOT / "function", tmp_path)
    files = build_zip.tree_files(tmp_path)
    assert (tmp_path / "function" / "__init__.py") in files
    assert not any("__pycache__" in f.parts or f.suffix == ".pyc" for f in files)
    sources = [f.read_text() for f in files if f.suffix == ".py"]
    assert not any(re.search(r"^\s*(import|from)\s+(torch|export)\b", s, re.M) for s in sources)


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("x = 1\n")
    (root / "pkg" / "lib.so").write_bytes(b"\x7fELF" + bytes(5000))
    (root / "pkg" / "lib.so").chmod(0o755)
    (root / "top.py").write_text("")
    return root


def test_zip_is_reproducible_and_keeps_modes(tmp_path):
    root = _tree(tmp_path / "stage")
    first = build_zip.write_zip(root, tmp_path / "a.zip")
    (root / "top.py").touch()  # a newer mtime must not change the bytes
    second = build_zip.write_zip(root, tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert (first.files, first.unzipped_bytes) == (3, 5010)
    with zipfile.ZipFile(second.path) as archive:
        assert archive.namelist() == ["pkg/__init__.py", "pkg/lib.so", "top.py"]
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    assert modes == {"pkg/__init__.py": 0o100644, "pkg/lib.so": 0o100755, "top.py": 0o100644}


def test_size_check_fails_over_the_limit_and_names_the_largest_parts(tmp_path):
    root = _tree(tmp_path / "stage")
    assert build_zip.check_size(root, limit=5010) == 5010
    with pytest.raises(build_zip.BuildError, match=r"over Lambda's limit.*pkg"):
        build_zip.check_size(root, limit=5009)


def test_lambda_limit_is_250_mib():
    assert build_zip.UNZIPPED_LIMIT == 262_144_000


def _files(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")


# A staged tree in miniature: what the handler's import path needs, beside what trim() must drop.
KEPT = [
    "numpy/__init__.py",
    "numpy/_core/_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
    "numpy/testing/__init__.py",  # numpy.testing is a module of numpy, not a test suite
    "numpy.libs/libscipy_openblas64_-4b78795a.so",
    "onnxruntime/__init__.py",
    "onnxruntime/capi/libonnxruntime.so.1.32.0",
    "onnxruntime-1.32.0.dist-info/METADATA",
    "_soundfile_data/libsndfile_x86_64.so",
    "soundfile.py",
    "_soundfile.py",  # the compiled bindings, on _cffi_backend
    "_cffi_backend.cpython-312-x86_64-linux-gnu.so",
    "botocore/data/endpoints.json",
    "botocore/data/s3/2006-03-01/service-2.json.gz",
    "boto3/data/s3/2006-03-01/resources-1.json",
    "fastapi/__init__.py",
    "mangum/__init__.py",
    "prometheus_client/__init__.py",  # function.observe: the handler records the metrics too
    "kaldifst/lib/_kaldifst.cpython-312-x86_64-linux-gnu.so",
    "function/awslambda/handler.py",
    "function/cosyvoice/frontend/fst.py",
    "function/py.typed",
    "wetext/__init__.py",  # function.cosyvoice.frontend.fst finds the graphs through the package's location
    *(f"wetext/{name}" for name in GRAPH_FILES),
]
DROPPED = [
    "bin/uvicorn",
    "numpy/_core/tests/test_multiarray.py",
    "numpy/f2py/__init__.py",
    "numpy/_core/include/numpy/ndarrayobject.h",
    "numpy/__init__.pyi",
    "regex/tests/test_regex.py",
    "onnxruntime/transformers/optimizer.py",
    "onnxruntime/quantization/quantize.py",
    "onnxruntime/tools/symbolic_shape_infer.py",
    "google/protobuf/__init__.py",
    "protobuf-7.36.2.dist-info/METADATA",
    "uvicorn/main.py",
    "uvicorn-0.54.0.dist-info/METADATA",
    "click/core.py",
    "h11/_connection.py",
    "botocore/data/ec2/2016-11-15/service-2.json.gz",
    "boto3/data/dynamodb/2012-08-10/resources-1.json",
    "function/local/serve.py",
    "wetext/fsts/ja/tn/tagger.fst",
    "contractions/__init__.py",
    "contractions-0.1.73.dist-info/METADATA",
    "data/contractions_dict.json",
    "textsearch/__init__.py",
    "anyascii/_data/a.txt",
    "ahocorasick.cpython-312-x86_64-linux-gnu.so",
    "pyahocorasick-2.3.1.dist-info/METADATA",
    "cffi/api.py",
    "cffi-2.1.1.dist-info/METADATA",
    "pycparser/c_parser.py",
]


def test_trim_drops_what_the_handler_never_imports_and_keeps_what_it_needs(tmp_path):
    _files(tmp_path, KEPT + DROPPED)
    removed = build_zip.trim(tmp_path)
    assert sorted(f.relative_to(tmp_path).as_posix() for f in build_zip.tree_files(tmp_path)) == sorted(KEPT)
    assert all(not path.exists() for path in removed)
    assert tmp_path / "onnxruntime" / "transformers" in removed  # directories go whole


def test_the_zip_keeps_botocore_data_for_every_client_the_function_creates():
    sources = "\n".join(path.read_text() for path in (ROOT / "function").rglob("*.py"))
    created = set(re.findall(r"(?:\.client|\b_client)\(\s*[\"']([\w-]+)[\"']", sources))
    assert created and created <= build_zip.AWS_SERVICES


def test_nothing_on_the_lambda_path_imports_what_the_zip_drops():
    # function/__main__.py (the local CLI) may import function.local; the handler's modules may not.
    dropped = "|".join(
        [
            r"function\.local",
            r"onnxruntime\.(transformers|quantization|tools)",
            "google",
            "wetext",
            "ahocorasick",
        ]
        + [name for name in build_zip.UNUSED_DISTRIBUTIONS if name not in ("protobuf", "pyahocorasick")]
    )
    pattern = re.compile(rf"^\s*(import|from)\s+({dropped})\b", re.M)
    modules = [
        p for p in (ROOT / "function").rglob("*.py") if "local" not in p.parts and p.name != "__main__.py"
    ]
    assert [p.name for p in modules if pattern.search(p.read_text())] == []


def _running_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def test_bytecode_is_hash_based_and_unchecked_so_fixed_zip_timestamps_keep_it_valid(tmp_path):
    root = _tree(tmp_path / "stage")
    build_zip.compile_bytecode(root, sys.executable, _running_version())
    pyc = next((root / "pkg" / "__pycache__").glob("__init__.*.pyc"))
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b01  # hash-based, source not checked (PEP 552)


def test_bytecode_needs_the_runtime_python_version(tmp_path):
    root = _tree(tmp_path / "stage")
    with pytest.raises(build_zip.BuildError, match=r"bytecode needs 2\.7"):
        build_zip.compile_bytecode(root, sys.executable, "2.7")
    assert not (root / "pkg" / "__pycache__").exists()


def _fake_python(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_a_python_on_path_that_cannot_run_is_skipped_with_the_reason(tmp_path, monkeypatch):
    # What a pyenv shim does for a version that is installed but not selected.
    _fake_python(tmp_path, "python3.12", "echo 'pyenv: python3.12: command not found' >&2; exit 127")
    monkeypatch.setenv("PATH", str(tmp_path))
    interpreter, why_not = build_zip.default_interpreter("3.12")
    assert interpreter is None
    assert why_not == (
        f"cannot run {tmp_path / 'python3.12'} to compile bytecode: pyenv: python3.12: command not found"
    )


def test_a_python_on_path_of_another_version_is_skipped(tmp_path, monkeypatch):
    _fake_python(tmp_path, "python3.12", "echo 3.11")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build_zip.default_interpreter("3.12") == (None, f"{tmp_path / 'python3.12'} reports Python 3.11")


def test_a_python_on_path_that_runs_and_reports_the_version_is_used(tmp_path, monkeypatch):
    script = _fake_python(tmp_path, f"python{_running_version()}", f'exec "{sys.executable}" "$@"')
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build_zip.default_interpreter(_running_version()) == (str(script), "")


def test_no_python_on_path_skips_bytecode_but_a_failing_explicit_one_stops_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build_zip.default_interpreter("3.12") == (None, "no python3.12 on PATH")
    with pytest.raises(build_zip.BuildError, match="cannot run"):
        build_zip.compile_bytecode(_tree(tmp_path / "stage"), str(tmp_path / "missing"), "3.12")


def test_dockerfile_compiles_the_function_package_after_copying_it():
    instructions = _instructions()
    copy = instructions.index(("COPY", "function/ ${LAMBDA_TASK_ROOT}/function/"))
    compiles = [i for i, (op, args) in enumerate(instructions) if op == "RUN" and "compileall" in args]
    assert compiles and compiles[0] > copy
    assert "unchecked-hash" in instructions[compiles[0]][1]
