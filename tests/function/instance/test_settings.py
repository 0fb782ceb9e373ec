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


def test_observability_settings_are_read_and_default() -> None:
    default = Settings.from_env({"COSYVOICE_ARTIFACT": "a"})
    assert (default.metrics, default.metrics_port, default.metrics_namespace, default.log_format) == (
        True,
        None,
        "CosyVoice",
        "json",
    )
    chosen = Settings.from_env(
        {
            "COSYVOICE_ARTIFACT": "a",
            "COSYVOICE_METRICS": "off",
            "COSYVOICE_METRICS_PORT": "9100",
            "COSYVOICE_METRICS_NAMESPACE": "Speech/Prod",
            "COSYVOICE_LOG_FORMAT": "TEXT",
        }
    )
    assert (chosen.metrics, chosen.metrics_port, chosen.metrics_namespace, chosen.log_format) == (
        False,
        9100,
        "Speech/Prod",
        "text",
    )


@pytest.mark.parametrize(
    ("name", "raw", "problem"),
    [
        ("COSYVOICE_METRICS", "maybe", "not a boolean"),
        ("COSYVOICE_METRICS_PORT", "70000", "not a TCP port"),
        ("COSYVOICE_METRICS_PORT", "0", "below its minimum"),
        ("COSYVOICE_METRICS_NAMESPACE", "AWS/Lambda", "not a CloudWatch namespace"),
        ("COSYVOICE_METRICS_NAMESPACE", "a:b", "not a CloudWatch namespace"),
        ("COSYVOICE_LOG_FORMAT", "xml", "not one of json, text"),
    ],
)
def test_a_bad_observability_setting_is_named(name: str, raw: str, problem: str) -> None:
    with pytest.raises(SettingsError, match=f"{name}=.*{problem}"):
        Settings.from_env({"COSYVOICE_ARTIFACT": "a", name: raw})


def test_the_tenants_a_metric_may_name_are_those_the_credentials_name() -> None:
    settings = Settings.from_env(
        {
            "COSYVOICE_ARTIFACT": "a",
            "COSYVOICE_API_KEYS": "acme=k1,k2",
            "COSYVOICE_SIGV4_KEYS": "globex=AKID1:secret",
            "COSYVOICE_IAM_TENANTS": "initech=arn:aws:iam::123456789012:role/x",
            "COSYVOICE_TENANT_CLAIM": "custom:tenant",  # names no tenant itself: its callers do
        }
    )
    assert settings.named_tenants == {"default", "acme", "globex", "initech"}
