"""The app's provider picker: every provider family this installation knows, and the policies.

The choices are read from the registries (:mod:`hetero_explore.session.catalog`), so a new
family (``ort:<EP>`` providers, a profile, a registered policy) appears here without an edit.
The picker only writes to the explorer (``add_provider``, ``remove_provider``,
``set_providers``, ``set_policy``) through the app's ``_configure``, which re-plans; the
app then redraws its provider controls from the explorer as for any other change.
"""

from __future__ import annotations

import ipywidgets as widgets

from ..session.catalog import policy_names, provider_entries


def _family_short(family: str) -> str:
    return {"numba": "numba", "virtual": "virtual", "profile": "profile", "ort": "ORT EP"}.get(family, family)


class ProviderPicker:
    """Widgets to add a provider from any family, remove the selected one, switch to a whole
    provider list (``nnapi,cpu``) and pick the placement policy. ``box`` is what the app shows."""

    def __init__(self, app):
        self.app = app
        ex = app.explorer
        self.add_pick = widgets.Dropdown(options=[], description="add", layout=widgets.Layout(width="260px"))
        self.add_pick.add_class("hx-add-pick")
        self.add_button = widgets.Button(description="add", tooltip="add this provider (just above the last one)",
                                         layout=widgets.Layout(width="60px"))
        self.add_button.add_class("hx-add-provider")
        self.add_button.on_click(lambda _b: app._guard(self.add, self.add_pick.value))
        self.remove_button = widgets.Button(description="remove", tooltip="remove the selected provider",
                                            layout=widgets.Layout(width="80px"))
        self.remove_button.add_class("hx-remove-provider")
        self.remove_button.on_click(lambda _b: app._guard(self.remove, app.order_select.value))
        self.list_text = widgets.Text(value=",".join(ex.provider_names), description="list",
                                      placeholder="e.g. nnapi,cpu", continuous_update=False,
                                      layout=widgets.Layout(width="260px"))
        self.list_text.add_class("hx-provider-list")
        self.use_button = widgets.Button(description="use list", tooltip="plan on exactly these providers, in "
                                         "this order", layout=widgets.Layout(width="80px"))
        self.use_button.add_class("hx-use-list")
        self.use_button.on_click(lambda _b: app._guard(self.use, self.list_text.value))
        self.policy = widgets.Dropdown(options=policy_names(), value=ex.policy, description="policy",
                                       layout=widgets.Layout(width="220px"))
        self.policy.add_class("hx-policy")
        self.policy.observe(lambda ch: app._guard(self.set_policy, ch["new"]), names="value")
        self.families = widgets.HTML("")
        self.families.add_class("hx-families")
        self.box = widgets.VBox([
            widgets.HBox([self.add_pick, self.add_button, self.remove_button, self.policy]),
            widgets.HBox([self.list_text, self.use_button]), self.families])
        self.box.add_class("hx-picker")
        self.refresh()

    # -- from the explorer -------------------------------------------------------------------
    def refresh(self) -> None:
        """The choices and the shown list/policy from the registries and the explorer."""
        ex = self.app.explorer
        have = set(ex.provider_names)
        entries = [e for e in provider_entries() if e.name not in have]
        opts = [(f"{_family_short(e.family)} \u00b7 {e.name}", e.name) for e in entries]
        if list(self.add_pick.options) != opts:
            self.add_pick.options = opts
        text = ",".join(ex.provider_names)
        if self.list_text.value != text:
            self.list_text.value = text
        if self.policy.value != ex.policy and ex.policy in self.policy.options:
            self.policy.value = ex.policy
        fams: dict[str, list[str]] = {}
        for e in provider_entries():
            fams.setdefault(e.family_title, []).append(e.name)
        from .html import esc
        self.families.value = ("<div class='hx-note'>providers here: " + "; ".join(
            f"{esc(t)}: {esc(', '.join(ns))}" for t, ns in fams.items()) + "</div>")

    # -- to the explorer ------------------------------------------------------------------------
    def add(self, name) -> None:
        if not name:
            self.app.status = "pick a provider to add first"
            return
        self.app._configure(lambda ex: ex.add_provider(name))

    def remove(self, name) -> None:
        ex = self.app.explorer
        if name is None:
            self.app.status = "select a provider in the priority list first, then remove it"
            return
        if len(ex.provider_names) <= 1:
            self.app.status = "the last provider stays: add another one first"
            return
        self.app._configure(lambda ex: ex.remove_provider(name))

    def use(self, text: str) -> None:
        self.app._configure(lambda ex: ex.set_providers(text))

    def set_policy(self, name: str) -> None:
        if self.app.explorer.policy == name:
            return
        self.app._configure(lambda ex: ex.set_policy(name))
