"""Deployment tooling: the Lambda zip builder, the artifact uploader, the template renderer.

Nothing here is imported by `function/`; these run on a developer's machine or in CI.
"""
