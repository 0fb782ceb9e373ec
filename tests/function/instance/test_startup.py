"""INIT starts the model load on a thread of its own, imports the handler meanwhile and joins the load:
the join hands over the engine or raises the load's own error, and the startup record stays honest."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from function.core.errors import ArtifactError
from function.instance import model, startup
from function.instance.settings import Settings
from function.local.invoke import LocalLambda, RuntimeFailed
from tests.function.support import HANDLER, clean_env

MAIN_LANE = ["process", "runtime_import", "handler_init", "load_wait", "ready"]


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch) -> startup.StartupRecord:
    """A process state with nothing loaded yet, and a startup record of its own."""
    fresh = startup.StartupRecord()
    monkeypatch.setattr(startup, "STARTUP", fresh)
    monkeypatch.setattr(model, "_engine", None)
    monkeypatch.setattr(model, "_loader", None)
    monkeypatch.setattr(model, "get_settings", lambda: Settings(artifact="unused", warmup=False))
    return fresh


def test_start_loading_returns_while_the_model_loads_and_get_engine_joins(
    record: startup.StartupRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, engine = threading.Event(), object()

    def create(settings: Settings, warm_up: bool, verify_hashes: bool) -> Any:
        with record.phase("session_creation"):
            if not release.wait(timeout=10):  # a synchronous start_loading would wait here, then fail
                raise TimeoutError("start_loading waited for the load")
        return engine

    monkeypatch.setattr(model, "_create", create)
    model.start_loading()
    assert model.loaded_engine() is None  # still loading
    time.sleep(0.05)  # the handler's own INIT work
    release.set()
    assert model.get_engine() is engine
    assert model.loaded_engine() is engine
    assert [name for name in record.phases if name not in record.concurrent] == MAIN_LANE
    assert record.concurrent == ["session_creation"]
    assert record.phases["handler_init"] >= 0.05
    lane = sum(record.phases[name] for name in MAIN_LANE[:-1])
    assert lane == pytest.approx(record.phases["ready"], abs=1e-4)  # the main thread's laps tile INIT


def test_a_failed_background_load_raises_its_own_error_when_joined(
    record: startup.StartupRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    def create(settings: Settings, warm_up: bool, verify_hashes: bool) -> Any:
        raise ArtifactError("graph flow_estimator could not be loaded: broken")

    monkeypatch.setattr(model, "_create", create)
    model.start_loading()
    with pytest.raises(ArtifactError, match="flow_estimator") as failure:
        model.get_engine()
    assert "create" in [frame.name for frame in traceback.extract_tb(failure.tb)]  # the loader's frames
    assert model.loaded_engine() is None
    assert "ready" not in record.phases


def test_a_graph_that_fails_to_load_fails_init_with_its_name(tiny_artifact: Path, tmp_path: Path) -> None:
    broken = tmp_path / "artifact"
    broken.mkdir()
    for path in tiny_artifact.iterdir():
        (broken / path.name).symlink_to(path)
    graph = broken / "flow_estimator.onnx"
    size = graph.stat().st_size
    graph.unlink()
    graph.write_bytes(b"\0" * size)  # the size the manifest expects, but no ONNX model: sessions fail
    runtime = LocalLambda(clean_env(COSYVOICE_ARTIFACT=str(broken)), handler=HANDLER, timeout=120)
    with runtime, pytest.raises(RuntimeFailed):  # the runtime exits: no hang, no later error
        runtime.wait_init()
    (error,) = [json.loads(body) for body in runtime.api.init_errors]
    assert "flow_estimator" in error["errorMessage"]  # onnxruntime's own words, naming the graph file
    assert any("_create" in frame for frame in error["stackTrace"])  # raised by the background load
    assert runtime.log_records("init") == []


@pytest.mark.parametrize(
    ("init_type", "web_stack_at_init"),
    [("on-demand", False), ("provisioned-concurrency", True), ("snap-start", True)],
)
def test_the_web_stack_loads_at_init_only_where_no_caller_waits(
    tiny_artifact: Path, init_type: str, web_stack_at_init: bool
) -> None:
    code = (
        "import sys, function.awslambda.handler\n"
        "at_init = 'fastapi' in sys.modules\n"
        "function.awslambda.handler._http_adapter()\n"
        "print(at_init, 'fastapi' in sys.modules)\n"
    )
    env = {
        **clean_env(),
        "COSYVOICE_ARTIFACT": str(tiny_artifact),
        "COSYVOICE_WARMUP": "0",
        "AWS_LAMBDA_INITIALIZATION_TYPE": init_type,
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=Path(__file__).parents[3], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == [str(web_stack_at_init), "True"]
