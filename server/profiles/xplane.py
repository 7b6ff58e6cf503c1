"""XProf's XSpace protobuf messages, built at import time, to read raw `.xplane.pb` files (host traces,
the HLO of each program) and, in the tests, to write them.

Neither xprof nor jax ships an ``xplane_pb2`` module (jax's and xprof's ``ProfileData``
read xplanes but cannot write them), and protoc is not a dependency. The messages are
therefore declared here from the field numbers of the public
``tsl/profiler/protobuf/xplane.proto`` (package ``tensorflow.profiler``) and turned into
message classes with ``google.protobuf.message_factory``. Serialised output is
wire-compatible with what XProf's C++ conversion reads.

    XSpace          planes=1, errors=2, warnings=3, hostnames=4
    XPlane          id=1, name=2, lines=3, event_metadata=4 (map<int64, XEventMetadata>),
                    stat_metadata=5 (map<int64, XStatMetadata>), stats=6
    XLine           id=1, name=2, timestamp_ns=3, events=4, duration_ps=9, display_id=10,
                    display_name=11
    XEvent          metadata_id=1, oneof data {offset_ps=2, num_occurrences=5}, duration_ps=3,
                    stats=4
    XStat           metadata_id=1, oneof value {double_value=2, uint64_value=3, int64_value=4,
                    str_value=5, bytes_value=6, ref_value=7}
    XEventMetadata  id=1, name=2, metadata=3, display_name=4, stats=5, child_id=6
    XStatMetadata   id=1, name=2, description=3
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = [
    "HloProto",
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

_PACKAGE = "tensorflow.profiler"
_F = descriptor_pb2.FieldDescriptorProto

# (name, number, type, repeated, message type name or None, oneof index or None)
_Field = tuple[str, int, int, bool, str | None, int | None]

_I64, _U64, _DBL, _STR, _BYTES, _MSG = (
    _F.TYPE_INT64,
    _F.TYPE_UINT64,
    _F.TYPE_DOUBLE,
    _F.TYPE_STRING,
    _F.TYPE_BYTES,
    _F.TYPE_MESSAGE,
)

_MESSAGES: dict[str, tuple[list[_Field], list[str]]] = {
    "XSpace": (
        [
            ("planes", 1, _MSG, True, "XPlane", None),
            ("errors", 2, _STR, True, None, None),
            ("warnings", 3, _STR, True, None, None),
            ("hostnames", 4, _STR, True, None, None),
        ],
        [],
    ),
    "XPlane": (
        [
            ("id", 1, _I64, False, None, None),
            ("name", 2, _STR, False, None, None),
            ("lines", 3, _MSG, True, "XLine", None),
            ("event_metadata", 4, _MSG, True, "XPlane.EventMetadataEntry", None),
            ("stat_metadata", 5, _MSG, True, "XPlane.StatMetadataEntry", None),
            ("stats", 6, _MSG, True, "XStat", None),
        ],
        [],
    ),
    "XLine": (
        [
            ("id", 1, _I64, False, None, None),
            ("display_id", 10, _I64, False, None, None),
            ("name", 2, _STR, False, None, None),
            ("display_name", 11, _STR, False, None, None),
            ("timestamp_ns", 3, _I64, False, None, None),
            ("duration_ps", 9, _I64, False, None, None),
            ("events", 4, _MSG, True, "XEvent", None),
        ],
        [],
    ),
    "XEvent": (
        [
            ("metadata_id", 1, _I64, False, None, None),
            ("offset_ps", 2, _I64, False, None, 0),
            ("num_occurrences", 5, _I64, False, None, 0),
            ("duration_ps", 3, _I64, False, None, None),
            ("stats", 4, _MSG, True, "XStat", None),
        ],
        ["data"],
    ),
    "XStat": (
        [
            ("metadata_id", 1, _I64, False, None, None),
            ("double_value", 2, _DBL, False, None, 0),
            ("uint64_value", 3, _U64, False, None, 0),
            ("int64_value", 4, _I64, False, None, 0),
            ("str_value", 5, _STR, False, None, 0),
            ("bytes_value", 6, _BYTES, False, None, 0),
            ("ref_value", 7, _U64, False, None, 0),
        ],
        ["value"],
    ),
    "XEventMetadata": (
        [
            ("id", 1, _I64, False, None, None),
            ("name", 2, _STR, False, None, None),
            ("display_name", 4, _STR, False, None, None),
            ("metadata", 3, _BYTES, False, None, None),
            ("stats", 5, _MSG, True, "XStat", None),
            ("child_id", 6, _I64, True, None, None),
        ],
        [],
    ),
    "XStatMetadata": (
        [
            ("id", 1, _I64, False, None, None),
            ("name", 2, _STR, False, None, None),
            ("description", 3, _STR, False, None, None),
        ],
        [],
    ),
    # xla.HloProto, as stored in the "Hlo Proto" stat of /host:metadata's event metadata.
    # Only field 1 (HloModuleProto hlo_module) is declared, as bytes: the same wire format
    # as the message, handed as-is to jax's XlaComputation to print the HLO text.
    "HloProto": ([("hlo_module", 1, _BYTES, False, None, None)], []),
}

# map<int64, V> fields are nested "...Entry" messages with map_entry set.
_MAP_ENTRIES: dict[str, list[tuple[str, str]]] = {
    "XPlane": [("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata")],
}


def _build_classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(name="asap_xplane.proto", package=_PACKAGE, syntax="proto3")
    for msg_name, (fields, oneofs) in _MESSAGES.items():
        msg = fdp.message_type.add(name=msg_name)
        for oneof in oneofs:
            msg.oneof_decl.add(name=oneof)
        for entry_name, value_type in _MAP_ENTRIES.get(msg_name, []):
            entry = msg.nested_type.add(name=entry_name)
            entry.field.add(name="key", number=1, type=_I64, label=_F.LABEL_OPTIONAL)
            entry.field.add(
                name="value",
                number=2,
                type=_MSG,
                label=_F.LABEL_OPTIONAL,
                type_name=f".{_PACKAGE}.{value_type}",
            )
            entry.options.map_entry = True
        for fname, number, ftype, repeated, tname, oneof_index in fields:
            field = msg.field.add(
                name=fname,
                number=number,
                type=ftype,
                label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
            )
            if tname is not None:
                field.type_name = f".{_PACKAGE}.{tname}"
            if oneof_index is not None:
                field.oneof_index = oneof_index
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES
    }


_CLASSES = _build_classes()
XSpace: Any = _CLASSES["XSpace"]
XPlane: Any = _CLASSES["XPlane"]
XLine: Any = _CLASSES["XLine"]
XEvent: Any = _CLASSES["XEvent"]
XStat: Any = _CLASSES["XStat"]
XEventMetadata: Any = _CLASSES["XEventMetadata"]
XStatMetadata: Any = _CLASSES["XStatMetadata"]
HloProto: Any = _CLASSES["HloProto"]

StatValue = int | float | str | bytes | bool


def read_xspace(path: str | os.PathLike[str]) -> Any:
    """Parse an ``.xplane.pb`` file."""
    space = XSpace()
    space.ParseFromString(Path(path).read_bytes())
    return space


def hlo_modules(space: Any) -> dict[str, bytes]:
    """Serialized ``HloModuleProto`` of every program in the ``/host:metadata`` plane.

    Keys are the event metadata names, ``<module name>(<program_id>)`` such as
    ``jit_train_step(28)``. Print one as HLO text with
    ``jax._src.lib.xla_client.XlaComputation(module).as_hlo_text()``.
    """
    out: dict[str, bytes] = {}
    for plane in space.planes:
        if plane.name != "/host:metadata":
            continue
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for md in plane.event_metadata.values():
            for stat in md.stats:
                if names.get(stat.metadata_id) == "Hlo Proto":
                    proto = HloProto()
                    proto.ParseFromString(stat.bytes_value)
                    out[md.name] = proto.hlo_module
    return out
