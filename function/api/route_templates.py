"""Which of the app's routes a request is for, by the route's template (`/v1/jobs/{id}`), the label a
metric and a log line carry: bounded by the routes there are, whatever paths callers send."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

UNMATCHED = "other"  # the template of a path no route matches


def flattened(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too: FastAPI keeps an included router as one route object
    holding the router (`original_router`), whose routes carry their own tags. Included without a
    prefix here, so their paths match as they stand."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from flattened(included.routes)
        else:
            yield route


def template_of(routes: Sequence[BaseRoute], scope: Scope) -> str:
    """The template of the route `scope` matches (its path, or only its method: a 405's), else UNMATCHED."""
    partial = None
    for route in flattened(routes):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", UNMATCHED))
        if match is Match.PARTIAL and partial is None:
            partial = str(getattr(route, "path", UNMATCHED))
    return partial or UNMATCHED


__all__ = ["UNMATCHED", "flattened", "template_of"]
