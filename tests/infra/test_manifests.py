"""Kubernetes manifests, docker compose and samconfig agree with the image and the template."""

from __future__ import annotations

import inspect
import shlex
import tempfile
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from function.api.app import app
from function.instance import settings as settings_module
from function.instance.settings import Settings
from infra import build_zip
from infra.render import load_template

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
KUBERNETES_VERSION = "1.30"  # the oldest version still in standard support on EKS/GKE/AKS at writing
ARTIFACT_IN_IMAGE = "/opt/cosyvoice/artifact"  # infra/Dockerfile's COPY target and COSYVOICE_ARTIFACT
SERVE = ["python3", "-m", "function", "serve"]


def _manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        (doc,) = yaml.safe_load_all(path.read_text())
        docs[doc["kind"]] = doc
    return docs


MANIFESTS = _manifests()


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def _container() -> dict:
    (container,) = MANIFESTS["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


def _literal_env(container: dict) -> dict[str, str]:
    """The container's settings given as values (those from the optional ConfigMap are the stack's)."""
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


def _settings(env: dict[str, str]) -> Settings:
    """The settings the server would read from this environment (each name a documented setting), with a
    key in the file the Secret would mount."""
    for name in env:
        assert name in (settings_module.__doc__ or ""), (
            f"{name} is not a setting of function.instance.settings"
        )
    with tempfile.NamedTemporaryFile("w", suffix=".keys") as keys:
        keys.write("a-key\n")
        keys.flush()
        mounted = {"COSYVOICE_API_KEYS_FILE": keys.name} if "COSYVOICE_API_KEYS_FILE" in env else {}
        return Settings.from_env({"COSYVOICE_ARTIFACT": ARTIFACT_IN_IMAGE, **env, **mounted})


@pytest.mark.parametrize("kind", sorted(MANIFESTS))
def test_manifest_is_valid_for_kubernetes(kind):
    kubernetes_validate.validate(MANIFESTS[kind], KUBERNETES_VERSION, strict=True)


def test_validation_rejects_a_misspelt_field():
    broken = yaml.safe_load(yaml.safe_dump(MANIFESTS["Deployment"]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


def test_deployment_serves_the_baked_artifact_and_probes_readiness():
    container = _container()
    assert container["command"] == SERVE
    args = container["args"]
    assert _option(args, "--artifacts") == ARTIFACT_IN_IMAGE
    port = int(_option(args, "--port"))
    assert container["ports"] == [{"name": "http", "containerPort": port}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"]["memory"] and container["resources"]["limits"]["memory"]


def test_the_pod_runs_as_many_syntheses_as_it_requests_cores_for():
    container = _container()
    settings = _settings(_literal_env(container))
    assert settings.threads is not None and settings.max_concurrent is not None  # a node has more cores
    assert settings.threads * settings.max_concurrent == int(container["resources"]["requests"]["cpu"])


def test_the_grace_period_outlasts_the_prestop_pause_and_the_drain():
    pod = MANIFESTS["Deployment"]["spec"]["template"]["spec"]
    container = _container()
    settings = _settings(_literal_env(container))
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pause > 0  # endpoints are removed while the pod still serves
    assert pod["terminationGracePeriodSeconds"] > pause + settings.drain_seconds


def test_the_drain_outlasts_every_accepted_request_at_its_time_limit():
    """A queued request waits for the ones ahead of it, then runs to its limit at most: all of them
    finish inside the drain, so a shutdown cuts none."""
    settings = _settings(_literal_env(_container()))
    assert settings.max_request_seconds is not None and settings.max_concurrent is not None
    queued = settings.max_queued if settings.max_queued is not None else 2 * settings.max_concurrent
    rounds = 1 + -(-queued // settings.max_concurrent)
    assert settings.drain_seconds >= rounds * settings.max_request_seconds


def test_liveness_asks_the_event_loop_and_outlasts_readiness():
    """Liveness probes /healthz, which the event loop answers however busy the synthesis pool is (an
    `async def` route); readiness probes /readyz, which says 503 while the pod is saturated. A failing
    pod leaves the endpoints long before liveness would restart it and cut its requests."""
    container = _container()
    liveness, readiness = container["livenessProbe"], container["readinessProbe"]
    assert container["startupProbe"]["httpGet"]["path"] == liveness["httpGet"]["path"] == "/healthz"
    assert readiness["httpGet"]["path"] == "/readyz"
    endpoints = {route.path: route.endpoint for route in app.routes if hasattr(route, "endpoint")}
    assert inspect.iscoroutinefunction(endpoints["/healthz"])
    assert inspect.iscoroutinefunction(endpoints["/readyz"])

    def window(probe: dict) -> int:  # seconds of failures before the probe acts
        return probe["periodSeconds"] * probe.get("failureThreshold", 3)

    assert window(liveness) >= 4 * window(readiness)


def test_service_hpa_and_pdb_point_at_the_deployment():
    deployment = MANIFESTS["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert MANIFESTS["Service"]["spec"]["selector"].items() <= labels.items()
    assert MANIFESTS["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert MANIFESTS["Service"]["spec"]["ports"][0]["targetPort"] == "http"
    target = MANIFESTS["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])


def test_compose_runs_the_same_image_as_server_and_as_lambda():
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())
    tts, lam = compose["services"]["tts"], compose["services"]["lambda"]
    for service in (tts, lam):
        build = service["build"]
        assert (
            ROOT / "infra" / build["context"] / build["dockerfile"]
        ).resolve() == ROOT / "infra" / "Dockerfile"
    assert tts["image"] == lam["image"]
    assert tts["entrypoint"] == SERVE
    assert _option(tts["command"], "--artifacts") == ARTIFACT_IN_IMAGE
    port = _option(tts["command"], "--port")
    assert tts["ports"] == [f"{port}:{port}"]
    assert f"127.0.0.1:{port}/healthz" in " ".join(tts["healthcheck"]["test"])  # liveness, never busy
    settings = _settings(tts["environment"])
    assert settings.threads is not None and settings.max_concurrent is not None
    assert settings.threads * settings.max_concurrent == tts["cpus"]
    # `docker compose stop` waits for the drain before it kills
    assert int(tts["stop_grace_period"].removesuffix("s")) > settings.drain_seconds
    assert "entrypoint" not in lam  # the base image's entrypoint: runtime client + emulator


def test_the_pod_reads_its_api_keys_from_a_required_secret():
    container, pod = _container(), MANIFESTS["Deployment"]["spec"]["template"]["spec"]
    path = Path({item["name"]: item.get("value") for item in container["env"]}["COSYVOICE_API_KEYS_FILE"])
    (mount,) = [item for item in container["volumeMounts"] if Path(item["mountPath"]) == path.parent]
    assert mount["readOnly"] is True
    (volume,) = [item for item in pod["volumes"] if item["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "cosyvoice-api-keys"
    assert volume["secret"]["optional"] is False  # no Secret, no pod: never an open API by accident
    assert f"--from-file={path.name}=" in (K8S / "deployment.yaml").read_text()  # the documented command


def test_compose_reads_the_servers_api_keys_from_an_ignored_env_file():
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())
    assert compose["services"]["tts"]["env_file"] == "api-keys.env"
    assert "infra/api-keys.env" in (ROOT / ".gitignore").read_text().splitlines()
    assert "env_file" not in compose["services"]["lambda"]  # Lambda keeps IAM / JWT


def test_samconfig_overrides_name_real_parameters_with_allowed_values():
    config = tomllib.loads((ROOT / "infra" / "samconfig.toml").read_text())
    parameters = load_template()["Parameters"]
    environments = [env for env in config if env != "version"]
    assert {"default", "provisioned"} <= set(environments)
    for env in environments:
        deploy = config[env].get("deploy", {}).get("parameters")
        if not deploy:
            continue
        overrides = dict(item.split("=", 1) for item in shlex.split(deploy["parameter_overrides"]))
        for name, value in overrides.items():
            assert name in parameters, f"{env}: unknown parameter {name}"
            allowed = parameters[name].get("AllowedValues")
            assert allowed is None or value in map(str, allowed), f"{env}: {name}={value}"
        assert "CAPABILITY_IAM" in deploy["capabilities"]
        # the template always has an image function, and sam deploy refuses it without a repository
        assert deploy["resolve_image_repos"] is True


def test_the_snapstart_deploy_needs_no_sam_build():
    """The default environment deploys template.yaml itself: `sam build` (Docker, for ImageFunction,
    whatever WarmStart says) never runs. `sam deploy` uploads a .zip CodeUri unchanged and skips an
    image function whose ImageUri is an intrinsic, so the prebuilt zip is all it needs."""
    deploy = tomllib.loads((ROOT / "infra" / "samconfig.toml").read_text())["default"]["deploy"]["parameters"]
    assert (ROOT / deploy["template_file"]).resolve() == ROOT / "template.yaml"
    assert "WarmStart=snapstart" in shlex.split(deploy["parameter_overrides"])
    resources = load_template()["Resources"]
    assert ROOT / resources["ZipFunction"]["Properties"]["CodeUri"] == build_zip.DEFAULT_ZIP
    assert resources["ImageFunction"]["Properties"]["ImageUri"] == {"Ref": "ImageUri"}


WORKERS = K8S / "workers"


def _worker_manifests() -> dict[str, dict]:
    return {
        doc["kind"]: doc
        for path in sorted(WORKERS.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
    }


def test_the_workers_are_a_component_the_base_does_not_need():
    component = yaml.safe_load((WORKERS / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert set(component["resources"]) == {p.name for p in WORKERS.glob("*.yaml")} - {"kustomization.yaml"}
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert not any("workers" in entry for entry in base["resources"] + base.get("components", []))


@pytest.mark.parametrize("kind", ["Deployment", "ServiceAccount"])
def test_worker_manifests_are_valid_for_kubernetes(kind):
    kubernetes_validate.validate(_worker_manifests()[kind], KUBERNETES_VERSION, strict=True)


def test_keda_scales_the_worker_deployment_on_its_own_queue_from_zero():
    docs = _worker_manifests()
    deployment, scaled = docs["Deployment"], docs["ScaledObject"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python3", "-m", "function", "worker"]
    assert _option(container["args"], "--artifacts") == ARTIFACT_IN_IMAGE
    env = {item["name"]: item for item in container["env"]}
    for name in env:
        assert name.startswith("AWS_") or name in (settings_module.__doc__ or ""), name
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] == 0
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "aws-sqs-queue"
    assert (
        trigger["metadata"]["queueURLFromEnv"] == "COSYVOICE_JOB_QUEUE_URL"
        and "COSYVOICE_JOB_QUEUE_URL" in env
    )
    assert trigger["authenticationRef"]["name"] == docs["TriggerAuthentication"]["metadata"]["name"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    # One part at a time on every core the pod asks for; fewer parts of one job in flight than pods.
    assert int(env["COSYVOICE_THREADS"]["value"]) == int(container["resources"]["requests"]["cpu"])
    assert int(env["COSYVOICE_JOB_PARALLEL"]["value"]) < scaled["spec"]["maxReplicaCount"]


def test_compose_runs_a_worker_of_the_same_image_only_when_asked():
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())
    worker, tts = compose["services"]["worker"], compose["services"]["tts"]
    assert worker["image"] == tts["image"] and worker["profiles"] == ["jobs"]
    assert worker["entrypoint"] == ["python3", "-m", "function", "worker"]
    assert _option(worker["command"], "--artifacts") == ARTIFACT_IN_IMAGE
    assert int(worker["environment"]["COSYVOICE_THREADS"]) == worker["cpus"]


# Int8 synthesis on two CPUs, seconds per second of speech, rounded up from docs/performance.md's long
# text: what a worker's drain must cover for one part.
PART_SECONDS_PER_AUDIO_SECOND = 1.8
WRITE_AND_SEND_SECONDS = 20  # after the drain: the finished part's write and its successor's message


def _worker_container() -> dict:
    (container,) = _worker_manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return container


def _env_values(container: dict) -> dict[str, str | dict]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def test_the_stack_the_workers_and_compose_agree_on_where_jobs_live_and_their_part_size():
    """Every worker a deployment runs beside the stack's own Lambda finds the stack's jobs: the same output
    prefix and part size as template.yaml's defaults, the bucket and the queue from the one ConfigMap the
    stack's outputs fill (Kubernetes) or the same variables (compose)."""
    parameters = load_template()["Parameters"]
    prefix, part_seconds = parameters["OutputPrefix"]["Default"], str(parameters["JobPartSeconds"]["Default"])
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())["services"]
    serve, worker = _env_values(_container()), _env_values(_worker_container())
    for env in (serve, worker, compose["tts"]["environment"], compose["worker"]["environment"]):
        assert env["COSYVOICE_OUTPUT_PREFIX"] == prefix
    for env in (worker, compose["worker"]["environment"]):
        assert env["COSYVOICE_JOB_PART_SECONDS"] == part_seconds
    for name, key in (("COSYVOICE_OUTPUT_BUCKET", "bucket"), ("COSYVOICE_JOB_QUEUE_URL", "queue-url")):
        for env in (serve, worker):
            reference = env[name]["configMapKeyRef"]  # type: ignore[index]
            assert (reference["name"], reference["key"]) == ("cosyvoice-jobs", key)
        for service in ("tts", "worker"):
            assert compose[service]["environment"][name] == f"${{{name}:-}}"


def test_a_worker_stopped_by_scale_in_has_the_time_to_finish_its_part():
    spec = _worker_manifests()["Deployment"]["spec"]["template"]["spec"]
    env = _env_values(_worker_container())
    drain, part = int(env["COSYVOICE_DRAIN_SECONDS"]), int(env["COSYVOICE_JOB_PART_SECONDS"])  # type: ignore[arg-type]
    assert drain >= part * PART_SECONDS_PER_AUDIO_SECOND
    assert spec["terminationGracePeriodSeconds"] >= drain + WRITE_AND_SEND_SECONDS
    compose = yaml.safe_load((ROOT / "infra" / "docker-compose.yml").read_text())["services"]["worker"]
    assert int(compose["environment"]["COSYVOICE_DRAIN_SECONDS"]) == drain
    assert int(compose["stop_grace_period"].removesuffix("s")) >= drain + WRITE_AND_SEND_SECONDS
