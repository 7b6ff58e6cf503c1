"""The whole-number settings (mesh degrees, slice counts) as MaxText reads them, so that ASAP computes with the
number MaxText computes with, and refuses only what MaxText refuses.

MaxText reads a config in two steps, and both convert:

1. OmegaConf loads the YAML (the config files and `key=value` on the command line) with PyYAML's YAML 1.1 rules plus
   one of its own (omegaconf/_yaml.py): a plain `yes`, `on`, `true` is true and `no`, `off`, `false` false; `010`
   is octal (8), `0b10` binary, `0x10` hex, `1_0` is 10, `2:00` is base 60 (120); `1e0` is a float (OmegaConf's
   rule; YAML 1.1 wants a dot); `0o2` is text. ASAP parses with ruamel's YAML 1.2, which reads `010` as 10, `0o2` as
   2 and `yes` and `2:00` as text, so a whole-number key's plain scalar is read again here (`yaml11`).
2. pydantic validates each value against its type in MaxText's types.py (`int` for these keys), in lax mode
   (`read_int`): an int; a bool as 1 or 0; a finite float without a fraction, between -2^63 and 2^63 (2.0); text
   that is, once Unicode whitespace is stripped, ASCII digits with an optional sign and single underscores between
   digits, optionally followed by a dot and at least one zero (" 2 ", "+2", "1_0", "2.00"; pydantic-core's
   str_as_int, quirks included: leading zeros go first, so "0-5" is -5); nothing else (None, a list, 2.5, "2.",
   "1e0", "0x10", "２").

Checked against MaxText 0.2.5 (pydantic 2.14.4) through its own config and mesh step
(tests/test_mesh_vs_maxtext.py), and against PyYAML and pydantic themselves (tests/test_mesh.py).
"""

from __future__ import annotations

import math
import re
from typing import Any

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

# PyYAML's implicit resolvers (yaml/resolver.py), in the order it tries them, then the float rule OmegaConf adds
# after them (omegaconf/_yaml.py get_yaml_loader). OmegaConf drops the timestamp rule.
_BOOL = re.compile(r"yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF")
_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_FLOAT = re.compile(
    r"""[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)""",
    re.X,
)
_INT = re.compile(
    r"""[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+""",
    re.X,
)
_NULL = re.compile(r"~|null|Null|NULL|")
_OMEGACONF_FLOAT = re.compile(
    r"""[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)""",
    re.X,
)
# The first character of a scalar that is not a plain one: quoted, tagged, an alias, a block scalar or a collection.
# Those are read as ruamel reads them (the same in YAML 1.1 for every case that matters here).
_NOT_PLAIN = tuple("'\"!*|>[{")
_ANCHOR = re.compile(r"&\S+\s+")


def _sign(text: str) -> tuple[int, str]:
    sign = -1 if text[:1] == "-" else 1
    return sign, text[1:] if text[:1] in "+-" else text


def _base60(digits: str, part: type) -> Any:
    value = part(0)
    for p in digits.split(":"):
        value = value * 60 + part(p)
    return value


def _construct_int(text: str) -> int:
    """PyYAML's SafeConstructor.construct_yaml_int."""
    sign, v = _sign(text.replace("_", ""))
    if v == "0":
        return 0
    if v.startswith("0b"):
        return sign * int(v[2:], 2)
    if v.startswith("0x"):
        return sign * int(v[2:], 16)
    if v[0] == "0":
        return sign * int(v, 8)
    if ":" in v:
        return sign * _base60(v, int)
    return sign * int(v)


def _construct_float(text: str) -> float:
    """PyYAML's SafeConstructor.construct_yaml_float."""
    sign, v = _sign(text.replace("_", "").lower())
    if v == ".inf":
        return sign * math.inf
    if v == ".nan":
        return math.nan
    if ":" in v:
        return sign * _base60(v, float)
    return sign * float(v)


def yaml11(token: str) -> Any:
    """The value OmegaConf's loader gives a plain scalar written as `token` (no quotes, tag or anchor)."""
    if _BOOL.fullmatch(token):
        return token in _TRUE
    try:
        if _FLOAT.fullmatch(token):
            return _construct_float(token)
        if _INT.fullmatch(token):
            return _construct_int(token)
        if _NULL.fullmatch(token):
            return None
        if _OMEGACONF_FLOAT.fullmatch(token):
            return _construct_float(token)
    except ValueError:  # `0b_`: PyYAML's constructor fails, and MaxText cannot load the file; text is refused too
        return token
    return token


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


# Unicode's White_Space property, which pydantic's Rust `str::trim` strips (Python's str.strip also strips the
# separators \x1c-\x1f, which pydantic does not).
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)", re.ASCII)
MAX_TEXT_DIGITS = 4300  # pydantic's limit on the digits of integer text (Python's int() limit)
_FLOAT_LIMIT = 2.0**63  # pydantic's int from a float: strictly between -2^63 and 2^63
_TEXT_PROBLEM = "text that is not an integer (digits with an optional sign, single underscores and a .0 fraction)"


def _strip_leading_zeros(s: str) -> str | None:
    """pydantic-core's strip_leading_zeros (src/input/shared.rs): leading zeros (and underscores among them) go,
    one is kept before a dot or when nothing else follows; None when the text cannot be a number."""
    if not s or s[0] not in "0123456789-":
        return None
    if s[0] != "0":
        return s
    for i, c in enumerate(s[1:], 1):
        if c in "0_":
            continue
        if c in "123456789-":
            return s[i:]
        return s[i - 1 :] if c == "." else None
    return s[-1]


def _clean_int_text(text: str) -> str | None:
    """pydantic-core's clean_int_str: the text its int parser reads a second time, None when there is none (the
    first reading is the text as JSON)."""
    s = text.strip(_SPACE)
    if s.startswith("+"):
        s = s[1:]
        if s.startswith("-"):
            return None
    negative = s.startswith("-")
    if negative:
        s = s[1:]
        if s.startswith(("-", "+")):
            return None
    stripped = _strip_leading_zeros(s)
    if stripped is None:
        return None
    s = stripped
    dot = s.find(".")
    if dot >= 0 and s[dot + 1 :] and s[dot + 1 :].strip("0") == "":
        s = s[:dot]
    sign = "-" if negative else ""
    if "_" in s and not s.startswith("_") and not s.endswith("_") and "__" not in s:
        return sign + s.replace("_", "")
    return None if len(s) == len(text) else sign + s


def _int_text(text: str) -> int | None:
    """Text as pydantic's lax int reads it (pydantic-core's str_as_int): JSON's integer syntax, else the cleaned
    text in it (whitespace, a leading +, leading zeros, a .0 fraction and single underscores removed)."""
    for candidate in (text, _clean_int_text(text)):
        if candidate is not None and _JSON_INT.fullmatch(candidate):
            return int(candidate) if len(candidate.lstrip("-")) <= MAX_TEXT_DIGITS else None
    return None


def read_int(value: Any) -> tuple[int | None, str | None]:
    """`value` as pydantic's lax `int` reads it: (the integer, None), or (None, why pydantic refuses it)."""
    if isinstance(value, bool):
        return int(value), None
    if isinstance(value, int):
        return int(value), None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None, "not a finite number"
        if not value.is_integer():
            return None, "a number with a fractional part"
        if not -_FLOAT_LIMIT < value < _FLOAT_LIMIT:
            return None, "a number too large for an integer"
        return int(value), None
    if isinstance(value, str):
        n = _int_text(value)
        return (n, None) if n is not None else (None, _TEXT_PROBLEM)
    return None, "not an integer"


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
