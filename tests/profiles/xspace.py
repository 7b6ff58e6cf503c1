"""A small builder for XProf XSpace planes (test data); the message classes live in server/profiles/xplane.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.profiles.xplane import (
    HloProto,
    StatValue,
    XEvent,
    XEventMetadata,
    XLine,
    XPlane,
    XSpace,
    XStat,
    XStatMetadata,
    hlo_modules,
    read_xspace,
)

__all__ = [
    "HloProto",
    "PlaneBuilder",
    "StatValue",
    "XEvent",
    "XEventMetadata",
    "XLine",
    "XPlane",
    "XSpace",
    "XStat",
    "XStatMetadata",
    "hlo_modules",
    "read_xspace",
]


class PlaneBuilder:
    """Adds lines, events and stats to one XPlane, interning event and stat metadata by name.

    Stat and event metadata ids start at 1 (XProf treats id 0 as "no metadata"). Python
    ints become ``int64_value`` (``uint64_value`` when they exceed int64), floats
    ``double_value``, bools ``int64_value`` 0/1, bytes ``bytes_value``, everything else
    ``str_value``.
    """

    def __init__(self, plane: Any) -> None:
        self.plane = plane
        self._stat_ids: dict[str, int] = {m.name: k for k, m in plane.stat_metadata.items()}
        self._event_ids: dict[str, int] = {m.name: k for k, m in plane.event_metadata.items()}

    def stat_id(self, name: str) -> int:
        """The stat metadata id for ``name``, created on first use."""
        sid = self._stat_ids.get(name)
        if sid is None:
            sid = len(self.plane.stat_metadata) + 1
            md = self.plane.stat_metadata[sid]
            md.id = sid
            md.name = name
            self._stat_ids[name] = sid
        return sid

    def add_stat(self, container: Any, name: str, value: StatValue) -> Any:
        """Append an XStat named ``name`` to a repeated ``stats`` field."""
        stat = container.add(metadata_id=self.stat_id(name))
        if isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int):
            if value >= 2**63:
                stat.uint64_value = value
            else:
                stat.int64_value = value
        elif isinstance(value, float):
            stat.double_value = value
        elif isinstance(value, bytes):
            stat.bytes_value = value
        else:
            stat.str_value = str(value)
        return stat

    def add_plane_stats(self, stats: Mapping[str, StatValue]) -> None:
        """Set plane-level stats (device capabilities such as peak FLOP rate)."""
        for name, value in stats.items():
            self.add_stat(self.plane.stats, name, value)

    def event_metadata(
        self, name: str, *, display_name: str | None = None, stats: Mapping[str, StatValue] | None = None
    ) -> int:
        """The event metadata id for ``name``; ``stats`` are attached only when it is created."""
        eid = self._event_ids.get(name)
        if eid is None:
            eid = len(self.plane.event_metadata) + 1
            md = self.plane.event_metadata[eid]
            md.id = eid
            md.name = name
            if display_name:
                md.display_name = display_name
            for key, value in (stats or {}).items():
                self.add_stat(md.stats, key, value)
            self._event_ids[name] = eid
        return eid

    def line(self, line_id: int, name: str, timestamp_ns: int, *, display_name: str | None = None) -> Any:
        """Append an XLine; event offsets on it are picoseconds from ``timestamp_ns``."""
        line = self.plane.lines.add(id=line_id, display_id=line_id, name=name, timestamp_ns=timestamp_ns)
        if display_name:
            line.display_name = display_name
        return line

    def event(
        self,
        line: Any,
        name: str,
        offset_ps: int,
        duration_ps: int,
        *,
        stats: Mapping[str, StatValue] | None = None,
        metadata_stats: Mapping[str, StatValue] | None = None,
    ) -> Any:
        """Append an XEvent named ``name`` to ``line``.

        ``stats`` go on this event; ``metadata_stats`` on its (shared) event metadata, where
        XProf looks for per-HLO-op properties such as flops and hlo_category.
        """
        mid = self.event_metadata(name, stats=metadata_stats)
        event = line.events.add(metadata_id=mid, offset_ps=int(offset_ps), duration_ps=int(duration_ps))
        for key, value in (stats or {}).items():
            self.add_stat(event.stats, key, value)
        return event
