"""The whole-number settings (mesh degrees, slice counts) as MaxText reads them, so that ASAP computes with the
number MaxText computes with, and refuses only what MaxText refuses.

MaxText reads a config in two steps, and both convert; ASAP runs the same libraries for each:

1. OmegaConf loads the YAML (the config files and `key=value` on the command line) with PyYAML's YAML 1.1 rules plus
   one float rule of its own: a plain `yes`, `on`, `true` is true and `no`, `off`, `false` false; `010` is octal
   (8), `0b10` binary, `0x10` hex, `1_0` is 10, `2:00` is base 60 (120); `1e0` is a float (OmegaConf's rule; YAML
   1.1 wants a dot); `0o2` is text. ASAP parses with ruamel's YAML 1.2, which reads `010` as 10, `0o2` as 2 and
   `yes` and `2:00` as text, so a whole-number key's plain scalar is loaded again here with PyYAML and OmegaConf's
   loader settings (`yaml11`).
2. pydantic validates each value against its type in MaxText's types.py (`int` for these keys; its models set no
   strict mode, so pydantic's lax mode): 2.0, " 2 ", "2.00" and true are 2, 2, 2 and 1; 2.5, "2.", "1e0", "0x10"
   and None are refused. `read_int` is that validation, pydantic's `TypeAdapter(int)`, its message the reason.

Checked against MaxText 0.2.5 (OmegaConf 2.4.0, PyYAML 6.0.4, pydantic 2.14.4) through its own config and mesh step
(tests/test_mesh_vs_maxtext.py).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from server.config.axes import KEY_TO_AXIS

# The keys MaxText's types.py declares `int` that ASAP reads: every mesh degree (the two `*_sequence_parallelism`
# keys too: MaxText ignores them in the mesh but multiplies dcn_sequence_parallelism into its single-slice check)
# and the two slice counts.
INT_KEYS = frozenset(
    {
        *KEY_TO_AXIS,
        "ici_sequence_parallelism",
        "dcn_sequence_parallelism",
        "num_slices",
        "compile_topology_num_slices",
    }
)


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # as omegaconf/_yaml.py picks it


class _OmegaConfLoader(_BaseLoader):
    """PyYAML's safe loader as OmegaConf configures it (omegaconf/_yaml.py get_yaml_loader, OmegaConf 2.4.0 as
    MaxText 0.2.5 installs it): libyaml's CSafeLoader where PyYAML has it, else SafeLoader, plus the float rule
    below and without the timestamp rule. Its alias-expansion guards and pathlib constructors do not bear on a
    single scalar."""


# OmegaConf's float rule, copied from omegaconf/_yaml.py (2.4.0, get_yaml_loader): OmegaConf is not a dependency.
_OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        """^(?:
         [-+]?[0-9]+(?:_[0-9]+)*\\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\\.[0-9_]*
        |[-+]?\\.(?:inf|Inf|INF)
        |\\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_OmegaConfLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in _OmegaConfLoader.yaml_implicit_resolvers.items()
}

# The first character of a scalar that is not a plain one: quoted, tagged, an alias, a block scalar or a collection.
# Those are read as ruamel reads them (the same in YAML 1.1 for every case that matters here).
_NOT_PLAIN = tuple("'\"!*|>[{")
_ANCHOR = re.compile(r"&\S+\s+")


def yaml11(token: str) -> Any:
    """The value OmegaConf's loader gives a plain scalar written as `token`. A token that is not one plain scalar
    (quoted, explicitly tagged, a collection, several documents), or that PyYAML cannot load (`0b_`: MaxText cannot
    load that file either), is the text itself, which pydantic then refuses."""
    loader = _OmegaConfLoader(token)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty value is null; `---` is text in a value
            return None if not token.strip() else token
        # One plain scalar (style None from PyYAML's parser, "" from libyaml's) that is the whole token (not `--- 2`
        # or `2 # x`), with no explicit tag
        whole = node.start_mark.index == 0 and node.end_mark.index == len(token)
        if not isinstance(node, yaml.ScalarNode) or node.style or not whole:
            return token
        if node.tag != loader.resolve(yaml.ScalarNode, node.value, (True, False)):
            return token
        return loader.construct_document(node)
    except (yaml.YAMLError, ValueError):  # ValueError: PyYAML's int() of `0b_`, or of over 4,300 digits
        return token
    finally:
        loader.dispose()


def reread(token: str, parsed: Any) -> Any:
    """The value MaxText's loader gives a whole-number key whose scalar is written as `token` and which ruamel
    parsed as `parsed`: a plain scalar (after an anchor) is read again as YAML 1.1; a quoted, tagged or aliased
    scalar, a collection, or a value ruamel did not parse as a scalar keeps ruamel's reading."""
    tag = getattr(getattr(parsed, "tag", None), "value", None)
    if tag == "tag:yaml.org,2002:str":  # ruamel keeps `!!str 2` as a TaggedScalar: YAML 1.1 reads the text "2"
        return str(parsed.value)
    if parsed is not None and not isinstance(parsed, (bool, int, float, str)):
        return parsed
    token = _ANCHOR.sub("", token.strip(), count=1)
    if token.startswith(_NOT_PLAIN) or "\n" in token:
        return parsed
    return yaml11(token)


_INT = TypeAdapter(int)  # lax, as MaxText's types.py models (ConfigDict without strict)
_INVALID = "Input should be a valid integer, "


def read_int(value: Any) -> tuple[int | None, str | None]:
    """`value` as pydantic's lax `int` reads it: (the integer, None), or (None, why pydantic refuses it: its own
    message, shortened for a diagnostic, e.g. 'unable to parse string as an integer')."""
    try:
        return int(_INT.validate_python(value)), None
    except ValidationError as e:
        msg = str(e.errors(include_url=False)[0]["msg"])
    if msg.startswith(_INVALID):  # "Input should be a valid integer, got a number with a fractional part"
        msg = msg.removeprefix(_INVALID).removeprefix("got ")
    elif msg.startswith("Input should be "):  # "Input should be a finite number"
        msg = "not " + msg.removeprefix("Input should be ")
    return None, msg[:1].lower() + msg[1:]


def spelling(value: Any) -> str | None:
    """How a value MaxText reads as a whole number is written when it is not an int: 'a boolean', 'a float',
    'text'; None for an int."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "text"
    return None
