"""Deployment configuration, read once from the environment (Lambda function settings, container env).

COSYVOICE_ARTIFACT              artifact directory, or s3://bucket/prefix (read into memory); required
COSYVOICE_OUTPUT_BUCKET         bucket for jobs (their audio, status, parts) and large direct-invoke
                                results; default none
COSYVOICE_OUTPUT_PREFIX         key prefix for those outputs; default "tts/"
COSYVOICE_MAX_TEXT_CHARS        longest text of one synchronous request; default 2000
COSYVOICE_JOB_MAX_TEXT_CHARS    longest text of one job (POST /v1/jobs, an SQS message); default 100000
COSYVOICE_JOB_QUEUE_URL         the SQS queue jobs are sent to (and their parts through); default none: no
                                POST /v1/jobs, and a job (a direct invoke with an id) is spoken part
                                after part by the invocation that takes it
COSYVOICE_JOB_MAX_RECEIVES      attempts of one part of a job, counted by the job (a part handed back
                                on SIGTERM is not counted), and the queue's maxReceiveCount: on the last
                                a part that still fails (or finds no time) fails its job with the
                                reason; default 5
COSYVOICE_JOB_LEASE_SECONDS     how long a worker holds a job's part (or its join) between renewals, and
                                a queue worker its message: a worker that died (killed mid-part) is
                                taken over once it has run out (never later than the end of the dead
                                worker's invocation); default 300
COSYVOICE_JOB_PART_SECONDS      speech per part of a job (function.jobs.plan): a job is split into parts of
                                about this much audio, each its own queue message, spoken whole in one
                                invocation; default 150 (~230 s of synthesis at the measured int8 speed,
                                well inside Lambda's 900 s, and over S3's 5 MiB copy-part minimum)
COSYVOICE_JOB_PARALLEL          parts of one job in flight at once, at most (a window: the worker that
                                finishes part i sends part i + this); 1 = one part after another; default 16
COSYVOICE_JOB_STALL_SECONDS     a job that has not moved (no part taken or written) for this long gets
                                its unsent parts sent again by the sweeper (function.jobs.sweep);
                                default 900
COSYVOICE_JOB_MAX_REDRIVES      re-drives of a job that does not move, after which it fails with that
                                reason; default 3
COSYVOICE_JOB_TOPIC_ARN         SNS topic told of each job's end (id, status, where the audio is or why it
                                failed); default none
COSYVOICE_MAX_REQUEST_SECONDS   longest synchronous HTTP request in a container (`serve`): longer work
                                is refused up front or stopped; default 0 = no limit of its own
COSYVOICE_WARMUP                synthesize once at INIT (or before the SnapStart snapshot); default 1
COSYVOICE_THREADS               onnxruntime intra-op threads; default: every CPU the process may use
COSYVOICE_FLOW_STEPS            Euler steps of the flow's ODE for requests that do not choose (`flow_steps`,
                                OpenAI's model name), 2..10: 10 is CosyVoice v1's, 5 the fast tier (about
                                half the flow's time; listen before you ship it); default: the artifact's
                                own (10 for every v1 model)
COSYVOICE_DECODE_BATCH          segments of a whole-utterance request or a job part the LLM decodes as one
                                batch, at most (a streamed request decodes one): a decode step reads the
                                weights once for all its rows, so more rows cost less per token, but each
                                row holds its own decoder cache (112 KiB per position at full size), and
                                with an int8 LLM a segment decoded in a batch draws other (as valid)
                                tokens for a seed than alone. Above 1, unseeded whole requests running at
                                once (COSYVOICE_MAX_CONCURRENT) share one batch; a seeded one batches only
                                its own segments. Default 1: one segment after another
COSYVOICE_MAX_BODY_BYTES        largest HTTP request body (prompt audio arrives base64); default 8 MiB
COSYVOICE_MAX_RESPONSE_BYTES    largest synchronous response after base64; default 6 MiB inside Lambda,
                                else 0 = no limit
COSYVOICE_MAX_CONCURRENT        syntheses at once under `serve` (function.api.admission); default: the CPUs
                                the process may use / COSYVOICE_THREADS, at least 1
COSYVOICE_MAX_QUEUED            synthesis requests waiting for one of those beyond which `serve` answers 429;
                                default twice COSYVOICE_MAX_CONCURRENT
COSYVOICE_DRAIN_SECONDS         how long `serve` waits on SIGTERM for accepted requests, running and queued,
                                before cutting them: the longest request served; the process has exited
                                by then whatever a request is doing; default 300
COSYVOICE_STALL_SECONDS         a synthesis that makes no progress (no speech token, flow step or chunk,
                                nor a byte sent) for this long is failed and its slot given back
                                (function.api.watchdog), and a request waits this long at most for its
                                LLM thread; /healthz then fails while such work has not ended after as long
                                again. Longer than the slowest flow step at full load; default 60
COSYVOICE_API_KEYS              keys the HTTP API asks for, comma-separated (function.api.keys): every route
                                but the probes and the OpenAPI docs then needs `Authorization: Bearer <key>`
                                or `X-API-Key: <key>`; each entry TENANT=KEY, or a bare KEY of the tenant
                                `default`; default none: open (Lambda keeps IAM / JWT in front)
COSYVOICE_API_KEYS_FILE         a file of such keys, one a line (a mounted Kubernetes Secret), read at start;
                                its keys join COSYVOICE_API_KEYS'
COSYVOICE_DEAD_LETTER_QUEUE_URL where an SQS record that can never succeed is sent, body unchanged, with
                                its reason as message attributes, before it is acknowledged; default none:
                                such a record is handed back and reaches the queue's dead-letter queue
                                through its redrive policy
COSYVOICE_VOICES                OpenAI voice names → built-in speakers, "alloy=中文女,onyx=中文男": changes
                                or adds entries of function.voices.openai.DEFAULT_VOICES; default "" (as
                                it is)
COSYVOICE_VOICE_DIR             a directory (a volume) for saved voices (POST /v1/voices); default none:
                                they go to the output bucket under COSYVOICE_OUTPUT_PREFIX + "voices/",
                                and with neither the voice routes answer 503 voices_unavailable
COSYVOICE_SIGV4_KEYS            key pairs Polly's SDKs sign with (/polly, function.polly.sigv4),
                                comma-separated TENANT=ACCESS_KEY_ID:SECRET, or a bare ACCESS_KEY_ID:SECRET
                                of the tenant `default`; default none: every /polly request is refused 403
COSYVOICE_SIGV4_KEYS_FILE       a file of such pairs, one a line (a mounted secret), read at start; its
                                pairs join COSYVOICE_SIGV4_KEYS'
COSYVOICE_POLLY_VOICES          Polly voice names → built-in speakers, "Joanna=中文女,Brian=英文男": changes
                                or adds entries of function.polly.voices.DEFAULT_POLLY_VOICES; default ""
COSYVOICE_METRICS               on or off: Prometheus metrics (`serve`'s /metrics, the worker's port) and
                                Lambda's embedded metrics (function.observe); default on
COSYVOICE_METRICS_PORT          the port a queue worker (`python -m function worker`) serves /metrics on
                                (also --metrics-port); default none: no metrics server
COSYVOICE_METRICS_NAMESPACE     the CloudWatch namespace of the embedded metrics; default "CosyVoice"
COSYVOICE_LOG_FORMAT            json or text: the shape of each request's log line (a Lambda request's
                                embedded metrics are a JSON line of their own with text); default json

Tenants (function.core.tenant; docs/tenants.md): every credential names one, and sees only its own jobs,
voices, lexicons and tasks.
COSYVOICE_TENANT_CLAIM          behind API Gateway's JWT authorizer: the claim that names the caller's
                                tenant; default none: every JWT caller is the tenant `default`
COSYVOICE_IAM_TENANTS           behind ApiAuth=iam (or an IAM-signed Function URL): TENANT=CALLER_ARN
                                entries, comma-separated; a caller not named is the tenant `default`
COSYVOICE_TENANT_MAX_CONCURRENT syntheses one tenant may have running and waiting for a slot at once under
                                `serve`; more are answered 429 while other tenants are still admitted;
                                default none: no share of its own
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from function.core.options import DEFAULT_MAX_TEXT_CHARS, MAX_FLOW_STEPS, MIN_FLOW_STEPS
from function.core.tenant import DEFAULT_TENANT, TenantNameError, checked_tenant
from function.voices.openai import DEFAULT_VOICES, VoiceTableError, parse_voices

# Lambda's synchronous invocation payload limit ("6 MB"), which Mangum's base64 body must fit in.
LAMBDA_PAYLOAD_LIMIT = 6 * 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_JOB_MAX_TEXT_CHARS = 100_000  # ~2 h of English speech, in parts across invocations
DEFAULT_DRAIN_SECONDS = 300  # five minutes of synthesis; longer texts belong on the job path
DEFAULT_JOB_MAX_RECEIVES = 5  # template.yaml's QueueMaxReceives
DEFAULT_JOB_LEASE_SECONDS = 300  # well over one segment's synthesis at full size (renewed after each)
DEFAULT_DECODE_BATCH = 1
DEFAULT_JOB_PART_SECONDS = 150  # a part's speech: ~230 s of synthesis at the measured int8 speed
DEFAULT_JOB_PARALLEL = 16  # parts of one job in flight: below template.yaml's QueueMaxConcurrency
DEFAULT_JOB_STALL_SECONDS = 900  # well over a part's synthesis: a job that moves is never re-driven
DEFAULT_JOB_MAX_REDRIVES = 3
DEFAULT_STALL_SECONDS = 60  # a flow step of a long segment on a loaded instance takes seconds, not a minute
RESPONSE_ENVELOPE = 16 * 1024  # room for the status, headers and JSON keys around the base64 body
DEFAULT_METRICS_NAMESPACE = "CosyVoice"
LOG_FORMATS = ("json", "text")
MAX_PORT = 65535
MAX_NAMESPACE_CHARS = 255  # CloudWatch's limit


class SettingsError(ValueError):
    """The environment does not describe a usable deployment."""


class SigV4Key(NamedTuple):
    """A SigV4 key pair's secret, and the tenant it belongs to."""

    secret: str
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True)
class Settings:
    artifact: str  # local directory or s3://bucket/prefix
    output_bucket: str | None = None
    output_prefix: str = "tts/"
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS
    job_max_text_chars: int = DEFAULT_JOB_MAX_TEXT_CHARS
    job_queue_url: str | None = None
    job_max_receives: int = DEFAULT_JOB_MAX_RECEIVES
    job_lease_seconds: int = DEFAULT_JOB_LEASE_SECONDS
    max_request_seconds: float | None = None  # None: only the platform's limits (and the caller's)
    warmup: bool = True
    threads: int | None = None  # None: every CPU the process may use
    flow_steps: int | None = None  # the flow's Euler steps by default; None: the artifact's (v1's 10)
    decode_batch: int = DEFAULT_DECODE_BATCH  # segments decoded as one batch, at most
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_response_bytes: int | None = None  # None: responses of any size (uvicorn streams them)
    voices: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VOICES))  # OpenAI name → speaker
    max_concurrent: int | None = None  # None: one synthesis per `threads` CPUs (function.api.admission)
    max_queued: int | None = None  # None: twice max_concurrent
    drain_seconds: int = DEFAULT_DRAIN_SECONDS
    stall_seconds: int = DEFAULT_STALL_SECONDS
    api_keys: Mapping[str, str] = field(default_factory=dict)  # key → its tenant; none: the API is open
    dead_letter_queue_url: str | None = None
    voice_dir: str | None = None  # saved voices on a volume instead of the output bucket
    job_part_seconds: int = DEFAULT_JOB_PART_SECONDS  # speech per part of a job
    job_parallel: int = DEFAULT_JOB_PARALLEL  # parts of one job in flight at once
    job_topic_arn: str | None = None  # SNS topic told of each job's end
    job_stall_seconds: int = DEFAULT_JOB_STALL_SECONDS  # a job not moving this long is re-driven
    job_max_redrives: int = DEFAULT_JOB_MAX_REDRIVES  # re-drives without progress before it fails
    # Polly's API (/polly): access key id → the secret it verifies SigV4 with (none: refused) and its
    # tenant; the Polly voice names this deployment changes or adds
    sigv4_keys: Mapping[str, SigV4Key] = field(default_factory=dict)
    polly_voices: Mapping[str, str] = field(default_factory=dict)
    # Tenants behind API Gateway (a JWT claim, IAM caller ARN → tenant), and one tenant's share
    tenant_claim: str | None = None
    iam_tenants: Mapping[str, str] = field(default_factory=dict)
    tenant_max_concurrent: int | None = None  # None: no share of its own
    # Observability (function.observe): metrics at all, the worker's metrics port (None: no server), the
    # embedded metrics' CloudWatch namespace, the request log line's shape
    metrics: bool = True
    metrics_port: int | None = None
    metrics_namespace: str = DEFAULT_METRICS_NAMESPACE
    log_format: str = "json"

    @cached_property
    def named_tenants(self) -> frozenset[str]:
        """The tenants the credentials name (and `default`): the values a metric's tenant label takes,
        so its cardinality is the deployment's configuration, never its callers'."""
        return frozenset(
            {DEFAULT_TENANT, *self.api_keys.values(), *self.iam_tenants.values()}
            | {key.tenant for key in self.sigv4_keys.values()}
        )

    def fits_response(self, audio_bytes: int) -> bool:
        """Whether audio of this size fits a synchronous response once base64-encoded (4 bytes per 3)."""
        if self.max_response_bytes is None:
            return True
        return 4 * ((audio_bytes + 2) // 3) + RESPONSE_ENVELOPE <= self.max_response_bytes

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, artifact: str | None = None) -> Settings:
        """The settings `environ` (default: this process's environment) describes; `artifact` (a
        command's --artifacts) in place of COSYVOICE_ARTIFACT when given."""
        env = os.environ if environ is None else environ
        artifact = (artifact or env.get("COSYVOICE_ARTIFACT", "")).strip()
        if not artifact:
            raise SettingsError(
                "COSYVOICE_ARTIFACT is not set: give an artifact directory or s3://bucket/prefix"
            )
        in_lambda = "AWS_LAMBDA_RUNTIME_API" in env or "AWS_LAMBDA_FUNCTION_NAME" in env
        response_limit = _int(
            env, "COSYVOICE_MAX_RESPONSE_BYTES", LAMBDA_PAYLOAD_LIMIT if in_lambda else 0, 0
        )
        threads = _int(env, "COSYVOICE_THREADS", 0, 0)
        try:
            voices = parse_voices(env.get("COSYVOICE_VOICES", ""))
        except VoiceTableError as exc:
            raise SettingsError(f"COSYVOICE_VOICES: {exc}") from None
        try:
            polly_voices = parse_voices(env.get("COSYVOICE_POLLY_VOICES", ""), {})
        except VoiceTableError as exc:
            raise SettingsError(f"COSYVOICE_POLLY_VOICES: {exc}") from None
        return cls(
            artifact=artifact,
            output_bucket=env.get("COSYVOICE_OUTPUT_BUCKET", "").strip() or None,
            output_prefix=env.get("COSYVOICE_OUTPUT_PREFIX", cls.output_prefix),
            max_text_chars=_int(env, "COSYVOICE_MAX_TEXT_CHARS", DEFAULT_MAX_TEXT_CHARS, 1),
            job_max_text_chars=_int(env, "COSYVOICE_JOB_MAX_TEXT_CHARS", DEFAULT_JOB_MAX_TEXT_CHARS, 1),
            job_queue_url=env.get("COSYVOICE_JOB_QUEUE_URL", "").strip() or None,
            job_max_receives=_int(env, "COSYVOICE_JOB_MAX_RECEIVES", DEFAULT_JOB_MAX_RECEIVES, 1),
            job_lease_seconds=_int(env, "COSYVOICE_JOB_LEASE_SECONDS", DEFAULT_JOB_LEASE_SECONDS, 1),
            max_request_seconds=_int(env, "COSYVOICE_MAX_REQUEST_SECONDS", 0, 0) or None,
            warmup=_bool(env, "COSYVOICE_WARMUP", True),
            threads=threads or None,
            flow_steps=_flow_steps(env),
            decode_batch=_int(env, "COSYVOICE_DECODE_BATCH", DEFAULT_DECODE_BATCH, 1),
            max_body_bytes=_int(env, "COSYVOICE_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, 1024),
            max_response_bytes=response_limit or None,
            voices=voices,
            max_concurrent=_optional_int(env, "COSYVOICE_MAX_CONCURRENT", 1),
            max_queued=_optional_int(env, "COSYVOICE_MAX_QUEUED", 0),
            drain_seconds=_int(env, "COSYVOICE_DRAIN_SECONDS", DEFAULT_DRAIN_SECONDS, 0),
            stall_seconds=_int(env, "COSYVOICE_STALL_SECONDS", DEFAULT_STALL_SECONDS, 1),
            api_keys=_api_keys(env),
            dead_letter_queue_url=env.get("COSYVOICE_DEAD_LETTER_QUEUE_URL", "").strip() or None,
            voice_dir=env.get("COSYVOICE_VOICE_DIR", "").strip() or None,
            job_part_seconds=_int(env, "COSYVOICE_JOB_PART_SECONDS", DEFAULT_JOB_PART_SECONDS, 1),
            job_parallel=_int(env, "COSYVOICE_JOB_PARALLEL", DEFAULT_JOB_PARALLEL, 1),
            job_topic_arn=env.get("COSYVOICE_JOB_TOPIC_ARN", "").strip() or None,
            job_stall_seconds=_int(env, "COSYVOICE_JOB_STALL_SECONDS", DEFAULT_JOB_STALL_SECONDS, 1),
            job_max_redrives=_int(env, "COSYVOICE_JOB_MAX_REDRIVES", DEFAULT_JOB_MAX_REDRIVES, 0),
            sigv4_keys=_sigv4_keys(env),
            polly_voices=polly_voices,
            tenant_claim=env.get("COSYVOICE_TENANT_CLAIM", "").strip() or None,
            iam_tenants=_iam_tenants(env),
            tenant_max_concurrent=_optional_int(env, "COSYVOICE_TENANT_MAX_CONCURRENT", 1),
            metrics=_bool(env, "COSYVOICE_METRICS", True),
            metrics_port=_port(env, "COSYVOICE_METRICS_PORT"),
            metrics_namespace=_namespace(env),
            log_format=_choice(env, "COSYVOICE_LOG_FORMAT", LOG_FORMATS),
        )


def _flow_steps(env: Mapping[str, str]) -> int | None:
    steps = _optional_int(env, "COSYVOICE_FLOW_STEPS", MIN_FLOW_STEPS)
    if steps is not None and steps > MAX_FLOW_STEPS:
        raise SettingsError(
            f"COSYVOICE_FLOW_STEPS={steps} is above its maximum {MAX_FLOW_STEPS} (CosyVoice v1's own count)"
        )
    return steps


def _listed(env: Mapping[str, str], name: str, what: str, if_none: str) -> tuple[str, ...]:
    """The comma-separated items of `name` and the lines of the file `name`_FILE names, once each; a
    file without any is refused (`if_none` says what would follow)."""
    items = env.get(name, "").split(",")
    path = env.get(f"{name}_FILE", "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                items += file.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{name}_FILE={path!r} cannot be read: {exc}") from None
        if not any(item.strip() for item in items):
            raise SettingsError(f"{name}_FILE={path!r} holds no {what}: {if_none}")
    return tuple(dict.fromkeys(item.strip() for item in items if item.strip()))


def _tenant_of(name: str, entry: str, separator: str) -> tuple[str, str]:
    """An entry's tenant and the rest: `TENANT=REST` when "=" comes before `separator` (or, with none,
    anywhere), else `default` and the whole entry. The message of a bad tenant never shows the entry: it
    may be most of a key."""
    tenant, equals, rest = entry.partition("=")
    if not equals or (separator and separator in tenant):
        return DEFAULT_TENANT, entry
    try:
        return checked_tenant(tenant.strip()), rest.strip()
    except TenantNameError:
        raise SettingsError(
            f"a {name} entry names a tenant that is not 1-32 lowercase letters, digits and '-' (entries are"
            " TENANT=... or bare; write default=... for a bare one holding '=')"
        ) from None


def _api_keys(env: Mapping[str, str]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for item in _listed(env, "COSYVOICE_API_KEYS", "key", "the API would be open"):
        tenant, key = _tenant_of("COSYVOICE_API_KEYS", item, "")
        if not key or not key.isascii() or not key.isprintable():
            raise SettingsError("an API key must be printable ASCII (it travels in an HTTP header)")
        if keys.setdefault(key, tenant) != tenant:
            raise SettingsError("an API key is given to two tenants")
    return keys


def _sigv4_keys(env: Mapping[str, str]) -> dict[str, SigV4Key]:
    pairs: dict[str, SigV4Key] = {}
    for item in _listed(env, "COSYVOICE_SIGV4_KEYS", "key pair", "Polly's API would be off"):
        tenant, pair = _tenant_of("COSYVOICE_SIGV4_KEYS", item, ":")
        key_id, sep, secret = (part.strip() for part in pair.partition(":"))
        if not sep or not key_id or not secret:
            raise SettingsError("a COSYVOICE_SIGV4_KEYS entry is not [TENANT=]ACCESS_KEY_ID:SECRET")
        if not (key_id.isascii() and key_id.isalnum()) or not (secret.isascii() and secret.isprintable()):
            raise SettingsError(
                f"SigV4 key {key_id[:4]}…: the id must be ASCII letters and digits,"
                " the secret printable ASCII"
            )
        if pairs.setdefault(key_id, SigV4Key(secret, tenant)) != SigV4Key(secret, tenant):
            raise SettingsError(
                f"SigV4 access key id {key_id!r} is given twice, with other secrets or tenants"
            )
    return pairs


def _iam_tenants(env: Mapping[str, str]) -> dict[str, str]:
    tenants: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in env.get("COSYVOICE_IAM_TENANTS", "").split(","))):
        tenant, arn = _tenant_of("COSYVOICE_IAM_TENANTS", item, "")
        if "=" not in item or not arn.startswith("arn:"):
            raise SettingsError(f"a COSYVOICE_IAM_TENANTS entry {item!r} is not TENANT=CALLER_ARN")
        if tenants.setdefault(arn, tenant) != tenant:
            raise SettingsError(f"COSYVOICE_IAM_TENANTS maps {arn!r} to two tenants")
    return tenants


def _port(env: Mapping[str, str], name: str) -> int | None:
    port = _optional_int(env, name, 1)
    if port is not None and port > MAX_PORT:
        raise SettingsError(f"{name}={port} is not a TCP port (1-{MAX_PORT})")
    return port


def _namespace(env: Mapping[str, str]) -> str:
    """A CloudWatch namespace: 1-255 ASCII characters, none of them a colon, not starting with 'AWS/'."""
    name = env.get("COSYVOICE_METRICS_NAMESPACE", "").strip() or DEFAULT_METRICS_NAMESPACE
    if len(name) > MAX_NAMESPACE_CHARS or not name.isascii() or ":" in name or name.startswith("AWS/"):
        raise SettingsError(
            f"COSYVOICE_METRICS_NAMESPACE={name!r} is not a CloudWatch namespace (1-{MAX_NAMESPACE_CHARS}"
            " ASCII characters, no ':', not under 'AWS/')"
        )
    return name


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first by default)."""
    raw = env.get(name, "").strip().lower() or choices[0]
    if raw not in choices:
        raise SettingsError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    value = _optional_int(env, name, minimum)
    return default if value is None else value


def _optional_int(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise SettingsError(f"{name}={value} is below its minimum {minimum}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r} is not a boolean (use 1 or 0)")


_settings: Settings | None = None


def get_settings() -> Settings:
    """The process's settings: read from the environment once, like the model they describe."""
    global _settings
    if _settings is None:
        _settings = Settings.from_env()
    return _settings


def use_settings(settings: Settings) -> None:
    """Make `settings` the process's settings: a command line that takes them as flags calls this first."""
    global _settings
    _settings = settings


__all__ = [
    "LAMBDA_PAYLOAD_LIMIT",
    "MAX_PORT",
    "Settings",
    "SettingsError",
    "SigV4Key",
    "get_settings",
    "use_settings",
]
