"""Render template.yaml offline for one set of parameters: what CloudFormation would actually create.

    python -m infra.render WarmStart=provisioned ProvisionedConcurrencyMax=4

The SAM transform runs locally (aws-sam-translator, as `sam deploy` runs it in the cloud); then the
template's conditions are evaluated for the given parameters, resources whose condition is false are
dropped, and `Fn::If`, `AWS::NoValue` and parameter references are resolved. Linters check the template
with every branch at once; the guard tests check each rendering, where the combinations that lint clean
but fail at deploy time (SnapStart with provisioned concurrency, ...) become visible.

Nothing is sent to AWS and no credentials are needed. The region is the configured one, or a placeholder
(us-east-1, said so in the output) when none is; the account id and stack name are placeholders.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"
# `sam deploy` uploads local code first; the transform only accepts what it leaves behind.
PACKAGED_CODE_URI = "s3://sam-artifacts/lambda.zip"
# A preview needs no AWS account or configuration: these stand in for what CloudFormation fills in.
PSEUDO = {
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "tts",
}
# Used when no region is configured (AWS_REGION, AWS_DEFAULT_REGION, the AWS config file).
PLACEHOLDER_REGION = "us-east-1"
_NO_VALUE = object()
_SUB_NAME = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass(frozen=True)
class Rendered:
    parameters: dict[str, Any]
    conditions: dict[str, bool]
    resources: dict[str, dict[str, Any]]
    outputs: dict[str, Any]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {name: res for name, res in self.resources.items() if res["Type"] == resource_type}


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    return dict(yaml_parse(path.read_text(encoding="utf-8")))


def parameter_values(template: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """Defaults overlaid with overrides; CommaDelimitedList values become lists, as in CloudFormation."""
    declared = template.get("Parameters", {})
    unknown = set(overrides) - set(declared)
    if unknown:
        raise KeyError(f"unknown parameters {sorted(unknown)}")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        value = str(overrides.get(name, spec.get("Default", "")))
        values[name] = value.split(",") if spec["Type"] == "CommaDelimitedList" else value
    return values


class _Loader:
    """The transform asks for AWS managed policy ARNs by name; this template names none."""

    def load(self) -> dict[str, str]:
        return {}


def configured_region() -> str | None:
    """The region the AWS CLI and SDKs would use here, or None (boto3 reads all but AWS_REGION)."""
    import boto3

    return os.environ.get("AWS_REGION") or boto3.session.Session().region_name


def pseudo_parameters(region: str) -> dict[str, str]:
    from samtranslator.translator.arn_generator import ArnGenerator

    partition = ArnGenerator.get_partition_name(region)
    suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return {**PSEUDO, "AWS::Region": region, "AWS::Partition": partition, "AWS::URLSuffix": suffix}


def sam_transform(template: Mapping[str, Any], parameters: Mapping[str, Any], region: str) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    packaged = copy.deepcopy(dict(template))
    for resource in packaged["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = PACKAGED_CODE_URI
    # The transform asks boto3 for a region even when AWS::Region is given, and fails without one: it
    # gets the preview's, so the rendering never depends on (or needs) this machine's AWS configuration.
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": region}):
        return dict(transform(packaged, {**pseudo_parameters(region), **parameters}, _Loader()))


def render(
    template: Mapping[str, Any], overrides: Mapping[str, str] | None = None, region: str = PLACEHOLDER_REGION
) -> Rendered:
    parameters = parameter_values(template, overrides or {})
    transformed = sam_transform(template, parameters, region)
    resolver = _Resolver({**pseudo_parameters(region), **parameters}, transformed.get("Conditions", {}))
    resources = {
        name: resolver.resolve({k: v for k, v in res.items() if k != "Condition"})
        for name, res in transformed["Resources"].items()
        if resolver.condition(res.get("Condition"))
    }
    outputs = {
        name: resolver.resolve({k: v for k, v in out.items() if k != "Condition"})
        for name, out in transformed.get("Outputs", {}).items()
        if resolver.condition(out.get("Condition"))
    }
    return Rendered(parameters, dict(resolver.values), resources, outputs)


class _Resolver:
    def __init__(self, parameters: Mapping[str, Any], conditions: Mapping[str, Any]) -> None:
        self.parameters = dict(parameters)
        self.definitions = conditions
        self.values: dict[str, bool] = {}

    def condition(self, name: str | None) -> bool:
        if name is None:
            return True
        if name not in self.values:
            self.values[name] = self._truth(self.definitions[name])
        return self.values[name]

    def _truth(self, node: Any) -> bool:
        ((fn, args),) = node.items()
        if fn == "Condition":
            return self.condition(args)
        if fn == "Fn::Equals":
            left, right = (self.resolve(arg) for arg in args)
            return str(left) == str(right)
        if fn == "Fn::Not":
            return not self._truth(args[0])
        if fn == "Fn::And":
            return all(self._truth(arg) for arg in args)
        if fn == "Fn::Or":
            return any(self._truth(arg) for arg in args)
        raise ValueError(f"unsupported condition function {fn}")

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            items = (self.resolve(item) for item in node)
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Fn::If":
                return self.resolve(node["Fn::If"][1] if self.condition(value[0]) else value[2])
            if key == "Ref":
                if value == "AWS::NoValue":
                    return _NO_VALUE
                return self.parameters.get(value, node)
            if key == "Fn::Sub":
                return self._sub(value)
            if key in ("Fn::Join", "Fn::Select", "Fn::Split"):
                return self._string_function(key, self.resolve(value), node)
        items = ((key, self.resolve(value)) for key, value in node.items())
        return {key: value for key, value in items if value is not _NO_VALUE}

    def _text(self, node: Any) -> Any:
        """A resolved value as text; references to resources become <Name> / <Name.Attr> placeholders."""
        value = self.resolve(node)
        if isinstance(value, dict) and "Ref" in value:
            return f"<{value['Ref']}>"
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            return "<{}>".format(".".join(value["Fn::GetAtt"]))
        return value

    def _sub(self, value: Any) -> str:
        text, variables = (value, {}) if isinstance(value, str) else value
        names = {**self.parameters, **{k: self._text(v) for k, v in variables.items()}}
        return _SUB_NAME.sub(lambda m: str(names.get(m.group(1), f"<{m.group(1)}>")), text)

    def _string_function(self, key: str, args: list[Any], original: dict[str, Any]) -> Any:
        if key == "Fn::Join":
            return args[0].join(str(self._text(part)) for part in args[1])
        if key == "Fn::Split" and isinstance(args[1], str):
            return args[1].split(args[0])
        if key == "Fn::Select" and isinstance(args[1], list):
            return args[1][int(args[0])]
        return original


def main(argv: list[str]) -> int:
    overrides = dict(arg.split("=", 1) for arg in argv)
    region = configured_region()
    if region is None:
        print(f"note: no AWS region configured; previewing for {PLACEHOLDER_REGION} (a placeholder)")
    rendered = render(load_template(), overrides, region or PLACEHOLDER_REGION)
    for name, resource in sorted(rendered.resources.items(), key=lambda item: item[1]["Type"]):
        print(f"{resource['Type']:45} {name}")
    print(json.dumps(rendered.outputs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
