"""The flow's step count on the way in: the deployment's COSYVOICE_FLOW_STEPS, a request's `flow_steps`
(on /v1/tts, jobs and direct invokes), OpenAI's model names; each out-of-range value a clear error."""

from __future__ import annotations

from typing import Any

import pytest

from function.core.errors import InvalidRequest
from function.core.options import MAX_FLOW_STEPS, MIN_FLOW_STEPS, SynthesisOptions
from function.instance.settings import Settings, SettingsError
from function.service.schema import (
    JobRequest,
    OpenAISpeechRequest,
    SpeechJob,
    SpeechRequest,
    parse,
)

ENV = {"COSYVOICE_ARTIFACT": "artifact"}


@pytest.mark.parametrize(("raw", "steps"), [(None, None), ("", None), ("2", 2), ("5", 5), (" 10 ", 10)])
def test_the_deployment_default_is_read_from_the_environment(raw: str | None, steps: int | None) -> None:
    env = ENV if raw is None else {**ENV, "COSYVOICE_FLOW_STEPS": raw}
    assert Settings.from_env(env).flow_steps == steps  # None: the artifact's own, v1's 10


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("1", "COSYVOICE_FLOW_STEPS=1 is below its minimum 2"),
        ("0", "COSYVOICE_FLOW_STEPS=0 is below its minimum 2"),
        ("11", "COSYVOICE_FLOW_STEPS=11 is above its maximum 10"),
        ("fast", "COSYVOICE_FLOW_STEPS='fast' is not an integer"),
        ("5.0", "COSYVOICE_FLOW_STEPS='5.0' is not an integer"),
    ],
)
def test_a_deployment_default_out_of_range_is_refused_with_its_name(raw: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        Settings.from_env({**ENV, "COSYVOICE_FLOW_STEPS": raw})


@pytest.mark.parametrize("model", [SpeechRequest, JobRequest, SpeechJob])
def test_every_synthesis_body_carries_flow_steps_into_the_options(model: type[SpeechRequest]) -> None:
    body: dict[str, Any] = {"text": "Hello.", "speaker": "英文女", "id": "job-1"}
    if model is SpeechRequest:
        del body["id"]
    assert parse(model, body).to_options().flow_steps is None
    assert parse(model, {**body, "flow_steps": 5}).to_options().flow_steps == 5


@pytest.mark.parametrize("value", ["5", 5.0, True])
def test_flow_steps_of_another_json_type_is_refused(value: Any) -> None:
    with pytest.raises(InvalidRequest, match="flow_steps"):
        parse(SpeechRequest, {"text": "Hello.", "speaker": "英文女", "flow_steps": value})


def test_the_schema_states_the_range() -> None:
    field = SpeechRequest.model_json_schema()["properties"]["flow_steps"]
    assert (field["minimum"], field["maximum"]) == (MIN_FLOW_STEPS, MAX_FLOW_STEPS) == (2, 10)
    assert "2 to 10" in field["description"]


@pytest.mark.parametrize("steps", [2, 5, 7, 10])
def test_steps_in_range_pass_validation(steps: int) -> None:
    options = SynthesisOptions(text="Hello.", speaker="英文女", flow_steps=steps)
    assert options.validated() is options


@pytest.mark.parametrize("steps", [1, 0, -5, 11, 100, True, 5.0])
def test_steps_out_of_range_are_an_invalid_request_naming_the_range(steps: Any) -> None:
    options = SynthesisOptions(text="Hello.", speaker="英文女", flow_steps=steps)
    with pytest.raises(InvalidRequest, match=r"flow_steps must be an integer from 2 to 10 .*got"):
        options.validated()


@pytest.mark.parametrize(
    ("model", "steps"),
    [("tts-1-hd", 10), ("tts-1", 5), ("cosyvoice-300m-sft", None), ("gpt-4o-mini-tts", None), ("", None)],
)
def test_openai_model_names_choose_the_tier(model: str, steps: int | None) -> None:
    body = OpenAISpeechRequest.model_validate({"model": model, "input": "Hello.", "voice": "alloy"})
    assert body.to_options("英文女", None).flow_steps == steps  # None: the deployment's default
