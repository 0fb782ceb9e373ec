"""What a million characters cost on Lambda at the measured speed, beside the hosted voices' prices.

Lambda bills duration by the GB-second of configured memory, whatever the CPU does, so a request costs
RTF × its audio seconds × MemorySize × the architecture's rate. Audio seconds follow from the characters
at a speaking rate per language. Only duration is counted: Lambda's per-request charge ($0.20 per 1M
requests) and data transfer are left out, as are the hosted services' free tiers.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.tables import Table

PRICES_AS_OF = "2025-06"  # list prices as published then; not re-checked by a run (no network)
LAMBDA_GB_SECOND = {"x86_64": 0.0000166667, "arm64": 0.0000133334}  # us-east-1, first duration tier
HOSTED_PER_MILLION = {
    "Amazon Polly Standard": 4.0,
    "Amazon Polly Neural": 16.0,
    "OpenAI tts-1": 15.0,
}
CHARS_PER_SECOND = {"English": 15.0, "Chinese": 4.5}  # characters a voice speaks per second of audio


def template_memory_mb() -> int:
    """The template's default MemorySize: the size the stack is deployed at unless told otherwise."""
    from infra.render import load_template

    return int(load_template()["Parameters"]["MemorySize"]["Default"])


def per_million_chars(rtf: float, memory_mb: int, architecture: str, chars_per_second: float) -> float:
    """Dollars of Lambda duration for 1M characters synthesised at `rtf` compute seconds per audio second."""
    audio_seconds = 1e6 / chars_per_second
    return rtf * audio_seconds * memory_mb / 1024 * LAMBDA_GB_SECOND[architecture]


def table(rtfs: Mapping[str, float | None], memory_mb: int) -> Table:
    """Rows: each variant's cost per language and architecture at its measured RTF; then the hosted prices."""
    result = Table(
        f"Lambda cost per 1M characters at {memory_mb:,} MB (duration only; prices as of {PRICES_AS_OF})",
        ("variant", "RTF", *(f"{lang} {arch}" for lang in CHARS_PER_SECOND for arch in LAMBDA_GB_SECOND)),
    )
    for name, rtf in rtfs.items():
        if rtf is None:
            continue
        result.add(
            name,
            f"{rtf:.2f}",
            *(
                _dollars(per_million_chars(rtf, memory_mb, arch, rate))
                for rate in CHARS_PER_SECOND.values()
                for arch in LAMBDA_GB_SECOND
            ),
        )
    for service, price in HOSTED_PER_MILLION.items():
        result.add(service, "–", *([_dollars(price)] * (len(CHARS_PER_SECOND) * len(LAMBDA_GB_SECOND))))
    result.notes += [
        "RTF: the variant's whole-utterance RTF in this run (compute seconds per audio second); arm64 is"
        " priced at the same RTF, which this x86 run does not measure",
        "speaking rates: "
        + ", ".join(f"{lang} ~{rate:g} characters per second" for lang, rate in CHARS_PER_SECOND.items()),
        "Lambda: us-east-1 duration rates per GB-second "
        + ", ".join(f"{arch} ${rate}" for arch, rate in LAMBDA_GB_SECOND.items())
        + "; hosted services: list price per 1M characters, the same in every column",
    ]
    return result


def _dollars(value: float) -> str:
    return f"${value:.2f}"


__all__ = ["CHARS_PER_SECOND", "HOSTED_PER_MILLION", "LAMBDA_GB_SECOND", "per_million_chars", "table"]
