"""Engine: the scheduler core itself, for small experiments."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _core
from ._policy import ArtifactKey, OrphanPolicy

DemandHandle = _core.DemandHandle
Commands = List[Dict[str, Any]]


class Engine:
    """The sans-I/O scheduler core (the same C++ the simulator and the backend run).

    Every call takes an explicit ``now`` (seconds, never decreasing) and returns the
    commands the engine emitted, as dicts with a ``type``: ``start_transfer``,
    ``abort_transfer``, ``start_finalize``, ``deliver``, ``evict_artifact``,
    ``drop_partial``, ``task_created``, ``demand_attached``, ``demand_priority_changed``,
    ``task_priority_changed`` (``priority``: the effective one; ``demanded``: the highest
    its active demands ask for), ``task_ended``. You
    play the runtime: report transfers and finalizes back with :meth:`transfer_finished`
    and :meth:`finalize_finished`, and call :meth:`timer` at :attr:`next_wakeup_s`.
    """

    def __init__(self, model: str = "demand", *, max_transfers: int = 4,
                 max_per_origin: int = 4, cache_bytes: int = 2_000_000_000, seed: int = 1,
                 policy: Union[str, OrphanPolicy, None] = None) -> None:
        self._engine = _core.Engine(model, max_transfers, max_per_origin, cache_bytes, seed, policy)

    @staticmethod
    def key(resource: str, revision: str = "r1", target: str = "pc",
            generation: int = 0) -> ArtifactKey:
        """An artifact key."""
        return ArtifactKey(resource, revision, target, generation)

    def subscribe(self, now: float, key: Union[ArtifactKey, str], owner: int, priority: int = 0,
                  *, deadline_s: Optional[float] = None, owner_generation: int = 0,
                  origin: int = 0, size_bytes: int = 0,
                  mirrors: Sequence[int] = ()) -> Tuple[DemandHandle, Commands]:
        """Creates a demand; returns its handle and the commands. ``mirrors``: further
        origins after ``origin``, in order, that a failed attempt moves to."""
        if isinstance(key, str):
            key = self.key(key)
        return self._engine.subscribe(now, key, owner, priority, deadline_s, owner_generation,
                                      origin, size_bytes, list(mirrors))

    def cancel(self, now: float, demand: DemandHandle) -> Commands:
        """Withdraws this demand only."""
        return self._engine.cancel(now, demand)

    def set_priority(self, now: float, demand: DemandHandle, priority: int) -> Commands:
        """Raises or lowers this demand's priority."""
        return self._engine.set_priority(now, demand, priority)

    def end_owner(self, now: float, owner: int,
                  owner_generation: Optional[int] = None) -> Commands:
        """Ends the owner's demands (all generations, or those up to ``owner_generation``)."""
        return self._engine.end_owner(now, owner, owner_generation)

    def transfer_progress(self, now: float, transfer: int, bytes: int) -> Commands:
        """This attempt of ``transfer`` has received ``bytes`` so far."""
        return self._engine.transfer_progress(now, transfer, bytes)

    def transfer_finished(self, now: float, transfer: int, status: str = "ok", bytes: int = 0,
                          retry_after_s: Optional[float] = None) -> Commands:
        """The transfer ended: ``ok``, ``retryable_error`` or ``permanent_error``."""
        return self._engine.transfer_finished(now, transfer, status, bytes, retry_after_s)

    def finalize_finished(self, now: float, finalize: int,
                          status: str = "installed") -> Commands:
        """Verify + install ended: ``installed``, ``verify_failed`` or ``error``."""
        return self._engine.finalize_finished(now, finalize, status)

    def timer(self, now: float) -> Commands:
        """Fires due deadlines and retry timers."""
        return self._engine.timer(now)

    @property
    def next_wakeup_s(self) -> Optional[float]:
        """When :meth:`timer` must be called next, or None."""
        return self._engine.next_wakeup_s

    def tasks(self) -> List[Dict[str, Any]]:
        """Every live task: key, state, effective priority, active demands, ..."""
        return self._engine.tasks()

    def stats(self) -> Dict[str, int]:
        """Counters: demands, tasks, transfers, installs, cache hits, orphan decisions."""
        return self._engine.stats()
