"""template.yaml: lint, then guard every rendering (all parameter combinations) against the mistakes that
lint clean but fail at deploy time or widen permissions.

Each guard is a function returning its violations, so the negative tests at the bottom can show that it
catches a broken template, not only that the real one passes.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
from typing import Any

import pytest

from infra import build_zip
from infra.render import PLACEHOLDER_REGION, ROOT, Rendered, configured_region, load_template, main, render

TEMPLATE = load_template()
SNAPSTART_MAX_EPHEMERAL_MB = 512
SQS_VISIBILITY_FACTOR = 6
# Receives before the dead-letter queue: throttled or unstarted receives must not dead-letter a job early.
MIN_RECEIVES = 5

COMBINATIONS = [
    dict(
        zip(
            ("WarmStart", "ApiAuth", "OutputBucket", "ProvisionedConcurrencyMax", "AlarmTopicArn"),
            values,
            strict=True,
        ),
        # Both values under every WarmStart × ApiAuth × OutputBucket, without doubling the renderings.
        StreamingUrl=("enabled", "disabled")[index // 2 % 2],
    )
    for index, values in enumerate(
        itertools.product(
            ("snapstart", "provisioned", "none"),
            ("none", "iam", "jwt"),
            ("auto", "existing-audio-bucket"),
            ("0", "8"),
            ("", "arn:aws:sns:us-east-1:123456789012:alarms"),
        )
    )
]
REQUIRED = {
    "ArtifactLocation": "s3://model-bucket/cosyvoice/sft-v1",
    "JwtIssuer": "https://issuer.example.com",
}


def _id(combo: dict[str, str]) -> str:
    return "-".join(value.rsplit(":", 1)[-1] or "empty" for value in combo.values())


@pytest.fixture(scope="module", params=COMBINATIONS, ids=[_id(c) for c in COMBINATIONS])
def rendering(request) -> Rendered:
    return render(TEMPLATE, {**REQUIRED, **request.param})


# --- guards ----------------------------------------------------------------------------------------------


def _function_of(reference: Any, r: Rendered) -> str | None:
    """The Lambda function a FunctionName/Ref points at (directly, or through a version or alias)."""
    if isinstance(reference, dict) and "Ref" in reference:
        name = reference["Ref"]
        resource = r.resources.get(name)
        if resource is None:
            return None
        if resource["Type"] == "AWS::Lambda::Function":
            return name
        return _function_of(resource["Properties"]["FunctionName"], r)
    return None


def snapstart_violations(r: Rendered) -> list[str]:
    found = []
    for name, fn in r.of_type("AWS::Lambda::Function").items():
        props = fn["Properties"]
        if props.get("SnapStart", {}).get("ApplyOn") != "PublishedVersions":
            continue
        if props.get("PackageType") == "Image":
            found.append(f"{name}: SnapStart on a container image")
        if int(props.get("EphemeralStorage", {}).get("Size", 512)) > SNAPSTART_MAX_EPHEMERAL_MB:
            found.append(f"{name}: SnapStart with ephemeral storage over {SNAPSTART_MAX_EPHEMERAL_MB} MB")
        for other_name, other in r.resources.items():
            if other["Type"] in ("AWS::Lambda::Alias", "AWS::Lambda::Version"):
                target = _function_of(other["Properties"]["FunctionName"], r)
                if target == name and "ProvisionedConcurrencyConfig" in other["Properties"]:
                    found.append(f"{name}: SnapStart with provisioned concurrency on {other_name}")
        for target_name, target in r.of_type("AWS::ApplicationAutoScaling::ScalableTarget").items():
            if name in str(target["Properties"]["ResourceId"]):
                found.append(f"{name}: SnapStart with provisioned concurrency scaling ({target_name})")
    return found


_S3_WRITE = re.compile(r"^(\*|s3:\*|s3:(Put|Delete|Restore|Replicate)\w*\*?)$")
# Objects under a literal prefix: a wildcard only at the end, or after the prefix's first folder (a
# tenant's folder, tenants/*/).
_PREFIXED_OBJECTS = re.compile(r"^arn:aws:s3:::[^/*]+/([^*]+\*?|[^*/]+/.*)$")
_VOICE_OBJECTS = re.compile(r"^arn:aws:s3:::[^/*]+/[^*]+/(tenants/\*/)?voices/\*$")


def _statements(r: Rendered) -> list[dict[str, Any]]:
    statements = []
    for resource in r.resources.values():
        props = resource["Properties"]
        if resource["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                statements += policy["PolicyDocument"]["Statement"]
        elif resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            statements += props["PolicyDocument"]["Statement"]
    return statements


def s3_write_violations(r: Rendered) -> list[str]:
    """Every Allow of an S3 write names objects under a non-empty prefix: never *, never bucket/*."""
    found = []
    for statement in _statements(r):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if statement["Effect"] != "Allow" or not any(_S3_WRITE.match(a) for a in actions):
            continue
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        found += [
            f"{statement.get('Sid')}: {res}" for res in resources if not _PREFIXED_OBJECTS.match(str(res))
        ]
    return found


def managed_policy_violations(r: Rendered) -> list[str]:
    """AWS managed policies grant `*` resources (e.g. the SQS poller role); the role spells out its own."""
    return [
        f"{name}: {arn}"
        for name, role in r.of_type("AWS::IAM::Role").items()
        for arn in role["Properties"].get("ManagedPolicyArns", [])
    ]


def queue_violations(r: Rendered) -> list[str]:
    found = []
    for name, mapping in r.of_type("AWS::Lambda::EventSourceMapping").items():
        props = mapping["Properties"]
        queue = props["EventSourceArn"]["Fn::GetAtt"][0]
        if "ReportBatchItemFailures" not in props.get("FunctionResponseTypes", []):
            found.append(f"{name}: a failed record would fail the whole batch")
        if int(props.get("BatchSize", 10)) > 1 and int(props.get("MaximumBatchingWindowInSeconds", 0)) < 1:
            found.append(f"{name}: no batching window")
        target = props["FunctionName"]
        if r.resources.get(target.get("Ref", ""), {}).get("Type") != "AWS::Lambda::Alias":
            found.append(f"{name}: not routed to the alias (SnapStart/provisioned run on published versions)")
        function = r.resources[_function_of(target, r) or ""]
        timeout = int(function["Properties"].get("Timeout", 3))
        visibility = int(r.resources[queue]["Properties"].get("VisibilityTimeout", 30))
        if visibility < SQS_VISIBILITY_FACTOR * timeout:
            found.append(
                f"{queue}: visibility {visibility} s < {SQS_VISIBILITY_FACTOR} x timeout {timeout} s"
            )
        redrive = r.resources[queue]["Properties"].get("RedrivePolicy")
        if redrive is None:
            found.append(f"{queue}: no dead-letter queue")
        elif int(redrive["maxReceiveCount"]) < MIN_RECEIVES:
            found.append(f"{queue}: maxReceiveCount {redrive['maxReceiveCount']} < {MIN_RECEIVES}")
    return found


def dangling_references(r: Rendered) -> list[str]:
    """Refs and GetAtts that name a resource this rendering does not create."""
    known = set(r.resources) | set(r.parameters)
    found = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if "Ref" in node and node["Ref"] not in known:
                found.append(f"{where}: Ref {node['Ref']}")
            if "Fn::GetAtt" in node and node["Fn::GetAtt"][0] not in known:
                found.append(f"{where}: GetAtt {node['Fn::GetAtt'][0]}")
            for value in node.values():
                walk(value, where)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)
        elif isinstance(node, str):
            found.extend(f"{where}: {m}" for m in re.findall(r"<([A-Za-z0-9]+)[.>]", node) if m not in known)

    for name, resource in {**r.resources, **r.outputs}.items():
        walk(resource, name)
        walk(resource.get("DependsOn", []), name)
    return found


# --- the real template, every combination ----------------------------------------------------------------


def test_cfn_lint_finds_nothing():
    """cfn-lint's errors and warnings (what `sam validate --lint` runs), SAM transform included."""
    from cfnlint.api import ManualArgs, lint

    from infra.render import TEMPLATE as PATH

    matches = lint(PATH.read_text(), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    assert [str(m) for m in matches] == []


def test_renders_exactly_one_function_of_the_chosen_variant(rendering):
    functions = rendering.of_type("AWS::Lambda::Function")
    assert len(functions) == 1
    ((name, function),) = functions.items()
    snapstart = rendering.parameters["WarmStart"] == "snapstart"
    assert name == ("ZipFunction" if snapstart else "ImageFunction")
    assert (function["Properties"].get("PackageType") == "Image") is not snapstart
    assert ("SnapStart" in function["Properties"]) is snapstart


def test_no_dangling_references(rendering):
    assert dangling_references(rendering) == []


def test_snapstart_guards(rendering):
    assert snapstart_violations(rendering) == []


def test_s3_writes_are_scoped_to_a_prefix(rendering):
    assert s3_write_violations(rendering) == []
    assert managed_policy_violations(rendering) == []


# What a job deletes: its entry in the index of jobs that are not final, and its parts' lease objects
# (attempts start afresh when it is submitted again), the default tenant's and each other tenant's.
_JOB_RECORDS = re.compile(r"^arn:aws:s3:::[^/*]+/[^*]+/(jobs/_active/\*|(tenants/\*/)?jobs/\*/leases/\*)$")


def test_objects_are_deleted_only_under_the_saved_voices_prefix_and_jobs_records(rendering):
    deletes = [
        statement
        for statement in _statements(rendering)
        if statement["Effect"] == "Allow"
        and any("Delete" in action or action in ("*", "s3:*") for action in _actions(statement))
        and any(action.startswith("s3:") or action == "*" for action in _actions(statement))
    ]
    assert [statement["Sid"] for statement in deletes] == ["DeleteSavedVoices", "KeepJobRecords"]
    voices, jobs = ([str(res) for res in _resources(statement)] for statement in deletes)
    # The default tenant's voices, and each other tenant's (the one wildcard segment is the tenant).
    assert len(voices) == 2 and all(_VOICE_OBJECTS.match(res) for res in voices), voices
    assert len(jobs) == 3 and all(_JOB_RECORDS.match(res) for res in jobs), jobs


def _actions(statement: dict[str, Any]) -> list[str]:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def _resources(statement: dict[str, Any]) -> list[Any]:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


def test_queue_guards(rendering):
    assert queue_violations(rendering) == []


def test_every_caller_reaches_the_alias(rendering):
    ((alias_name, alias),) = rendering.of_type("AWS::Lambda::Alias").items()
    (function_name,) = rendering.of_type("AWS::Lambda::Function")
    assert alias["Properties"]["FunctionName"] == {"Ref": function_name}
    targets = [
        rendering.resources["HttpApiIntegration"]["Properties"]["IntegrationUri"],
        rendering.resources["HttpApiInvokePermission"]["Properties"]["FunctionName"],
        rendering.resources["JobQueueMapping"]["Properties"]["FunctionName"],
        rendering.outputs["FunctionAlias"]["Value"],
    ]
    assert targets == [{"Ref": alias_name}] * len(targets)


def test_replaced_versions_are_deleted_not_retained(rendering):
    versions = rendering.of_type("AWS::Lambda::Version")
    assert len(versions) == 1
    assert [v.get("DeletionPolicy") for v in versions.values()] == ["Delete"]


def test_provisioned_concurrency_and_scaling_follow_the_parameters(rendering):
    (alias,) = rendering.of_type("AWS::Lambda::Alias").values()
    provisioned = rendering.parameters["WarmStart"] == "provisioned"
    config = alias["Properties"].get("ProvisionedConcurrencyConfig")
    assert config == ({"ProvisionedConcurrentExecutions": "1"} if provisioned else None)
    scaling = rendering.of_type("AWS::ApplicationAutoScaling::ScalableTarget")
    assert bool(scaling) is (provisioned and rendering.parameters["ProvisionedConcurrencyMax"] != "0")


def test_api_auth_follows_the_parameter(rendering):
    route = rendering.resources["DefaultRoute"]["Properties"]
    expected = {"none": "NONE", "iam": "AWS_IAM", "jwt": "JWT"}[rendering.parameters["ApiAuth"]]
    assert route["AuthorizationType"] == expected
    assert ("AuthorizerId" in route) is (expected == "JWT")
    assert ("JwtAuthorizer" in rendering.resources) is (expected == "JWT")


def test_output_bucket_is_private_encrypted_and_expiring(rendering):
    buckets = rendering.of_type("AWS::S3::Bucket")
    if rendering.parameters["OutputBucket"] != "auto":
        assert buckets == {}
        return
    (bucket,) = buckets.values()
    props = bucket["Properties"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    rules = props["LifecycleConfiguration"]["Rules"]
    assert any(rule.get("ExpirationInDays") for rule in rules)


def test_logs_are_retained_for_a_bounded_time_and_alarms_exist(rendering):
    groups = rendering.of_type("AWS::Logs::LogGroup")
    assert groups and all(g["Properties"].get("RetentionInDays") for g in groups.values())
    (function,) = rendering.of_type("AWS::Lambda::Function").values()
    assert function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] in groups
    metrics = {
        name
        for alarm in rendering.of_type("AWS::CloudWatch::Alarm").values()
        for name in _alarm_metrics(alarm["Properties"])
    }
    assert metrics == {
        "ApproximateNumberOfMessagesVisible",
        "Errors",
        "Throttles",
        "2XXCount",  # the 5xx share: 5XX / (2XX + 4XX + 5XX)
        "4XXCount",
        "5XXCount",
        "TimeToFirstAudio",
        "JobsFailed",
    }


def _alarm_metrics(properties: dict[str, Any]) -> list[str]:
    """The metrics an alarm reads: its one metric, or those of its metric math."""
    if "MetricName" in properties:
        return [properties["MetricName"]]
    stats = [item["MetricStat"] for item in properties["Metrics"] if "MetricStat" in item]
    return [stat["Metric"]["MetricName"] for stat in stats]


def test_function_settings_read_every_variable_the_template_sets(rendering):
    settings = (ROOT / "function" / "instance" / "settings.py").read_text()
    (function,) = rendering.of_type("AWS::Lambda::Function").values()
    for variable in function["Properties"]["Environment"]["Variables"]:
        if variable.startswith("AWS_LAMBDA_"):
            continue  # read by Lambda itself (the exec wrapper of the response-streaming section)
        assert f'"{variable}"' in settings, f"function/instance/settings.py does not read {variable}"


def test_the_function_queues_jobs_on_its_own_queue(rendering):
    (function,) = rendering.of_type("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["COSYVOICE_JOB_QUEUE_URL"] == {"Ref": "JobQueue"}
    assert variables["COSYVOICE_JOB_MAX_TEXT_CHARS"] == rendering.parameters["JobMaxTextChars"]
    # The worker marks a job failed on the receive after which SQS dead-letters its message.
    redrive = rendering.resources["JobQueue"]["Properties"]["RedrivePolicy"]
    assert variables["COSYVOICE_JOB_MAX_RECEIVES"] == redrive["maxReceiveCount"] == "5"
    # It may send to its own queue and to the dead-letter queue, nothing else; it only sends to the latter.
    assert variables["COSYVOICE_DEAD_LETTER_QUEUE_URL"] == {"Ref": "JobDeadLetterQueue"}
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["JobDeadLetterQueue", "Arn"]}
    sends = [s for s in _statements(rendering) if "sqs:SendMessage" in s["Action"]]
    assert sorted((s["Effect"], s["Resource"]["Fn::GetAtt"][0]) for s in sends) == [
        ("Allow", "JobDeadLetterQueue"),
        ("Allow", "JobQueue"),
    ]
    dead_letter_actions = [
        s["Action"]
        for s in _statements(rendering)
        if s["Resource"] == {"Fn::GetAtt": ["JobDeadLetterQueue", "Arn"]}
    ]
    assert dead_letter_actions == ["sqs:SendMessage"]


@pytest.mark.parametrize("reserved", ["0", "25"])
def test_reserved_concurrency_follows_the_parameter(reserved):
    r = render(TEMPLATE, {**REQUIRED, "ReservedConcurrency": reserved})
    (function,) = r.of_type("AWS::Lambda::Function").values()
    expected = None if reserved == "0" else "25"  # 0: unreserved, the property left out
    assert function["Properties"].get("ReservedConcurrentExecutions") == expected


def test_api_throttles_follow_the_parameters():
    r = render(TEMPLATE, {**REQUIRED, "ApiRateLimit": "3", "ApiBurstLimit": "6"})
    settings = r.resources["HttpApiStage"]["Properties"]["DefaultRouteSettings"]
    assert (settings["ThrottlingRateLimit"], settings["ThrottlingBurstLimit"]) == ("3", "6")


def test_snapstart_function_reads_the_artifact_from_its_prefix_only():
    r = render(TEMPLATE, {"ArtifactLocation": "s3://model-bucket/cosyvoice/sft-v1"})
    (function,) = r.of_type("AWS::Lambda::Function").values()
    assert (
        function["Properties"]["Environment"]["Variables"]["COSYVOICE_ARTIFACT"]
        == "s3://model-bucket/cosyvoice/sft-v1"
    )
    reads = [s for s in _statements(r) if s.get("Sid") == "ReadArtifact"]
    assert [s["Resource"] for s in reads] == ["arn:aws:s3:::model-bucket/cosyvoice/sft-v1/*"]


# --- response streaming: the Function URL and the runtime that streams to it ------------------------------

STREAM_ENTRY = ["/var/lang/bin/python3", "-m", "function.awslambda.streaming"]


def stream_url_violations(r: Rendered, enabled: bool = True) -> list[str]:
    """Enabled: one streaming URL, RESPONSE_STREAM, on the alias, never open, and the function starts the
    streaming runtime (without it, Function URL callers would get Mangum's JSON envelope as the body).
    Disabled: no URL, and the function keeps awslambdaric."""
    found = []
    urls = r.of_type("AWS::Lambda::Url")
    if not enabled:
        for name, function in r.of_type("AWS::Lambda::Function").items():
            props = function["Properties"]
            if "ImageConfig" in props or "AWS_LAMBDA_EXEC_WRAPPER" in props["Environment"]["Variables"]:
                found.append(f"{name}: starts function.awslambda.streaming although streaming is disabled")
        return found + [f"{name}: a URL although streaming is disabled" for name in urls]
    (alias_name,) = r.of_type("AWS::Lambda::Alias")
    for name, url in urls.items():
        props = url["Properties"]
        if props.get("InvokeMode") != "RESPONSE_STREAM":
            found.append(f"{name}: InvokeMode {props.get('InvokeMode')}")
        if props.get("AuthType") != "AWS_IAM":
            found.append(f"{name}: AuthType {props.get('AuthType')} (anyone could spend the compute)")
        if props.get("TargetFunctionArn") != {"Ref": alias_name}:
            found.append(f"{name}: not on the alias")
    for name, permission in r.of_type("AWS::Lambda::Permission").items():
        if permission["Properties"].get("Principal") == "*":
            found.append(f"{name}: a public invoke permission")
    for name, function in r.of_type("AWS::Lambda::Function").items():
        props = function["Properties"]
        if props.get("PackageType") == "Image":
            started = props.get("ImageConfig", {}).get("EntryPoint") == STREAM_ENTRY
        else:
            wrapper = props["Environment"]["Variables"].get("AWS_LAMBDA_EXEC_WRAPPER", "")
            started = wrapper.startswith("/var/task/") and _is_stream_bootstrap(wrapper[len("/var/task/") :])
        if not started:
            found.append(f"{name}: does not start function.awslambda.streaming")
    if len(urls) != 1:
        found.append(f"{len(urls)} function URLs")
    return found


def _is_stream_bootstrap(path: str) -> bool:
    script = ROOT / path
    return (
        script.is_file()
        and os.access(script, os.X_OK)
        and "-m function.awslambda.streaming" in script.read_text()
        and not any(script.relative_to(ROOT).match(pattern) for pattern in build_zip.UNUSED)
    )


def test_stream_url_guards(rendering):
    enabled = rendering.parameters["StreamingUrl"] == "enabled"
    assert stream_url_violations(rendering, enabled) == []
    if enabled:
        assert rendering.outputs["StreamUrl"]["Value"] == {"Fn::GetAtt": ["StreamUrl", "FunctionUrl"]}
    else:
        assert "StreamUrl" not in rendering.outputs


def test_guard_catches_an_open_or_buffered_stream_url_and_a_function_without_the_stream_runtime():
    def edit(resources):
        resources["StreamUrl"]["Properties"].update(AuthType="NONE", InvokeMode="BUFFERED")
        del resources["ZipFunction"]["Properties"]["Environment"]["Variables"]["AWS_LAMBDA_EXEC_WRAPPER"]

    found = " ".join(stream_url_violations(_broken(edit, StreamingUrl="enabled"), enabled=True))
    assert "InvokeMode BUFFERED" in found and "AuthType NONE" in found
    assert "ZipFunction: does not start function.awslambda.streaming" in found


def test_guard_catches_the_streaming_runtime_started_although_streaming_is_disabled():
    def edit(resources):
        variables = resources["ZipFunction"]["Properties"]["Environment"]["Variables"]
        variables["AWS_LAMBDA_EXEC_WRAPPER"] = "/var/task/function/awslambda/streaming/bootstrap"

    found = " ".join(stream_url_violations(_broken(edit), enabled=False))
    assert "ZipFunction: starts function.awslambda.streaming although streaming is disabled" in found


# --- previews need no AWS configuration -------------------------------------------------------------------


@pytest.fixture
def no_aws_region(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def test_preview_without_a_region_uses_the_placeholder_and_says_so(no_aws_region, capsys):
    assert configured_region() is None
    assert main([f"ArtifactLocation={REQUIRED['ArtifactLocation']}"]) == 0
    out = capsys.readouterr().out
    assert f"no AWS region configured; previewing for {PLACEHOLDER_REGION} (a placeholder)" in out
    assert "AWS::Lambda::Function" in out and "ZipFunction" in out
    assert f".execute-api.{PLACEHOLDER_REGION}.amazonaws.com/" in out
    assert "AWS_DEFAULT_REGION" not in os.environ  # the transform's region is scoped to the call


def test_preview_uses_the_configured_region(no_aws_region, monkeypatch, capsys):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert main([f"ArtifactLocation={REQUIRED['ArtifactLocation']}"]) == 0
    out = capsys.readouterr().out
    assert "placeholder" not in out and ".execute-api.eu-west-1.amazonaws.com/" in out


def test_a_china_region_renders_its_partition(no_aws_region):
    r = render(TEMPLATE, REQUIRED, region="cn-north-1")
    assert r.outputs["ApiUrl"]["Value"].endswith(".execute-api.cn-north-1.amazonaws.com.cn/")
    reads = [s for s in _statements(r) if s.get("Sid") == "ReadArtifact"]
    assert [s["Resource"] for s in reads] == ["arn:aws-cn:s3:::model-bucket/cosyvoice/sft-v1/*"]


# --- the guards catch what they are for ------------------------------------------------------------------


def _broken(edit, **parameters: str) -> Rendered:
    template = copy.deepcopy(TEMPLATE)
    edit(template["Resources"])
    return render(template, {**REQUIRED, **parameters})


def test_guard_catches_snapstart_with_provisioned_concurrency():
    def edit(resources):
        resources["ZipFunction"]["Properties"]["ProvisionedConcurrencyConfig"] = {
            "ProvisionedConcurrentExecutions": 1
        }

    assert "provisioned concurrency" in " ".join(snapstart_violations(_broken(edit)))


def test_guard_catches_snapstart_with_large_ephemeral_storage():
    def edit(resources):
        resources["ZipFunction"]["Properties"]["EphemeralStorage"] = {"Size": 1024}

    assert "ephemeral storage" in " ".join(snapstart_violations(_broken(edit)))


def test_guard_catches_an_unscoped_s3_write():
    def edit(resources):
        statements = resources["FunctionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        statements.append(
            {"Sid": "Wide", "Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/*"}
        )

    assert s3_write_violations(_broken(edit)) == ["Wide: arn:aws:s3:::b/*"]


def test_guard_catches_a_short_visibility_timeout_and_missing_batch_failures():
    def edit(resources):
        resources["JobQueue"]["Properties"]["VisibilityTimeout"] = 600
        resources["JobQueueMapping"]["Properties"].pop("FunctionResponseTypes")

    assert len(queue_violations(_broken(edit))) == 2


def test_guard_catches_a_low_max_receive_count():
    def edit(resources):
        resources["JobQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] = 3

    assert queue_violations(_broken(edit)) == ["JobQueue: maxReceiveCount 3 < 5"]


def test_guard_catches_a_dangling_reference():
    def edit(resources):
        resources["HttpApiIntegration"]["Properties"]["IntegrationUri"] = {"Ref": "ImageFunction.Alias"}

    assert dangling_references(_broken(edit))


def test_the_flow_steps_parameter_is_the_functions_default_within_the_options_range(rendering):
    from function.core.options import MAX_FLOW_STEPS, MIN_FLOW_STEPS

    (function,) = rendering.of_type("AWS::Lambda::Function").values()
    assert (
        function["Properties"]["Environment"]["Variables"]["COSYVOICE_FLOW_STEPS"]
        == (rendering.parameters["FlowSteps"])
    )
    parameter = TEMPLATE["Parameters"]["FlowSteps"]
    assert parameter["Default"] == 10  # v1's: unchanged audio unless the operator chooses
    assert (parameter["MinValue"], parameter["MaxValue"]) == (MIN_FLOW_STEPS, MAX_FLOW_STEPS)


@pytest.mark.parametrize("secret", ["", "cosyvoice/polly-keys"])
def test_pollys_routes_are_open_at_the_gateway_only_with_key_pairs_from_secrets_manager(secret: str):
    rendered = render(TEMPLATE, {**REQUIRED, "ApiAuth": "iam", "PollyKeysSecret": secret})
    (function,) = rendered.of_type("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    routes = rendered.of_type("AWS::ApiGatewayV2::Route")
    unauthorised = {
        r["Properties"]["RouteKey"] for r in routes.values() if r["Properties"]["AuthorizationType"] == "NONE"
    }
    if not secret:
        assert "COSYVOICE_SIGV4_KEYS" not in variables and unauthorised == {"GET /healthz"}
        return
    assert unauthorised == {"GET /healthz", "ANY /polly/{proxy+}"}
    assert variables["COSYVOICE_SIGV4_KEYS"] == "{{resolve:secretsmanager:cosyvoice/polly-keys:SecretString}}"
    assert rendered.outputs["PollyEndpoint"]["Value"].endswith(".amazonaws.com/polly")


def test_job_parts_window_and_end_topic_follow_the_parameters(rendering):
    (function,) = rendering.of_type("AWS::Lambda::Function").values()
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["COSYVOICE_JOB_PART_SECONDS"] == rendering.parameters["JobPartSeconds"]
    assert variables["COSYVOICE_JOB_PARALLEL"] == rendering.parameters["JobParallel"]
    # The window leaves environments for the jobs behind a long one.
    assert int(rendering.parameters["JobParallel"]) < int(rendering.parameters["QueueMaxConcurrency"])
    assert variables["COSYVOICE_JOB_TOPIC_ARN"] == {"Ref": "JobTopic"}
    assert rendering.resources["JobTopic"]["Type"] == "AWS::SNS::Topic"
    publishes = [s for s in _statements(rendering) if "sns:Publish" in s["Action"]]
    assert [(s["Effect"], s["Resource"]) for s in publishes] == [("Allow", {"Ref": "JobTopic"})]
    (mapping,) = rendering.of_type("AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["BatchSize"] == 1  # one part per invocation
