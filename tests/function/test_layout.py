"""The package's layout as a rule on its import graph: the engine is a library, and imports run one way.

Every import counts, including those made inside functions and under TYPE_CHECKING: a lazy import is
still a dependency, only a later one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "function"

# From the ground up: each package may import itself and those before it, never one after it.
LAYERS = (
    "core",
    "cosyvoice",
    "audio",
    "markup",
    "aws",
    "voices",
    "instance",
    "observe",
    "service",
    "http",
    "jobs",
    "polly",
    "api",
    "awslambda",
    "cli",
    "local",
)
# The edges: each translates its wire format, and reaches the engine only through function.service.synthesis.
# `http` is what the HTTP edges share (the caller, request bodies, streamed replies); `polly` is an edge
# the API assembles, so it sits below `api`, beside the job routes.
EDGES = ("http", "jobs", "polly", "api", "awslambda", "cli", "local")
# What synthesises: the engine's entry points, and the steps the service path takes once for every edge
# (a saved voice turned into its features, the engine's items split into audio and marks).
ENGINE_CALLS = {"speak", "prepare", "synthesize", "conditioning", "model_inputs", "segments"}
SERVICE_STEPS = {
    "function.voices.library": {"names_saved_voice"},
    "function.markup.marks": {"MarkCollector", "drawn_to_first_audio"},
}
# What the engine may use beyond the standard library: its computing stack, nothing of a service.
ENGINE_LIBRARIES = {"numpy", "onnxruntime", "soundfile", "tiktoken", "kaldifst"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, module: str) -> set[str]:
    """Every module that `path` (the module named `module`) imports, absolute, at any depth of its code."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # `from function.jobs import store`: a submodule imported by name is a dependency on it
            found.update(f"{base}.{alias.name}" for alias in node.names if base.startswith("function"))
    return found


def graph() -> dict[str, set[str]]:
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {
        name: {imported for imported in imports_of(path, name) if imported in modules and imported != name}
        for name, path in modules.items()
    }


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    """The package's import graph, read once for the rules that walk it."""
    return graph()


def upward(edges: dict[str, set[str]], layer: str) -> list[str]:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    return sorted(
        f"{module} imports {imported}"
        for module, imported_modules in edges.items()
        if layer_of(module) == layer
        for imported in imported_modules
        if layer_of(imported) not in allowed
    )


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def test_every_subpackage_is_a_layer_and_the_top_level_is_small() -> None:
    subpackages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert subpackages == set(LAYERS)
    top_modules = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert top_modules == ["__init__.py", "__main__.py"]


@pytest.mark.parametrize("layer", LAYERS)
def test_a_package_imports_only_the_packages_below_it(edges: dict[str, set[str]], layer: str) -> None:
    found = upward(edges, layer)
    assert not found, f"imports that run back up from function.{layer}:\n" + "\n".join(found)


def test_the_engine_knows_nothing_of_http_lambda_s3_or_sqs() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    outside = sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {imported}"
        for folder in ("core", "cosyvoice")
        for path in (PACKAGE / folder).rglob("*.py")
        for imported in imports_of(path, module_name(path))
        if not imported.startswith("function.")
        and imported.partition(".")[0] not in stdlib | ENGINE_LIBRARIES
    )
    assert not outside, "the engine and its core import a service library:\n" + "\n".join(outside)


def test_no_module_imports_itself_back_through_others(edges: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(edges[module]):
            if state.get(imported) == 1:
                cycles.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def synthesis_calls(path: Path, module: str) -> list[str]:
    """Where `path` calls the engine's entry points itself, or takes a step of the service path."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ENGINE_CALLS
        ):
            owner = ast.unparse(node.func.value)
            if "engine" in owner.lower():
                found.append(f"{module}:{node.lineno} calls {owner}.{node.func.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in SERVICE_STEPS:
            taken = {alias.name for alias in node.names} & SERVICE_STEPS[node.module]
            found.extend(f"{module}:{node.lineno} imports {node.module}.{name}" for name in sorted(taken))
    return found


def test_no_edge_calls_the_engine_but_through_the_service_path() -> None:
    found = sorted(
        call
        for edge in EDGES
        for path in (PACKAGE / edge).rglob("*.py")
        for call in synthesis_calls(path, module_name(path))
    )
    assert not found, "edges that synthesise on their own:\n" + "\n".join(found)


def test_the_edge_rule_sees_a_direct_engine_call(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from function.markup.marks import MarkCollector\n"
        "def handler(engine, options):\n    return MarkCollector(engine.speak(engine.prepare(options)))\n"
    )
    found = synthesis_calls(source, "function.api.probe")
    assert found == [
        "function.api.probe:1 imports function.markup.marks.MarkCollector",
        "function.api.probe:3 calls engine.speak",
        "function.api.probe:3 calls engine.prepare",
    ]


def test_the_rule_sees_an_upward_import(tmp_path: Path) -> None:
    """The checks above read what they claim to: an engine module importing the HTTP API is caught."""
    source = tmp_path / "probe.py"
    source.write_text("def later():\n    from ..api.app import app\n    import fastapi\n")
    imported = imports_of(source, "function.cosyvoice.probe")
    assert {"function.api.app", "fastapi"} <= imported
    found = upward(
        {"function.cosyvoice.probe": {name for name in imported if name.startswith("function.")}}, "cosyvoice"
    )
    assert "function.cosyvoice.probe imports function.api.app" in found
