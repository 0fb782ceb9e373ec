# Two entry points: `make demo` and `make test`. Each builds .venv from nothing on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv pip install -q --python $(BIN)/python
CACHE  := .cache
DEMO   := demo
WHISPER_SDIST := openai-whisper==20250625
# whisper's tokenizer vocabulary and mel filters; the wheel's code (and its torch import) is never used.
ASSETS := $(CACHE)/whisper-assets
export COSYVOICE_WHISPER_ASSETS := $(abspath $(ASSETS))

.PHONY: setup demo test lint bench clean
# Independent prerequisites are made side by side (setup's venv and whisper assets); recipes stay in order.
MAKEFLAGS += --jobs=2

setup: $(VENV)/.installed $(ASSETS)/multilingual.tiktoken

# The venv starts without pip: the system's pip installs uv into it (a venv's own pip takes seconds to set
# up), and uv installs everything else, pip too, resolving the same versions as pip in a fraction of its time.
# torch is 2.13.0's CPU build. Where pip's find-links (PIP_FIND_LINKS) hold that wheel, uv installs the file
# itself; elsewhere pip does, whose configuration says where the CPU build comes from (uv would take PyPI's
# CUDA build). The project's own install keeps the torch it finds, and compiles the bytecode of what it
# installs on every CPU at once. torch's is written by the first imports instead: the tests use about a third
# of its modules, and compiling all of them takes longer than those imports do.
PIP_INTO_VENV := $(PYTHON) -m pip --python $(BIN)/python install -q --no-compile
PYTHON_TAG := $(shell $(PYTHON) -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
TORCH_WHEEL := $(firstword $(wildcard $(addsuffix /torch-2.13.0+cpu-$(PYTHON_TAG)-*.whl,$(PIP_FIND_LINKS))))
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PIP_INTO_VENV) uv
	$(if $(TORCH_WHEEL),$(UV) $(TORCH_WHEEL),$(PIP_INTO_VENV) torch==2.13.0)
	# The upstream reference for the parity tests; --no-deps keeps its GPU-leaning requirements out.
	$(UV) --no-deps cosyvoice-minicpmo==0.1.0
	$(UV) --compile-bytecode pip -e '.[function,export,test]'
	touch $@

# Only the system Python's pip and standard library: fetched while the venv installs (MAKEFLAGS' two jobs).
$(ASSETS)/multilingual.tiktoken:
	mkdir -p $(CACHE)/sdist $(ASSETS)
	$(PYTHON) -m pip download -q --no-deps --no-binary :all: $(WHISPER_SDIST) -d $(CACHE)/sdist
	$(PYTHON) -m export assets $(CACHE)/sdist $(ASSETS)

# The demo model's weights are random: the pipeline is real, the audio is noise.
demo: setup
	rm -rf $(DEMO)
	$(BIN)/python -m export fake --size tiny $(DEMO)/model
	$(BIN)/python -m export $(DEMO)/model $(DEMO)/artifact
	# An API Gateway (HTTP API) event through the real Lambda runtime client, INIT included.
	$(BIN)/python -m function invoke events/http-api-tts.json --artifacts $(DEMO)/artifact --save $(DEMO)/hello.wav
	@echo "wrote $(DEMO)/hello.wav (random weights: expect noise)"

# Tests run in one worker process per CPU (pytest-xdist); TEST_WORKERS=0 runs them in this one. The workers
# take whole test files, longest first (tests/conftest.py, tests/durations.json): a module's fixtures (servers,
# engines, upstream models) are made once, and the long files start early. The lint runs beside them at a
# lower priority, in the CPU time the workers leave while they wait on their servers and subprocesses (mypy
# alone is ~18 s from a fresh clone); its output follows the tests'. Both must pass.
# OpenMP's and OpenBLAS's own thread pools (torch in the parity tests, numpy) are held to one thread: their
# threads spin after each call, and with a test worker on every CPU that spinning only takes the other
# worker's CPU. onnxruntime's threads are the engine's own setting and stay as they are.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the tests start
# about a hundred processes of the function, and without it each compiles every module it imports again,
# as each test worker rewrites every test module's asserts again.
TEST_WORKERS ?= auto
test: setup
	@lint_log=$$(mktemp); \
	nice -n 10 $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) lint >$$lint_log 2>&1 & lint=$$!; \
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= \
	  $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; tests=$$?; \
	wait $$lint; linted=$$?; cat $$lint_log; rm -f $$lint_log; \
	test $$linted -eq 0 || echo "make test: the lint failed (above)"; \
	test $$tests -eq 0 -a $$linted -eq 0

lint: setup
	$(BIN)/ruff check function export infra tests bench
	$(BIN)/ruff format --check function export infra tests bench
	$(BIN)/mypy function export bench

clean:
	rm -rf $(DEMO) $(CACHE) build *.egg-info

# Side-by-side benchmarks on full-size random weights (built on first use): tables on stdout, JSON and
# bench/results/summary.md + phases.png. First run 15-22 minutes on 2 cores, by the host's load (model and
# three artifacts ~2.5, then the measurements 11.5-18); see bench/cli.py.
FULL := $(CACHE)/full
BENCH_ARTIFACTS := $(FULL)/artifact $(FULL)/artifact-int8 $(FULL)/artifact-int4
bench: setup
	$(UV) --compile-bytecode -e '.[bench]'
	test -f $(FULL)/model/cosyvoice.yaml || $(BIN)/python -m export fake --size full $(FULL)/model
	# fp32 and the speed table's quantised variants (LLM int8 or int4, the flow's MatMuls and the vocoder's
	# convolutions int8) from one torch export, again when an artifact's format is not the runtime's. Their
	# quality against fp32 is not what this measures; reporting it takes ~50 s each.
	for artifact in $(BENCH_ARTIFACTS); do $(BIN)/python -m bench.current $$artifact || missing=1; done; \
	test -z "$$missing" || $(BIN)/python -m export $(FULL)/model $(FULL)/artifact --force --no-quality-report \
	  --also $(FULL)/artifact-int8:llm=int8,flow=int8,vocoder=int8 \
	  --also $(FULL)/artifact-int4:llm=int4,flow=int8,vocoder=int8
	$(BIN)/python -m bench all
