"""The dashboards, alarms and scrape configuration shipped in infra/ and template.yaml name only metrics
the code exports, and scrape where the code serves them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.core import REGISTRY

from function.api.app import app
from function.observe import metrics  # noqa: F401 - registers the metrics this test reads
from function.observe.embedded import METRICS
from infra.render import load_template, render

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
GRAFANA = ROOT / "infra" / "grafana" / "cosyvoice.json"
OBSERVE = K8S / "observe"
# The sample names of each kind of metric family, as Prometheus' exposition writes them.
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created")}
PROMETHEUS_NAME = re.compile(r"\b(?:cosyvoice|process|python)_[a-z0-9_]+")
REQUIRED = {
    "ArtifactLocation": "s3://model-bucket/cosyvoice/sft-v1",
    "JwtIssuer": "https://issuer.example.com",
}


def exported() -> set[str]:
    """Every sample name this process's registry exports (labelled families included before any use)."""
    names = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def expressions(node: Any) -> list[str]:
    """Every PromQL `expr` in a JSON or YAML document."""
    if isinstance(node, dict):
        own = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return own + [found for value in node.values() for found in expressions(value)]
    if isinstance(node, list):
        return [found for value in node for found in expressions(value)]
    return []


def test_every_metric_the_grafana_dashboard_and_the_rules_name_is_exported() -> None:
    rules = yaml.safe_load((OBSERVE / "prometheusrule.yaml").read_text())
    found = expressions(json.loads(GRAFANA.read_text())) + expressions(rules)
    assert len(found) > 10
    named = {name for expr in found for name in PROMETHEUS_NAME.findall(expr)}
    assert {"cosyvoice_requests_total", "cosyvoice_time_to_first_audio_seconds_bucket"} <= named
    assert named <= exported(), named - exported()


def test_the_rule_reader_sees_a_metric_that_is_not_exported() -> None:
    named = set(PROMETHEUS_NAME.findall('rate(cosyvoice_requets_total{code="500"}[5m])'))
    assert named and not named <= exported()


def cloudwatch_names(body: dict[str, Any], namespace: str) -> set[str]:
    """The metrics of `namespace` a CloudWatch dashboard body names: in metric rows and SEARCH()es."""
    names = set()
    for widget in body["widgets"]:
        for row in widget["properties"].get("metrics", []):
            if row and row[0] == namespace:
                names.add(row[1])
            for item in row:
                if isinstance(item, dict) and f"{{{namespace}," in item.get("expression", ""):
                    names.update(re.findall(r'MetricName="([^"]+)"', item["expression"]))
    return names


def test_every_metric_the_cloudwatch_dashboard_and_alarms_name_is_one_the_function_writes() -> None:
    rendered = render(load_template(), REQUIRED)
    namespace = rendered.parameters["MetricsNamespace"]
    (dashboard,) = rendered.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.loads(dashboard["Properties"]["DashboardBody"])
    named = cloudwatch_names(body, namespace)
    assert {"ResponseLatency", "TimeToFirstAudio", "RequestCharacters", "JobsFailed"} <= named
    for alarm in rendered.of_type("AWS::CloudWatch::Alarm").values():
        properties = alarm["Properties"]
        stats = [
            properties,
            *(item["MetricStat"]["Metric"] for item in properties.get("Metrics", []) if "MetricStat" in item),
        ]
        named |= {stat["MetricName"] for stat in stats if stat.get("Namespace") == namespace}
    assert named <= set(METRICS), named - set(METRICS)
    assert cloudwatch_names(
        {"widgets": [{"properties": {"metrics": [[namespace, "Latency"]]}}]}, namespace
    ) == {"Latency"}


def _pod_spec(path: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """A Deployment's pod labels and its one container."""
    deployment = yaml.safe_load(path.read_text())
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    return template["metadata"]["labels"], container


def test_the_pod_monitor_scrapes_the_server_and_the_workers_where_they_serve_metrics() -> None:
    """kubernetes_validate has no schema for the operator's CRDs: their shape is checked here."""
    component = yaml.safe_load((OBSERVE / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert set(component["resources"]) == {p.name for p in OBSERVE.glob("*.yaml")} - {"kustomization.yaml"}
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert not any("observe" in entry for entry in base["resources"] + base.get("components", []))
    monitor = yaml.safe_load((OBSERVE / "podmonitor.yaml").read_text())
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "PodMonitor")
    (selector,) = monitor["spec"]["selector"]["matchExpressions"]
    endpoints = {endpoint["port"]: endpoint for endpoint in monitor["spec"]["podMetricsEndpoints"]}
    assert all(endpoint["path"] == "/metrics" for endpoint in endpoints.values())
    for path in (K8S / "deployment.yaml", K8S / "workers" / "worker-deployment.yaml"):
        labels, container = _pod_spec(path)
        assert selector["operator"] == "In" and labels[selector["key"]] in selector["values"]
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        assert set(ports) & set(endpoints), f"{path.name}: no port the monitor scrapes"
    _, server = _pod_spec(K8S / "deployment.yaml")
    assert "/metrics" in {getattr(route, "path", None) for route in app.routes}  # on the API's own port
    _, worker = _pod_spec(K8S / "workers" / "worker-deployment.yaml")
    env = {item["name"]: item.get("value") for item in worker["env"]}
    assert {"name": "metrics", "containerPort": int(env["COSYVOICE_METRICS_PORT"])} in worker["ports"]
    rules = yaml.safe_load((OBSERVE / "prometheusrule.yaml").read_text())
    assert (rules["apiVersion"], rules["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rules["metadata"]["labels"]["release"] == monitor["metadata"]["labels"]["release"]
    assert all(rule["alert"] and rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"])
