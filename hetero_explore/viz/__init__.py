"""Views of a plan: the Graphviz DAG and the self-contained HTML report."""

from .colors import provider_color, provider_colors
from .graph import AUTO_NODE_LIMIT, GraphvizNotFoundError, PlanGraph, check_dot, plan_to_graphviz

__all__ = ["provider_color", "provider_colors", "plan_to_graphviz", "PlanGraph", "GraphvizNotFoundError",
           "check_dot", "AUTO_NODE_LIMIT", "plan_to_html"]


def plan_to_html(plan, path=None, run=None, diff=None, **kw):
    """See :func:`hetero_explore.viz.report.plan_to_html`."""
    from .report import plan_to_html as _impl
    return _impl(plan, path, run=run, diff=diff, **kw)
