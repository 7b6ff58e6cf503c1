"""Hostile MaxText configs: seed texts (the examples, and small configs of MaxText's models) and the mutations of
issue 17's input causes, applied by a seeded `random.Random` so a case is rebuilt from its seed alone.

A case is the exact bytes of a file: the mutations work on lines of text, then the line endings (LF, CRLF, CR or a
mix, with or without a final line break) and bytes that are not UTF-8 are chosen. The language server gets the
text an editor would show (the bytes decoded with U+FFFD for what is not UTF-8).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from server.config.axes import AXES
from server.config.models import catalog_names

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PARENT = "common.yml"  # the examples' parent: written next to every mutated config
FILE_NAME = "fuzz.yml"  # the name a runner gives the config it checks (a `base_config: fuzz.yml` is a cycle)

MESH_KEYS = [f"{net}_{a.name}_parallelism" for net in ("ici", "dcn") for a in AXES]
MODEL_DIMS = [
    "num_experts", "num_experts_per_tok", "base_emb_dim", "base_num_query_heads", "base_num_kv_heads",
    "base_mlp_dim", "base_num_decoder_layers", "head_dim", "vocab_size", "base_moe_mlp_dim",
]  # fmt: skip
NUMBER_KEYS = [
    "per_device_batch_size", *MESH_KEYS, *MODEL_DIMS, "max_target_length", "compile_topology_num_slices",
    "num_slices", "steps", "gradient_accumulation_steps",
]  # fmt: skip
KNOWN_KEYS = [*NUMBER_KEYS, "model_name", "compile_topology", "base_config", "remat_policy", "dtype", "attention"]

# Where a number belongs: what a user (or a bad merge) can write instead.
HOSTILE_NUMBERS = [
    ".nan", ".NaN", ".inf", "-.inf", "1e-320", "4.9e-324", "1e300", "1e309", "9" * 4301, "-" + "9" * 4301,
    "1" * 65, "-1", "-7", "0", "0.0", "-0", "1.5", "0.5", "0x10", "0o17", "1_000", "'2'", '"8"', "abc", "²", "'²'",
    "[1, 2]", "[]", "{a: 1}", "{}", "true", "null", "~", "''", "2.0", "1e3", "!!int '5'", "!!float 1", "!!str 4",
    "2", "3", "4", "8", "16", "32", "256", "-2",
]  # fmt: skip
# What per_device_batch_size's check (ASAP112) refuses, each of which a consumer once computed with (issue 25):
# infinities and NaN as YAML writes them, subnormals, a normal number below 2^-24, numbers past 2^20 and past a
# float's range, negative zero, and an integer longer than Python converts.
BATCH_SIZES = [
    ".inf", "-.inf", "+.inf", ".Inf", ".nan", ".NaN", "1e-320", "5e-324", "4.9e-324", "-1e-320", "2.2e-308", "1e-8",
    "1e308", "1.7976931348623157e308", "1e309", "-0.0", "1" * 4301,
]  # fmt: skip
ODD_BREAKS = ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
ODD_DIGITS = ["²", "³", "¹", "٣", "३", "１", "𝟚", "Ⅻ", "½", "0", "-1", "00", "1e3", "2.5", "9" * 30, ""]
NON_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x80"]
SLICES = ["v5e-256", "v5e-16", "v5e-4", "v6e-16", "v6e-256", "v5p-128", "v4-8", "tpu7x-64", "v5e-7", "v5e-²56", ""]
BASE_CONFIGS = [
    PARENT, "missing.yml", "", ".", "..", "/dev/null", "[a]", "{}", FILE_NAME, "gs://bucket/base.yml", "~", "'a\\x00b'",
]  # fmt: skip
SNIPPETS = [
    ":", ": ", "- ", "&a ", "*a", "<<: ", "'", '"', "{", "}", "[", "]", "\t", "#", " #", "%YAML 1.1", "---", "...",
    "? ", "!!", "|", ">", ",", "\\", "\r", "\r\n", "\n", "\ufeff", "\x00", "\U0001f600", "é",
]  # fmt: skip
ENDINGS = ["\n", "\r\n", "\r", "mixed"]


def example_seeds() -> list[tuple[str, str]]:
    """(name, text) of every example config but the parent."""
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(EXAMPLES.glob("*.yml")) if p.name != PARENT]


def model_seed(rng: random.Random, name: str) -> str:
    """A small config of MaxText model `name` on a slice, with a mesh (valid or not)."""
    lines = [
        f"# {name} on a TPU slice",
        f"model_name: {name}",
        f"compile_topology: {rng.choice(SLICES[:8])}",
        f"per_device_batch_size: {rng.choice([1, 2, 4, 0.5])}",
        f"ici_fsdp_parallelism: {rng.choice([-1, 4, 16, 64])}   # fills the slice",
    ]
    if rng.random() < 0.5:
        lines.append(f"ici_tensor_parallelism: {rng.choice([1, 2, 4, 8])}")
    if rng.random() < 0.3:
        lines.append(f"ici_expert_parallelism: {rng.choice([1, 2, 8])}")
    if rng.random() < 0.3:
        lines += [f"compile_topology_num_slices: {rng.choice([1, 2, 4])}", "dcn_data_parallelism: -1"]
    return "\n".join(lines) + "\n"


def seeds(rng: random.Random, n_models: int = 12) -> list[tuple[str, str]]:
    """The examples and configs of `n_models` MaxText models drawn by `rng`."""
    names = catalog_names()
    return example_seeds() + [(f"model:{m}", model_seed(rng, m)) for m in rng.sample(names, min(n_models, len(names)))]


# -- mutations: each edits the lines of a text (no line breaks in them but what a mutation puts there) --------
Lines = list[str]


def _value_line(lines: Lines, key: str) -> int | None:
    return next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)


def _set(rng: random.Random, lines: Lines, key: str, value: str) -> None:
    """`key: value` in place of the key's line (its comment kept), else at a random place."""
    i = _value_line(lines, key)
    if i is None:
        lines.insert(rng.randint(0, len(lines)), f"{key}: {value}")
        return
    comment = lines[i].find(" #")
    lines[i] = f"{key}: {value}" + (lines[i][comment:] if comment >= 0 else "")


def _deep_nesting(rng: random.Random, lines: Lines) -> None:
    n = rng.choice([300, 300, 300, 63, 64, 65, 1000])
    kind = rng.randrange(4)
    if kind == 0:
        block = ["deep: " + "[" * n + "]" * n]
    elif kind == 1:
        block = ["deep: " + "{b: " * n + "1" + "}" * n]
    elif kind == 2:
        block = ["deep:", *("  " * (i + 1) + f"k{i}:" for i in range(n)), "  " * (n + 1) + "x: 1"]
    else:
        block = ["deep: " + "- " * n + "x"]
    at = rng.randint(0, len(lines))
    lines[at:at] = block


def _merge_inline(rng: random.Random, lines: Lines) -> None:
    key = rng.choice(NUMBER_KEYS[:14])
    value = rng.choice(["2", "4", "16", *HOSTILE_NUMBERS])
    if rng.random() < 0.5 and (i := _value_line(lines, key)) is not None:
        del lines[i]  # else the file's own key wins over the merged one
    lines.insert(rng.randint(0, len(lines)), f"<<: {{{key}: {value}}}")


def _merge_alias(rng: random.Random, lines: Lines) -> None:
    key = rng.choice(NUMBER_KEYS[:14])
    value = rng.choice(["2", "4", "16", *HOSTILE_NUMBERS])
    anchor = ["defaults: &a", f"  {key}: {value}"]
    if rng.random() < 0.3:
        anchor += ["other: &b", f"  {rng.choice(MESH_KEYS)}: {rng.choice(['1', '2', '-1'])}"]
        merge = "<<: [*a, *b]"
    else:
        merge = rng.choice(["<<: *a", "<<: *a", "<<: *nowhere", "<<: [*a]", "<<: *a  # merged"])
    at = rng.randint(0, len(lines))
    lines[at:at] = anchor
    lines.insert(rng.randint(at + len(anchor), len(lines)) if rng.random() < 0.9 else 0, merge)


def _mesh_alias(rng: random.Random, lines: Lines) -> None:
    a, b = rng.sample(MESH_KEYS[:12], 2)
    value = rng.choice(["1", "2", "4", "16", "-1", *HOSTILE_NUMBERS[:12]])
    name = rng.choice(["m", "mesh", "a"])
    _set(rng, lines, a, f"&{name} {value}")
    _set(rng, lines, b, f"*{name}" if rng.random() < 0.85 else "*nowhere")
    if rng.random() < 0.3:  # the anchor defined again (legal YAML 1.2: later aliases take the new one)
        _set(rng, lines, rng.choice(MESH_KEYS), f"&{name} {rng.choice(['1', '8'])}")
    if rng.random() < 0.2:  # an alias whose value is a whole mapping
        lines[0:0] = [f"mesh_values: &{name}", "  x: 1"]


def _alias_bomb(rng: random.Random, lines: Lines) -> None:
    """Nested anchors, each level a list (or mapping) of aliases of the one before (issue 25): a million values
    from a few hundred bytes, or a few within the reader's bounds; aliases nested 90 levels deep; an alias inside
    its own anchor. Used as the value of a known key, merged into the top level, or not used at all."""
    name = rng.choice(["l", "lol", "a"])
    kind = rng.choice(["bomb", "bomb", "bomb", "deep", "recursive"])
    if kind == "recursive":
        block = [f"{name}0: &{name}0 [1, *{name}0]"]
    elif kind == "deep":  # three keys 30 levels deep, each around an alias of the one before
        block = [f"{name}{i}: &{name}{i} " + "[" * 30 + (f"*{name}{i - 1}" if i else "x") + "]" * 30 for i in range(3)]
    else:
        levels, fan = rng.choice([(6, 10), (6, 10), (4, 8), (3, 3), (2, 2)])
        mapping = rng.random() < 0.3
        block = []
        for i in range(levels):
            item = f"*{name}{i - 1}" if i else "x"
            inner = ", ".join(f"k{j}: {item}" for j in range(fan)) if mapping else ", ".join([item] * fan)
            block.append(f"{name}{i}: &{name}{i} " + ("{" + inner + "}" if mapping else "[" + inner + "]"))
    at = rng.randint(0, len(lines))
    lines[at:at] = block
    top = f"*{block[-1].split(':', 1)[0]}"
    use = rng.random()
    if use < 0.2 and block[-1].endswith("}"):
        lines.append(f"<<: {top}")
    elif use < 0.8:  # the key's own line goes: its value comes after the anchors
        key = rng.choice(KNOWN_KEYS)
        i = _value_line(lines, key)
        if i is not None:
            del lines[i]
        lines.append(f"{key}: {top}")


def _hostile_number(rng: random.Random, lines: Lines) -> None:
    _set(rng, lines, rng.choice(NUMBER_KEYS), rng.choice(HOSTILE_NUMBERS))


def _batch_size(rng: random.Random, lines: Lines) -> None:
    """per_device_batch_size set to a value ASAP112 refuses, written on its own line or through an alias."""
    value = rng.choice(BATCH_SIZES)
    if rng.random() < 0.25:
        lines.insert(0, f"batch_value: &pdbs {value}")
        value = "*pdbs"
    _set(rng, lines, "per_device_batch_size", value)


def _nul_base_config(rng: random.Random, lines: Lines) -> None:
    value = rng.choice(['"a\\x00b.yml"', '"common.yml\\0"', "a\x00b.yml", '"\\0"', "common.yml\x00"])
    _set(rng, lines, "base_config", value)


def _slice_directive(rng: random.Random, lines: Lines) -> None:
    parts = [f"slice={rng.choice(SLICES)}"] if rng.random() < 0.8 else []
    if rng.random() < 0.9:
        parts.append(f"slices={rng.choice(ODD_DIGITS)}")
    lines.insert(0 if rng.random() < 0.7 else rng.randint(0, len(lines)), "# asap: " + " ".join(parts))


def _odd_break(rng: random.Random, lines: Lines) -> None:
    ch = rng.choice(ODD_BREAKS)
    comments = [i for i, line in enumerate(lines) if "#" in line]
    values = [i for i, line in enumerate(lines) if ": " in line and not line.lstrip().startswith("#")]
    kind = rng.randrange(3)
    if kind == 0 and comments:
        i = rng.choice(comments)
        j = rng.randint(lines[i].index("#") + 1, len(lines[i]))
        lines[i] = lines[i][:j] + ch + lines[i][j:]
    elif kind == 1 and values:
        i = rng.choice(values)
        j = rng.randint(lines[i].index(": ") + 2, len(lines[i]))
        lines[i] = lines[i][:j] + ch + lines[i][j:]
    else:
        lines.insert(rng.randint(0, len(lines)), f"# a{ch}{rng.choice(['b', '# c', 'ici_fsdp_parallelism: 3'])}")


def _unknown_key(rng: random.Random, lines: Lines) -> None:
    key = rng.choice(["totally_unknown_key", "asap", "ici_magic_parallelism", "Model_Name", "x", "π", "123"])
    lines.insert(rng.randint(0, len(lines)), f"{key}: {rng.choice(['1', 'abc', '[1]', HOSTILE_NUMBERS[0]])}")


def _typo(rng: random.Random, key: str) -> str:
    i = rng.randrange(len(key))
    op = rng.randrange(4)
    if op == 0:
        return key[:i] + key[i + 1 :]
    if op == 1 and i + 1 < len(key):
        return key[:i] + key[i + 1] + key[i] + key[i + 2 :]
    if op == 2:
        return key[:i] + key[i] + key[i:]
    return key.upper() if rng.random() < 0.5 else key[:i] + rng.choice("xzq_") + key[i + 1 :]


def _misspelt_key(rng: random.Random, lines: Lines) -> None:
    keys = [(i, line.split(":", 1)[0]) for i, line in enumerate(lines) if line[:1].isalpha() and ":" in line]
    if keys and rng.random() < 0.7:
        i, key = rng.choice(keys)
        lines[i] = _typo(rng, key) + lines[i][len(key) :]
    else:
        lines.insert(rng.randint(0, len(lines)), f"{_typo(rng, rng.choice(KNOWN_KEYS))}: {rng.choice(['1', '4'])}")


def _model_name(rng: random.Random, lines: Lines) -> None:
    bogus = ["llama2-7", "", "LLAMA2-7B", "../x", "[a]", "llama2-7b\x00", "default", "mixtral-8x7b "]
    _set(rng, lines, "model_name", rng.choice(catalog_names() if rng.random() < 0.6 else bogus))


def _topology(rng: random.Random, lines: Lines) -> None:
    if rng.random() < 0.6:
        _set(rng, lines, "compile_topology", rng.choice(SLICES))
    else:
        _set(rng, lines, "compile_topology_num_slices", rng.choice(["1", "2", "4", *HOSTILE_NUMBERS]))


def _base_config(rng: random.Random, lines: Lines) -> None:
    _set(rng, lines, "base_config", rng.choice(BASE_CONFIGS))


def _delete_line(rng: random.Random, lines: Lines) -> None:
    if lines:
        del lines[rng.randrange(len(lines))]


def _duplicate_line(rng: random.Random, lines: Lines) -> None:
    if lines:
        lines.insert(rng.randint(0, len(lines)), rng.choice(lines))


def _truncate(rng: random.Random, lines: Lines) -> None:
    """Cut the text at a random character: a file saved mid-keystroke."""
    text = "\n".join(lines)
    lines[:] = text[: rng.randint(0, len(text))].split("\n")


def _snippet(rng: random.Random, lines: Lines) -> None:
    if not lines:
        lines.append("")
    i = rng.randrange(len(lines))
    j = rng.randint(0, len(lines[i]))
    lines[i] = lines[i][:j] + rng.choice(SNIPPETS) + lines[i][j:]


def _indent(rng: random.Random, lines: Lines) -> None:
    if lines:
        i = rng.randrange(len(lines))
        lines[i] = rng.choice([" ", "  ", "   ", "\t"]) + lines[i]


MUTATIONS: dict[str, Callable[[random.Random, Lines], None]] = {
    "deep_nesting": _deep_nesting,
    "merge_inline": _merge_inline,
    "merge_alias": _merge_alias,
    "mesh_alias": _mesh_alias,
    "alias_bomb": _alias_bomb,
    "hostile_number": _hostile_number,
    "batch_size": _batch_size,
    "nul_base_config": _nul_base_config,
    "slice_directive": _slice_directive,
    "odd_break": _odd_break,
    "unknown_key": _unknown_key,
    "misspelt_key": _misspelt_key,
    "model_name": _model_name,
    "topology": _topology,
    "base_config": _base_config,
    "delete_line": _delete_line,
    "duplicate_line": _duplicate_line,
    "truncate": _truncate,
    "snippet": _snippet,
    "indent": _indent,
}


# -- large documents (the bench only: each takes seconds to analyse) -----------------------------------------
def _sixty_kb(rng: random.Random, lines: Lines) -> None:
    tag = rng.randrange(1 << 30)  # the analysis memoises per key name: new names each time
    lines += [f"extra_key_{tag}_{i}: value_{i}  # sweep setting {i}" for i in range(2000)]


def _one_mb(rng: random.Random, lines: Lines) -> None:
    lines.append("big_list: [" + ", ".join(str(i) for i in range(150_000)) + "]")


def _fifty_thousand_keys(rng: random.Random, lines: Lines) -> None:
    lines += [f"k{i}: {i}" for i in range(50_000)]


LARGE: dict[str, Callable[[random.Random, Lines], None]] = {
    "large_60kb": _sixty_kb,
    "large_1mb": _one_mb,
    "large_50k_keys": _fifty_thousand_keys,
}


# -- a case ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One hostile config: its file bytes and how it was made."""

    seed: str  # the seed config's name
    mutations: tuple[str, ...]
    ending: str  # "\n", "\r\n", "\r" or "mixed"
    final_newline: bool
    non_utf8: bool
    data: bytes

    @property
    def text(self) -> str:
        """What an editor shows of the file (what is not UTF-8 as U+FFFD)."""
        return self.data.decode("utf-8", "replace")

    def describe(self) -> str:
        ending = {"\n": "LF", "\r\n": "CRLF", "\r": "CR"}.get(self.ending, self.ending)
        extra = (" no-final-newline" if not self.final_newline else "") + (" non-utf8" if self.non_utf8 else "")
        return f"{self.seed} + {'+'.join(self.mutations) or 'nothing'} [{ending}{extra}]"


def build(
    rng: random.Random,
    seed: tuple[str, str],
    mutations: Sequence[str],
    ending: str = "\n",
    final_newline: bool = True,
    non_utf8: bool = False,
) -> Case:
    """Apply `mutations` (names in MUTATIONS or LARGE) to the seed's text, in order, drawing from `rng`; then write
    the lines with `ending` and, with `non_utf8`, insert bytes that are not UTF-8 somewhere."""
    name, text = seed
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for m in mutations:
        (MUTATIONS.get(m) or LARGE[m])(rng, lines)
    breaks = [rng.choice(["\n", "\r\n", "\r"]) if ending == "mixed" else ending for _ in lines]
    if not final_newline and breaks:
        breaks[-1] = ""
    data = "".join(line + br for line, br in zip(lines, breaks, strict=True)).encode("utf-8")
    if non_utf8:
        at = rng.randint(0, len(data))
        while at < len(data) and (data[at] & 0xC0) == 0x80:  # on a character's first byte
            at += 1
        data = data[:at] + rng.choice(NON_UTF8) + data[at:]
    return Case(name, tuple(mutations), ending, final_newline, non_utf8, data)


def random_case(rng: random.Random, pool: Sequence[tuple[str, str]], large: float = 0.0) -> Case:
    """A case of 1-4 mutations of a seed from `pool`; with probability `large`, one of LARGE's documents too."""
    names = rng.choices(list(MUTATIONS), k=rng.choice([1, 1, 2, 2, 3, 4]))
    if rng.random() < large:
        names.append(rng.choice(list(LARGE)))
    return build(
        rng,
        rng.choice(pool),
        names,
        ending=rng.choice(ENDINGS),
        final_newline=rng.random() < 0.7,
        non_utf8=rng.random() < 0.1,
    )
