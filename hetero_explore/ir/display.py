"""The display registry: how data objects are drawn, registered by the views.

Data classes (a plan, a run, an explorer, a plan comparison) never import their views: a
method such as ``Plan.to_graphviz`` or ``RunResult._repr_html_`` asks this registry for the
function registered under (view name, the object's class or a base class) and calls it. The
views register themselves (:mod:`hetero_explore.viz`, imported by the package's front door),
each with its heavy module (graphviz, ipywidgets) imported only when it draws. So layers
point one way and ``import hetero_explore`` stays light."""

from __future__ import annotations

from typing import Callable

from .errors import MissingDependencyError

_VIEWS: dict[tuple[str, type], Callable] = {}


def register(view: str, cls: type, fn: Callable) -> None:
    """Draw instances of ``cls`` (and subclasses) with ``fn(obj, *args, **kw)`` for ``view``."""
    _VIEWS[(view, cls)] = fn


def lookup(view: str, obj) -> Callable | None:
    """The function registered for ``view`` and ``obj``'s class (nearest base first), or None."""
    for cls in type(obj).__mro__:
        fn = _VIEWS.get((view, cls))
        if fn is not None:
            return fn
    return None


def render(view: str, obj, *args, **kw):
    """Draw ``obj`` with the function registered for ``view``."""
    fn = lookup(view, obj)
    if fn is None:
        raise MissingDependencyError(
            f"no {view!r} view is registered for {type(obj).__name__}: the views register when "
            "hetero_explore is imported (import hetero_explore, not only a submodule of it)")
    return fn(obj, *args, **kw)


def views() -> list[tuple[str, str]]:
    """(view, class name) of every registered view, sorted."""
    return sorted((v, c.__name__) for v, c in _VIEWS)
