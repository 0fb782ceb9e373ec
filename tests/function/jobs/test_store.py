"""A job's content digest, which binds an id to its content: stable across releases that add fields."""

from __future__ import annotations

from function.jobs.store import content_digest
from function.service.schema import SpeechJob

REQUEST = {"id": "order-42", "text": "Hello there.", "speaker": "英文女", "format": "wav", "seed": 7}
# The digest of REQUEST as stored before `flow_steps` existed (computed by that release's code).
STORED_BEFORE_FLOW_STEPS = "4181faf306b0c1960b9eb1ed1a1570d45ef4489dec3d2c07c10c16bd18911277"


def test_a_job_stored_before_a_field_was_added_is_still_the_same_content() -> None:
    assert content_digest(SpeechJob.model_validate(REQUEST)) == STORED_BEFORE_FLOW_STEPS


def test_a_later_field_once_set_is_content() -> None:
    fast = content_digest(SpeechJob.model_validate({**REQUEST, "flow_steps": 5}))
    assert fast != STORED_BEFORE_FLOW_STEPS
    assert fast != content_digest(SpeechJob.model_validate({**REQUEST, "flow_steps": 10}))
