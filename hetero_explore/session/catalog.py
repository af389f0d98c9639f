"""Every provider name and placement policy this installation knows, by family.

Read from the registries themselves (:data:`hetero_explore.providers.PROVIDERS`, the
capability profiles, :data:`hetero_explore.planner.policies.POLICIES`), so a family added
there (say ``ort:<EP>`` providers for the execution providers ONNX Runtime has on this
machine) appears in the CLI's ``--help``, the app's provider picker and the docs without an
edit here. A registered factory may say its family with a ``family`` attribute; otherwise
the name tells: ``cpu``/``cuda`` are the Numba kernel providers, ``gpu`` the virtual GPU, a
profile name a capability profile, ``<prefix>:<name>`` the ``<prefix>`` family.
"""

from __future__ import annotations

from dataclasses import dataclass

#: family titles, in the order they are listed
FAMILIES = {
    "numba": "Numba kernels (execute here)",
    "virtual": "virtual devices (plan anywhere; execute with the CPU kernels)",
    "profile": "capability profiles (published EP op tables)",
    "ort": "ONNX Runtime execution providers on this machine",
    "other": "other registered providers",
}
#: prefixes of ``prefix:name`` provider names and the family each stands for
PREFIX_FAMILIES = {"ort": "ort"}


@dataclass(frozen=True)
class ProviderEntry:
    """One name a provider list may hold."""

    name: str
    """What to write in a provider list (``nnapi``, ``ort:openvino``)."""
    family: str
    """A key of :data:`FAMILIES` (or the factory's own ``family``)."""

    @property
    def family_title(self) -> str:
        return FAMILIES.get(self.family, self.family)


def _family(name: str, factory, profiles: frozenset) -> str:
    fam = getattr(factory, "family", None)
    if isinstance(fam, str) and fam:
        return fam
    if name in ("cpu", "cuda"):
        return "numba"
    if name == "gpu":
        return "virtual"
    if name in profiles:
        return "profile"
    if ":" in name:
        prefix = name.split(":", 1)[0]
        return PREFIX_FAMILIES.get(prefix, prefix)
    return "other"


def provider_entries() -> list[ProviderEntry]:
    """Every registered provider name with its family, families in :data:`FAMILIES` order
    (unknown families last), names in registration order within a family."""
    from ..providers import PREFIXES, PROFILE_NAMES, PROVIDERS, prefix_names
    profiles = frozenset(PROFILE_NAMES)
    entries = [ProviderEntry(n, _family(n, f, profiles)) for n, f in list(PROVIDERS.items())]
    for prefix in PREFIXES:   # prefix families list the names they resolve on this machine
        entries += [ProviderEntry(n, _family(n, None, profiles)) for n in prefix_names(prefix)]
    order = {k: i for i, k in enumerate(FAMILIES)}
    return sorted(entries, key=lambda e: order.get(e.family, len(order)))  # stable: registration order kept


def provider_families() -> dict[str, list[str]]:
    """Family title → provider names (see :func:`provider_entries`)."""
    out: dict[str, list[str]] = {}
    for e in provider_entries():
        out.setdefault(e.family_title, []).append(e.name)
    return out


def policy_names() -> list[str]:
    """The placement policies (``priority``, ``min-transfer``, and any registered since), then
    ONNX Runtime's device selection policies when onnxruntime is installed (``PREFER_NPU`` ...)."""
    from ..planner.policies import POLICIES
    out = list(POLICIES)
    try:
        from ..providers.ort import device_policies
        out += list(device_policies())
    except Exception:   # noqa: BLE001 - onnxruntime missing or too old: placement policies only
        pass
    return out


def catalog_text(width: int | None = None) -> str:
    """The families and the policies as a few lines of text (the CLI's ``--help``)."""
    import textwrap
    lines = []
    for title, names in provider_families().items():
        text = f"{title}: {', '.join(names)}"
        lines += textwrap.wrap(text, width=width or 10_000, subsequent_indent="    ") if width else [text]
    lines.append(f"placement policies (--policy): {', '.join(policy_names())}")
    return "\n".join(lines)


def catalog_df():
    """One row per provider name: ``name``, ``family``, ``family_title``."""
    import pandas as pd
    return pd.DataFrame([{"name": e.name, "family": e.family, "family_title": e.family_title}
                         for e in provider_entries()], columns=["name", "family", "family_title"])
