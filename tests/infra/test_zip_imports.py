"""The trimmed zip tree runs the Lambda handler: staged for real (pip fetches the Lambda wheels), compiled,
then imported and invoked by a CPython of the runtime's version with only that tree and the standard
library on sys.path, as /var/task is in the python3.12 runtime. Covers the SnapStart path: INIT with the
web stack and S3 client, the before-snapshot warm-up, the after-restore hooks, then an HTTP and a direct
event on the tiny artifact.

Needs a python3.12 that runs (a working one on PATH, or COSYVOICE_PYTHON312=/path/to/python3.12) and
PyPI; skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest

from infra import build_zip

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_VERSION = "3.12"
PYTHON = os.environ.get("COSYVOICE_PYTHON312") or build_zip.default_interpreter(RUNTIME_VERSION)[0]
ARCH = {"x86_64": "x86_64", "aarch64": "arm64"}.get(platform.machine())

pytestmark = [
    pytest.mark.skipif(PYTHON is None, reason="needs a python3.12 that runs (PATH or COSYVOICE_PYTHON312)"),
    pytest.mark.skipif(ARCH is None, reason=f"no Lambda architecture runs on {platform.machine()}"),
]

# Run inside the staged tree by the runtime's Python (-I -S: no site-packages, no PYTHONPATH).
SCRIPT = """
import base64, json, sys
tree, events = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
import snapshot_restore_py
from function.awslambda import handler  # INIT: model load, web stack, S3 client
for hooks in (snapshot_restore_py.get_before_snapshot(), snapshot_restore_py.get_after_restore()):
    for func, args, kwargs in hooks:
        func(*args, **kwargs)
with open(events + "/http-api-tts.json", encoding="utf-8") as f:
    http = handler.lambda_handler(json.load(f), None)
with open(events + "/direct-tts.json", encoding="utf-8") as f:
    direct = handler.lambda_handler(json.load(f), None)
url = handler.s3_client().generate_presigned_url("get_object", Params={"Bucket": "audio-bucket", "Key": "k"})
# jobs continue through the queue: botocore's SQS model must be there
from function.aws.clients import sqs_client
from function.awslambda.streaming import function_url, runtime  # StreamingUrl=enabled starts this instead
stdlib = (sys.base_prefix, sys.base_exec_prefix)
outside = sorted(
    name for name, module in list(sys.modules.items())
    if getattr(module, "__file__", None) and not module.__file__.startswith((tree, *stdlib))
)
print(json.dumps({
    "version": "%d.%d" % sys.version_info[:2],
    "http": [http["statusCode"], http["headers"]["content-type"], http["isBase64Encoded"]],
    "direct": sorted(direct),
    "wav": base64.b64decode(direct.get("audio", ""))[:4].decode("latin-1"),
    "presigned": url.split("?", 1)[0],
    "outside": outside,
    "local": [name for name in sys.modules if name.startswith("function.local")],
    "normaliser": "kaldifst" in sys.modules,  # the text went through the wetext graphs
    "sqs": sqs_client().meta.service_model.service_name,
}))
"""


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert PYTHON is not None and ARCH is not None
    root = tmp_path_factory.mktemp("zip") / "stage"
    try:
        build_zip.stage(root, ARCH, RUNTIME_VERSION, ROOT / "pyproject.toml", ROOT / "function")
    except build_zip.BuildError as exc:
        pytest.skip(f"cannot fetch the Lambda wheels: {exc}")
    build_zip.compile_bytecode(root, PYTHON, RUNTIME_VERSION)
    return root


def test_trimmed_tree_runs_the_snapstart_path_and_both_event_kinds(staged: Path, tiny_artifact: Path) -> None:
    assert not (staged / "function" / "local").exists() and not (staged / "uvicorn").exists()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_LAMBDA_INITIALIZATION_TYPE": "snap-start",
        "COSYVOICE_ARTIFACT": str(tiny_artifact),
        "COSYVOICE_OUTPUT_BUCKET": "audio-bucket",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    assert PYTHON is not None
    result = subprocess.run(
        [PYTHON, "-I", "-S", "-c", SCRIPT, str(staged), str(ROOT / "events")],
        capture_output=True, text=True, env=env, cwd=staged, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["version"] == RUNTIME_VERSION
    assert report["http"] == [200, "audio/wav", True]
    assert report["direct"] == ["audio", "content_type", "format", "sample_rate"]
    assert report["wav"] == "RIFF"
    # botocore's endpoint rules (kept: the s3 data) pick virtual-hosted or path style
    bucket_and_key = r"https://(audio-bucket\.)?s3[.\w-]*\.amazonaws\.com/(audio-bucket/)?k"
    assert re.fullmatch(bucket_and_key, report["presigned"]) and "audio-bucket" in report["presigned"]
    assert report["outside"] == [], "modules imported from outside the zip tree"
    assert report["local"] == []
    assert report["normaliser"] is True
    assert report["sqs"] == "sqs"
