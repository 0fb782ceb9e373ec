# Two entry points: `make demo` and `make test`. Each builds .venv from nothing on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CACHE  := .cache
DEMO   := demo
WHISPER_SDIST := openai-whisper==20250625
# whisper's tokenizer vocabulary and mel filters; the wheel's code (and its torch import) is never used.
ASSETS := $(CACHE)/whisper-assets
export COSYVOICE_WHISPER_ASSETS := $(abspath $(ASSETS))

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed $(ASSETS)/multilingual.tiktoken

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: this machine has the CPU build on disk; anything else pulls a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[function,export,test]'
	# The upstream reference for the parity tests; --no-deps keeps its GPU-leaning requirements out.
	$(BIN)/pip install -q --no-deps cosyvoice-minicpmo==0.1.0
	touch $@

$(ASSETS)/multilingual.tiktoken: | $(VENV)/.installed
	mkdir -p $(CACHE)/sdist $(ASSETS)
	$(BIN)/pip download -q --no-deps --no-binary :all: $(WHISPER_SDIST) -d $(CACHE)/sdist
	$(BIN)/python -m export.assets extract $(CACHE)/sdist $(ASSETS)

# The demo model's weights are random: the pipeline is real, the audio is noise.
demo: setup
	rm -rf $(DEMO)
	$(BIN)/python -m export fake --size tiny $(DEMO)/model
	$(BIN)/python -m export $(DEMO)/model $(DEMO)/artifact
	# An API Gateway (HTTP API) event through the real Lambda runtime client, INIT included.
	$(BIN)/python -m function invoke events/http-api-tts.json --artifacts $(DEMO)/artifact --save $(DEMO)/hello.wav
	@echo "wrote $(DEMO)/hello.wav (random weights: expect noise)"

test: setup lint
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check function export infra tests bench
	$(BIN)/mypy function export

clean:
	rm -rf $(DEMO) $(CACHE) build *.egg-info

# Side-by-side benchmarks on full-size random weights (built on first use): tables on stdout, JSON and
# bench/results/summary.md + phases.png. First run ~20 minutes on 2 cores (model + three artifacts ~4.5, then
# the measurements ~15); see bench/__main__.py.
bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	test -f $(CACHE)/full/model/cosyvoice.yaml || $(BIN)/python -m export fake --size full $(CACHE)/full/model
	test -f $(CACHE)/full/artifact/manifest.json || $(BIN)/python -m export $(CACHE)/full/model $(CACHE)/full/artifact
	# Quantised variants for the speed table (~1 min each): LLM int8 or int4, the flow's MatMuls int8.
	# Their quality against fp32 is not what this measures, and reporting it takes ~50 s per export.
	for weights in int8 int4; do \
	  test -f $(CACHE)/full/artifact-$$weights/manifest.json || \
	    $(BIN)/python -m export $(CACHE)/full/model $(CACHE)/full/artifact-$$weights \
	      --llm-weights $$weights --flow-weights int8 --no-quality-report || exit 1; \
	done
	$(BIN)/python -m bench all
