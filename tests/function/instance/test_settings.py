"""Deployment settings read from the environment."""

from __future__ import annotations

import pytest

from function.instance.settings import DEFAULT_DECODE_BATCH, Settings, SettingsError


def test_decode_batch_is_read_and_defaults() -> None:
    assert Settings.from_env({"COSYVOICE_ARTIFACT": "a"}).decode_batch == DEFAULT_DECODE_BATCH
    settings = Settings.from_env({"COSYVOICE_ARTIFACT": "a", "COSYVOICE_DECODE_BATCH": "3"})
    assert settings.decode_batch == 3


@pytest.mark.parametrize(("raw", "problem"), [("0", "below its minimum 1"), ("two", "not an integer")])
def test_a_bad_decode_batch_is_named(raw: str, problem: str) -> None:
    with pytest.raises(SettingsError, match=f"COSYVOICE_DECODE_BATCH=.*{problem}"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "a", "COSYVOICE_DECODE_BATCH": raw})
