"""Views of plans, runs and explorers: the Graphviz DAG, the HTML report, the notebook
displays and the app.

Importing this package (the front door does) registers every view in the display registry
(:mod:`hetero_explore.ir.display`), through which the data classes draw themselves
(``Plan.to_graphviz``, ``Plan.to_html``, ``RunResult._repr_html_``, ``Explorer.show`` ...).
Each view's module, and graphviz or ipywidgets with it, is imported when it first draws."""

from __future__ import annotations

from ..execution.executor import RunResult
from ..ir import display
from ..planner.plan import Plan
from ..planner.plandiff import PlanComparison
from ..session.explorer import Explorer

__all__ = ["provider_color", "provider_colors", "plan_to_graphviz", "PlanGraph", "GraphvizNotFoundError",
           "check_dot", "AUTO_NODE_LIMIT", "plan_to_html"]


def plan_to_graphviz(plan, **kw):
    """See :func:`hetero_explore.viz.graph.plan_to_graphviz`."""
    from .graph import plan_to_graphviz as draw
    return draw(plan, **kw)


def plan_to_html(plan, path=None, run=None, diff=None, **kw):
    """See :func:`hetero_explore.viz.report.plan_to_html`."""
    from .report import plan_to_html as write
    return write(plan, path, run=run, diff=diff, **kw)


def _model_explorer(plan, out_dir=None, run=None, **kw):
    from .model_explorer import to_model_explorer
    return to_model_explorer(plan, out_dir, run, **kw)


def _summary_html(kind: str, text: str, df) -> str:
    from .html import repr_html
    return repr_html(kind, text, df)


def _changes_html(comparison) -> str:
    from .views import render_changes
    return render_changes(comparison)


def _app(explorer):
    from .widget import ExplorerApp
    return ExplorerApp(explorer)


display.register("graphviz", Plan, plan_to_graphviz)
display.register("report", Plan, plan_to_html)
display.register("model_explorer", Plan, _model_explorer)
display.register("html", Plan, lambda p: _summary_html("Plan", p.summary(), p.partitions_df()))
display.register("html", RunResult, lambda r: _summary_html("RunResult", r.summary(), r.timings_df()))
display.register("html", Explorer, lambda ex: _summary_html(
    "Explorer", f"{ex.graph.name}: {len(ex.graph.nodes)} nodes; providers {', '.join(ex.provider_names)}",
    ex.providers_df()))
display.register("html", PlanComparison, _changes_html)
display.register("app", Explorer, _app)


def __getattr__(name: str):
    # the package's other names, imported from their modules on first use (graphviz with them)
    if name in ("provider_color", "provider_colors"):
        from . import colors
        return getattr(colors, name)
    if name in ("PlanGraph", "GraphvizNotFoundError", "check_dot", "AUTO_NODE_LIMIT"):
        from . import graph
        return getattr(graph, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
