"""Orphan policies written in Python."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

from . import _core

Decision = _core.Decision
OrphanView = _core.OrphanView
ArtifactKey = _core.ArtifactKey


class OrphanPolicy:
    """Base class for orphan policies written in Python.

    Override :meth:`decide`; pass an instance as ``simulate(..., policy=instance)``. The
    engine asks when a transfer's last demand leaves, and again whenever slot pressure
    changes while it keeps running (``view.first_decision`` tells which). Set
    ``uses_key_history = True`` to get the key's request history in the view and every
    request through :meth:`observe_request`.

    The policy runs in the simulation's own process (SimGrid allows one simulation per
    process): it is pickled there (with cloudpickle, so classes defined in a notebook
    work). What it gathers comes back through :meth:`report`; what it prints reaches the
    caller's stderr; an exception it raises is raised again by ``simulate`` with its
    own type and a note of where it was raised.
    """

    name: str = "python"
    uses_key_history: bool = False

    def decide(self, view: OrphanView) -> Union[Decision, str]:
        """Returns Decision.ABORT, COMPLETE or KEEP_PARTIAL (or "abort", "complete",
        "keep_partial")."""
        raise NotImplementedError("override decide(view)")

    def observe_request(self, key: ArtifactKey, now_s: float) -> None:
        """Called for every subscribe when ``uses_key_history`` is true."""

    def ask_again_at_s(self, view: OrphanView) -> Optional[float]:
        """Called right after ``decide`` answered COMPLETE: a simulated time at which to be
        asked again about this orphan (the end of a linger, a break-even point), though
        slot pressure has not changed; None (the default) asks for none."""
        return None

    def report(self) -> Any:
        """Called once at the end of the run, in the simulation's process: what it returns
        (anything picklable: counters, a log) is ``Result.policy_report``. None by default."""
        return None


def policies() -> List[Tuple[str, str]]:
    """The built-in orphan policies: (name, description). ``oracle`` runs only in the
    simulator; ``learned`` needs ``model=FILE`` (see ``demandflight train``)."""
    return [(name, what) for name, what in _core.policy_names()]
