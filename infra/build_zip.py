"""Build the Lambda deployment zip (the SnapStart variant) without Docker.

    python -m infra.build_zip --arch x86_64            # -> build/lambda.zip
    python -m infra.build_zip --arch arm64 --out build/lambda-arm64.zip

pip fetches the runtime requirements (pyproject.toml, via `infra.requirements`) as manylinux wheels for
CPython 3.12 on the chosen architecture, whatever this machine runs; the `function/` package is added
(never `export/`, never torch); what the Lambda handler never imports or reads is dropped (`trim`: test
suites, onnxruntime's tooling, the local server, botocore's other services, unused text graphs); then
everything is zipped. The build fails if the unzipped size exceeds Lambda's 250 MB limit, because the
deploy would fail later with a less helpful message.

Bytecode: /var/task is read-only, so a zip without .pyc files makes every cold start compile every module
it imports (the handler's imports then take several times as long: `python -X importtime` shows it). When
an interpreter of the runtime's version is found (--compile-with, or a `python3.12` on PATH that runs and
reports 3.12), the staged tree is compiled with it, hash-based and unchecked: the zip's fixed timestamps
would otherwise invalidate timestamp-based .pyc files. Without one the zip ships sources only and says so;
the SnapStart variant then pays the compilation once, before its snapshot, rather than on every restore.

The zip is reproducible (sorted entries, fixed timestamps): an unchanged build uploads under the same
content hash, so `sam deploy` publishes no new version and takes no new SnapStart snapshot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from function.cosyvoice.frontend.fst import GRAPH_FILES
from infra.requirements import runtime_requirements

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "function"
# template.yaml's ZipFunction CodeUri names this file (relative to the repository root).
DEFAULT_ZIP = ROOT / "build" / "lambda.zip"
# "250 MB" in the Lambda quotas is 250 MiB: 262,144,000 bytes, function code plus layers, unzipped.
UNZIPPED_LIMIT = 250 * 1024 * 1024
# The python3.12 runtime runs on Amazon Linux 2023 (glibc 2.34). pip does not widen a manylinux_2_X
# platform to older glibc versions by itself, so every tag the runtime accepts is listed.
GLIBC_MINORS = range(17, 35)
ARCHES = ("x86_64", "arm64")
_WHEEL_ARCH = {"x86_64": "x86_64", "arm64": "aarch64"}
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


class BuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class ZipReport:
    path: Path
    files: int
    unzipped_bytes: int
    zipped_bytes: int


def platform_tags(arch: str) -> list[str]:
    wheel_arch = _WHEEL_ARCH[arch]
    return [f"manylinux2014_{wheel_arch}"] + [f"manylinux_2_{minor}_{wheel_arch}" for minor in GLIBC_MINORS]


def pip_command(requirements: list[str], target: Path, arch: str, python_version: str) -> list[str]:
    """pip install of binary wheels for the Lambda platform into `target` (nothing is built from source)."""
    platforms = [arg for tag in platform_tags(arch) for arg in ("--platform", tag)]
    return [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-warn-conflicts", "--only-binary=:all:",
        "--implementation", "cp", "--python-version", python_version,
        *platforms,
        # /var/task is read-only and the host's bytecode is for another interpreter: ship sources only.
        "--no-compile",
        "--target", str(target),
        *requirements,
    ]  # fmt: skip


# What the Lambda handler never imports or reads, relative to the staged root (globs). Its import path is
# function.awslambda.handler → the engine (numpy, onnxruntime, soundfile, tiktoken, kaldifst + wetext's graph
# files), boto3 for S3, and FastAPI + Mangum for HTTP events; tests/infra/test_zip_imports.py runs that
# path on the trimmed tree.
UNUSED = (
    "bin",  # console scripts: Lambda calls the handler, never a command
    # onnxruntime's model-optimisation tooling (the exporter uses it, with torch); inference is capi/
    "onnxruntime/transformers",
    "onnxruntime/quantization",
    "onnxruntime/tools",
    "function/local",  # `python -m function serve` / `invoke`: local serving and the local runtime
    # numpy's tools for building against it: Fortran wrappers, C headers, a PyInstaller hook
    "numpy/f2py",
    "numpy/_core/include",
    "numpy/_pyinstaller",
    "**/tests",  # the packages' own test suites (numpy's alone is ~14 MB)
    "**/*.pyi",  # type stubs
)
# Whole distributions the handler never imports: their top-level paths (globs), metadata included.
UNUSED_DISTRIBUTIONS = {
    # only onnxruntime's tooling imports protobuf (the inference library links its own C++ copy)
    "protobuf": ("google",),
    # the local HTTP server: in Lambda, Mangum calls the ASGI app
    "uvicorn": ("uvicorn",),
    "click": ("click",),
    "h11": ("h11",),
    # wetext's Python side: function.cosyvoice.frontend.fst reads its graph files and imports none of it
    "contractions": ("contractions", "data"),
    "textsearch": ("textsearch",),
    "anyascii": ("anyascii",),
    "pyahocorasick": ("ahocorasick.*",),
    # soundfile's bindings come compiled (_soundfile.py on _cffi_backend, which stays); cffi's Python
    # half and pycparser only generate bindings
    "cffi": ("cffi",),
    "pycparser": ("pycparser",),
}
# botocore describes every AWS service (~28 MB of JSON), boto3 the resources of some; a client needs only
# its own service's directory and the shared files at the top of data/. The function creates these
# clients (function/aws/clients.py).
AWS_SERVICES = frozenset({"s3", "sqs", "sns"})
_SERVICE_DATA = ("botocore/data", "boto3/data")


def trim(root: Path) -> list[Path]:
    """Delete from the staged tree what the function never reads, and return what was deleted: `UNUSED`,
    `UNUSED_DISTRIBUTIONS`, boto3's and botocore's data for services other than `AWS_SERVICES`, and the
    wetext wheel's graphs other than the zh/en TN ones `function.cosyvoice.frontend.fst` reads (Japanese,
    inverse
    normalisation: ~32 MB)."""
    patterns = list(UNUSED)
    for distribution, paths in UNUSED_DISTRIBUTIONS.items():
        patterns += [*paths, f"{distribution.replace('-', '_')}-*.dist-info"]
    dropped = {path for pattern in patterns for path in root.glob(pattern)}
    for data in (root / part for part in _SERVICE_DATA if (root / part).is_dir()):
        dropped |= {path for path in data.iterdir() if path.is_dir() and path.name not in AWS_SERVICES}
    keep = {root / "wetext" / name for name in GRAPH_FILES}
    dropped |= {path for path in (root / "wetext" / "fsts").rglob("*.fst") if path not in keep}
    # Sorted, so a directory goes before anything it holds: what it held is already gone then.
    removed = sorted(dropped)
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return removed


def copy_package(source: Path, target: Path) -> None:
    shutil.copytree(source, target / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def stage(target: Path, arch: str, python_version: str, pyproject: Path, package: Path) -> None:
    """Fill an empty `target` with the wheels' contents and the function package."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    requirements = runtime_requirements(pyproject)
    result = subprocess.run(pip_command(requirements, target, arch, python_version), check=False)
    if result.returncode != 0:
        raise BuildError(f"pip could not install the runtime requirements for {arch}: {requirements}")
    copy_package(package, target)
    trim(target)


def interpreter_version(interpreter: str) -> str:
    try:
        result = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"cannot run {interpreter} to compile bytecode: {exc}") from exc
    if result.returncode != 0:
        message = (result.stderr.strip() or f"exit status {result.returncode}").splitlines()[0]
        raise BuildError(f"cannot run {interpreter} to compile bytecode: {message}")
    return result.stdout.strip()


def default_interpreter(python_version: str) -> tuple[str | None, str]:
    """The `pythonX.Y` on PATH if it runs and is that version, else None and why not. Being on PATH is
    not enough: a pyenv shim for a version that is installed but not selected is found, then exits 127."""
    name = f"python{python_version}"
    found = shutil.which(name)
    if found is None:
        return None, f"no {name} on PATH"
    try:
        version = interpreter_version(found)
    except BuildError as exc:
        return None, str(exc)
    if version != python_version:
        return None, f"{found} reports Python {version}"
    return found, ""


def compile_bytecode(root: Path, interpreter: str, python_version: str) -> None:
    """Compile every module under `root` with `interpreter`, which must be the runtime's Python version
    (bytecode is version-specific). Unchecked hashes: the .pyc stays valid whatever the files' mtimes."""
    found = interpreter_version(interpreter)
    if found != python_version:
        raise BuildError(f"{interpreter} is Python {found}; the runtime's bytecode needs {python_version}")
    command = [interpreter, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
    result = subprocess.run([*command, str(root)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"compileall failed: {(result.stdout + result.stderr).strip()[-500:]}")


def tree_files(root: Path) -> list[Path]:
    """Every regular file under root, in a stable order (the zip's entry order)."""
    return sorted(path for path in root.rglob("*") if path.is_file() and not path.is_symlink())


def unzipped_size(root: Path) -> int:
    return sum(path.stat().st_size for path in tree_files(root))


def largest_parts(root: Path, count: int = 8) -> list[tuple[str, int]]:
    """The biggest top-level entries, to say what to cut when the limit is exceeded."""
    sizes = {}
    for child in root.iterdir():
        sizes[child.name] = unzipped_size(child) if child.is_dir() else child.stat().st_size
    return sorted(sizes.items(), key=lambda item: item[1], reverse=True)[:count]


def check_size(root: Path, limit: int = UNZIPPED_LIMIT) -> int:
    size = unzipped_size(root)
    if size > limit:
        parts = ", ".join(f"{name} {bytes_ / 1e6:.1f} MB" for name, bytes_ in largest_parts(root))
        raise BuildError(
            f"unzipped package is {size / 1e6:.1f} MB, over Lambda's limit of {limit / 1e6:.1f} MB;"
            f" largest parts: {parts}"
        )
    return size


def write_zip(root: Path, out: Path) -> ZipReport:
    """Zip `root` reproducibly: same tree, same bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    files = tree_files(root)
    total = 0
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in files:
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_EPOCH)
            executable = os.access(path, os.X_OK)
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            data = path.read_bytes()
            total += len(data)
            archive.writestr(info, data)
    partial.replace(out)
    return ZipReport(out, len(files), total, out.stat().st_size)


def build(
    arch: str,
    out: Path,
    work: Path,
    python_version: str,
    pyproject: Path,
    package: Path,
    compile_with: str | None,
) -> ZipReport:
    stage(work, arch, python_version, pyproject, package)
    if compile_with:
        compile_bytecode(work, compile_with, python_version)
    check_size(work)
    return write_zip(work, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.build_zip", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--arch", choices=ARCHES, default="x86_64", help="must match the template's Architecture"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_ZIP)
    parser.add_argument("--work", type=Path, help="staging directory (default build/zip-ARCH)")
    parser.add_argument("--python-version", default="3.12", help="the Lambda runtime's Python")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument(
        "--compile-with", help="interpreter of the runtime's version for .pyc (default: pythonX.Y on PATH)"
    )
    args = parser.parse_args(argv)
    work = args.work or ROOT / "build" / f"zip-{args.arch}"
    # An explicit --compile-with that cannot run fails the build; a failing default only skips bytecode.
    compile_with = args.compile_with
    if compile_with is None:
        compile_with, why_not = default_interpreter(args.python_version)
        if compile_with is None:
            print(
                f"note: skipping bytecode ({why_not}; pass --compile-with): the zip ships sources only,"
                " so imports compile at every cold start (SnapStart: once, before the snapshot)",
                file=sys.stderr,
            )
    try:
        report = build(
            args.arch, args.out, work, args.python_version, args.pyproject, ROOT / PACKAGE, compile_with
        )
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"{report.path}: {args.arch}, {report.files} files, {report.unzipped_bytes / 1e6:.1f} MB unzipped"
        f" (limit {UNZIPPED_LIMIT / 1e6:.1f} MB), {report.zipped_bytes / 1e6:.1f} MB zipped"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
