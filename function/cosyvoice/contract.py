"""The ONNX contract: what the exporter writes and the runtime reads, written down once.

Graph names, input/output names, dtypes and axis labels live here; the exporter imports this module to
name what it exports, the runtime binds inputs by these names, and the tests check both sides against it.
Concrete sizes (80 mels, 4097 logits, ...) depend on the model configuration: axis labels here are
strings, and the manifest records the concrete shapes read back from each exported graph.

Each model part owns one section below (LLM, flow, vocoder, front-end models).
"""

from __future__ import annotations

from dataclasses import dataclass

FORMAT_VERSION = 5  # 2: graphs list their tensors in weights.bin; 3: llm_positions, 2-kind decode rows;
# 4: the flow estimator without a frame mask; 5: the decode step takes a batch of rows
OPSET = 17
MANIFEST_FILE = "manifest.json"
WEIGHTS_FILE = "weights.bin"
# Every external tensor starts on a 64 KiB boundary: a multiple of any page size Linux/arm64 uses, so
# each tensor can be mapped (or madvise'd) on its own.
WEIGHT_ALIGNMENT = 64 * 1024
# Tensors smaller than this stay inside their graph file: aligning a 4 KiB bias to 64 KiB wastes 60 KiB.
INLINE_LIMIT = 64 * 1024
TOKENIZER_FILE = "multilingual.tiktoken"


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: its name, numpy dtype name and axis labels (int = fixed size)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...]

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: dict) -> TensorSpec:
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]))


@dataclass(frozen=True)
class GraphSpec:
    """One ONNX graph of the artifact."""

    name: str
    role: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    @property
    def file(self) -> str:
        return f"{self.name}.onnx"

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [spec.name for spec in self.outputs]


def _t(name: str, dtype: str, *shape: int | str) -> TensorSpec:
    return TensorSpec(name, dtype, tuple(shape))


# --- LLM (TransformerLM): prefill over the whole prefix, then one speech token per decode step --------
# The decode step reads per-layer cache buffers in place (head-major, `capacity` rows of which the first
# `past_len` are valid) and writes the new key and value rows into them: each present_* output is bound to
# its past_* input's memory (onnxruntime's GroupQueryAttention then shares the buffer). Per-layer inputs
# are what makes this copy-free: slicing one stacked cache inside a graph copies it every step.
# Cache kinds per layer: key, value, and the layer's linear_pos(pe(r))/√d_k rows for distances r = 0, 1, ...
# Prefill returns all three for its prefix; a decode step writes only the key and value rows
# (LLM_STEP_KINDS). Position rows depend on nothing but the distance, so llm_positions computes them
# ahead of the steps, a block of distances in one matrix product, instead of one GEMV per layer per step.
LLM_CACHE_KINDS = ("key", "value", "pos")
LLM_STEP_KINDS = LLM_CACHE_KINDS[:2]


def llm_cache_input(kind: str, layer: int) -> str:
    return f"past_{kind}_{layer}"


def llm_cache_output(kind: str, layer: int) -> str:
    """The decode output that is `kind`'s cache of `layer` after the step (LLM_STEP_KINDS only)."""
    return f"present_{kind}_{layer}"


LLM_PREFILL = GraphSpec(
    name="llm_prefill",
    role="llm",
    inputs=(
        _t("text_tokens", "int64", 1, "text_len"),  # prompt text + text, whisper BPE ids
        _t("speaker_embedding", "float32", "n_speaker", "spk_dim"),  # n_speaker 0 (instruct) or 1
        _t("prompt_speech_tokens", "int64", 1, "prompt_len"),  # prompt_len may be 0
    ),
    outputs=(
        _t("logp", "float32", 1, "speech_vocab"),  # log-probabilities of the next token, EOS last
        _t("cache", "float32", "layers", 3, "heads", "prefix_len", "head_dim"),  # kinds as LLM_CACHE_KINDS
    ),
)


LLM_POSITIONS = GraphSpec(
    name="llm_positions",
    role="llm",
    inputs=(_t("distances", "int64", "count"),),  # r ≥ 0
    outputs=(_t("rows", "float32", "layers", "heads", "count", "head_dim"),),  # linear_pos(pe(r))/√d_k
)


def llm_decode_spec(layers: int) -> GraphSpec:
    """The decode graph of an LLM with `layers` decoder blocks (the released model has 14).

    One step decodes `batch` independent sequences (rows) at once, each at its own position: row b's new
    token goes to position past_len[b], and its key and value caches hold rows < past_len[b] (the rest
    of the capacity is unread). The decoder's weights are read once per step whatever the batch, which is
    what a batch gains over separate steps. Key and value caches are GroupQueryAttention's layout
    [batch, heads, capacity, head_dim]. A step at position t reads past_pos rows for distances 0..t: the
    runtime fills them ahead. Position rows depend on the distance alone, so every row of the batch reads
    the same ones; they come distance last, so a head's position scores are one matrix product without a
    transpose."""

    def cache(kind: str, name: str) -> TensorSpec:
        if kind in LLM_STEP_KINDS:
            return _t(name, "float32", "batch", "heads", "capacity", "head_dim")
        return _t(name, "float32", "heads", "head_dim", "capacity")

    inputs = tuple(
        cache(kind, llm_cache_input(kind, layer)) for layer in range(layers) for kind in LLM_CACHE_KINDS
    )
    presents = tuple(
        cache(kind, llm_cache_output(kind, layer)) for layer in range(layers) for kind in LLM_STEP_KINDS
    )
    return GraphSpec(
        name="llm_decode",
        role="llm",
        inputs=(_t("token", "int64", "batch", 1), _t("past_len", "int64", "batch"), *inputs),
        outputs=(_t("logp", "float32", "batch", "speech_vocab"), *presents),
    )


LLM_DECODE = llm_decode_spec(14)

# --- Flow (MaskedDiffWithXvec): tokens -> mu, then the flow-matching estimator ------------------------
FLOW_ENCODER = GraphSpec(
    name="flow_encoder",
    role="flow",
    inputs=(
        _t("speech_tokens", "int64", 1, "token_len"),  # prompt tokens followed by new tokens
        _t("prompt_token_len", "int64"),
        _t("prompt_mel_len", "int64"),
        _t("mel_len", "int64"),  # frames for the new tokens
        _t("speaker_embedding", "float32", 1, "spk_dim"),
    ),
    outputs=(
        _t("mu", "float32", 1, "n_mels", "total_mel_len"),
        _t("spks", "float32", 1, "n_mels"),
    ),
)
FLOW_ESTIMATOR = GraphSpec(
    name="flow_estimator",
    role="flow",
    inputs=(
        _t("x", "float32", "batch", "n_mels", "mel_len"),  # every frame real: no padding, no mask
        _t("mu", "float32", "batch", "n_mels", "mel_len"),
        _t("t", "float32", "batch"),
        _t("spks", "float32", "batch", "n_mels"),
        _t("cond", "float32", "batch", "n_mels", "mel_len"),
    ),
    outputs=(_t("velocity", "float32", "batch", "n_mels", "mel_len"),),
)

# --- Vocoder (HiFTGenerator): mel -> f0; numpy builds the harmonic source (so its phase can carry across
# stream chunks); mel + source -> iSTFT magnitude and phase; the iSTFT runs in numpy -----------------------
HIFT_F0 = GraphSpec(
    name="hift_f0",
    role="vocoder",
    inputs=(_t("mel", "float32", 1, "n_mels", "mel_len"),),
    outputs=(_t("f0", "float32", 1, "mel_len"),),
)
HIFT_GENERATOR = GraphSpec(
    name="hift_generator",
    role="vocoder",
    inputs=(
        _t("mel", "float32", 1, "n_mels", "mel_len"),
        _t("sine_waves", "float32", 1, "samples", "n_sines"),  # SineGen output + noise; mel_len·256 samples
    ),
    outputs=(
        _t("magnitude", "float32", 1, "n_bins", "frames"),  # exp(·) clipped at 1e2; frames = samples/hop + 1
        _t("phase", "float32", 1, "n_bins", "frames"),  # sin(·), used as the phase angle, as upstream does
    ),
)

# --- Front-end models shipped with the release, copied through unchanged ------------------------------
CAMPPLUS = GraphSpec(
    name="campplus",
    role="speaker_encoder",
    inputs=(_t("input", "float32", 1, "frames", 80),),  # Kaldi fbank at 16 kHz, mean-normalised
    outputs=(_t("output", "float32", 1, 192),),
)
SPEECH_TOKENIZER = GraphSpec(
    name="speech_tokenizer_v1",
    role="speech_tokenizer",
    inputs=(_t("feats", "float32", 1, 128, "frames"), _t("feats_length", "int32", 1)),
    outputs=(_t("indices", "int32", 1, "tokens"),),
)

# Graphs every artifact has, and the optional ones (present when the model directory ships them).
CORE_GRAPHS: tuple[GraphSpec, ...] = (
    LLM_PREFILL,
    LLM_DECODE,
    LLM_POSITIONS,
    FLOW_ENCODER,
    FLOW_ESTIMATOR,
    HIFT_F0,
    HIFT_GENERATOR,
)
OPTIONAL_GRAPHS: tuple[GraphSpec, ...] = (CAMPPLUS, SPEECH_TOKENIZER)
GRAPHS: dict[str, GraphSpec] = {spec.name: spec for spec in CORE_GRAPHS + OPTIONAL_GRAPHS}
