"""Schemathesis fuzzes every operation of the served OpenAPI document: no input may produce a 5xx.

Both generation modes run: positive (schema-valid bodies, so the engine really synthesizes) and negative
(bodies that break the schema). Examples per operation and mode are bounded to keep the run short.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.mark.parametrize(
    "mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"]
)
def test_no_input_makes_the_server_fail(server: str, mode: GenerationMode) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5

    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not operation.body:
            continue  # nothing to break in a GET without parameters

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def call(case: schemathesis.Case) -> None:
            response = case.call(timeout=120)
            assert response.status_code < 500, f"{case.method} {case.path} {case.body!r} → {response.text}"
            if response.status_code >= 400:  # each wire's error shape: Polly's under /polly
                assert ("message" if case.path.startswith("/polly") else "error") in response.json()

        call()
