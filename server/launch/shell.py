"""The commands of a shell script, read statically with tree-sitter's bash grammar: never executed.

`commands(script, env)` walks the script in file order and returns each simple command as the shell would run it:
its words after expansion, quote removal and field splitting (server/launch/located.py keeps every character's
place in the file), and the variables assigned before it. Assignments (`X=...`, `export X=...`, a command's
`X=... cmd` prefix) are expanded statically from what the file assigned above; a variable the file never assigns,
one it assigns an empty placeholder (`export BASE_OUTPUT_DIR=""`, the recipes' "fill these in"), a command
substitution or arithmetic stays symbolic: kept as written, marked, never an error. tree-sitter is error tolerant,
so a script being typed (an unclosed quote) still yields the commands before the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import tree_sitter as ts
import tree_sitter_bash

from server.launch.located import Located

Env = dict[str, Located]

# Characters a backslash escapes inside double quotes (bash(1), QUOTING); before any other it stays.
_DQ_ESCAPES = '$`"\\\n'
# A documentation placeholder assigned for the reader to replace (`export TPU_TYPE="your-tpu-type"`,
# `PROJECT=<project-id>`): unknown until run time, as an empty assignment is.
_PLACEHOLDER = re.compile(r"^(?:your[-_]\S*|YOUR_\S*|<[^<>\s]+>)$", re.IGNORECASE)
# How deep scripts may nest (`bash -c "..."` inside `--command="..."`): a bound, not a limit any real launch meets.
MAX_NESTING = 8


@lru_cache(maxsize=1)
def _parser() -> ts.Parser:
    return ts.Parser(ts.Language(tree_sitter_bash.language()))


@dataclass
class Command:
    """One simple command: its words as the shell passes them, the variables set before it (file order, its
    own `X=... cmd` prefix included), and its whole source text (for its place in the file)."""

    words: list[Located]
    env: Env
    source: Located
    prefix: Env = field(default_factory=dict)  # the `X=... cmd` assignments of this command only


class _Script:
    """One parse of a Located script; node byte ranges map back to the script's characters."""

    def __init__(self, script: Located):
        self.script = script
        data = script.text.encode("utf-8", "surrogatepass")
        self.tree = _parser().parse(data)
        if len(data) == len(script.text):
            self._char: list[int] | None = None
        else:  # byte offset -> character index
            self._char = [0] * (len(data) + 1)
            b = 0
            for i, ch in enumerate(script.text):
                n = len(ch.encode("utf-8", "surrogatepass"))
                for k in range(n):
                    self._char[b + k] = i
                b += n
            self._char[b] = len(script.text)

    def loc(self, start_byte: int, end_byte: int) -> Located:
        if self._char is None:
            return self.script[start_byte:end_byte]
        return self.script[self._char[start_byte] : self._char[end_byte]]

    def node(self, n: ts.Node) -> Located:
        return self.loc(n.start_byte, n.end_byte)


def commands(script: Located, env: Env | None = None) -> list[Command]:
    """The simple commands of `script` in file order, `env` the variables known before it."""
    s = _Script(script)
    out: list[Command] = []
    _walk(s, s.tree.root_node, dict(env or {}), out)
    return out


def _walk(s: _Script, node: ts.Node, env: Env, out: list[Command]) -> None:
    t = node.type
    if t == "variable_assignment":
        _assign(s, node, env)
    elif t == "command":
        out.append(_command(s, node, env))
    elif t in ("subshell", "function_definition"):
        inner = dict(env)  # what a subshell or a function body assigns does not reach the script after it
        for c in node.named_children:
            _walk(s, c, inner, out)
    elif t in ("heredoc_body", "comment"):
        return
    else:
        for c in node.named_children:
            _walk(s, c, env, out)


def _assign(s: _Script, node: ts.Node, env: Env) -> None:
    name = node.child_by_field_name("name")
    if name is None or name.type != "variable_name":
        return
    value = node.child_by_field_name("value")
    key = s.node(name).text
    appends = any(c.type == "+=" for c in node.children)  # `X+=...` adds to X's value (bash(1), PARAMETERS)
    if value is None:
        if not (appends and key in env):
            env[key] = _placeholder(s.node(node), key)
        return
    v = _join(_word(s, value, env))
    if appends and key in env:
        env[key] = Located.join([env[key], v])
        return
    env[key] = _placeholder(v, key) if v.text == "" or _PLACEHOLDER.match(v.text) else v


def _placeholder(at: Located, name: str) -> Located:
    """An empty assignment stands for a value filled in before the run: `${NAME}`, symbolic, at the assignment."""
    pos = at.anchor()
    text = "${" + name + "}"
    if pos is None:
        return Located(text, (-1,) * len(text), (True,) * len(text))
    return Located(text, (pos,) * len(text), (True,) * len(text))


def _command(s: _Script, node: ts.Node, env: Env) -> Command:
    prefix: Env = {}
    words: list[Located] = []
    for i, c in enumerate(node.children):
        fname = node.field_name_for_child(i)
        if c.type == "variable_assignment" and fname is None:
            _assign(s, c, prefix)
        elif fname in ("name", "argument"):
            target = c.named_children[0] if c.type == "command_name" and c.named_children else c
            words.extend(_fields(_word(s, target, {**env, **prefix})))
    return Command(words, {**env, **prefix}, s.node(node), prefix)


# A part of a word: its text, and whether the shell splits it into fields (an unquoted expansion).
_Part = tuple[Located, bool]


def _join(parts: list[_Part]) -> Located:
    return Located.join(p for p, _ in parts)


def _fields(parts: list[_Part]) -> list[Located]:
    """Field splitting: whitespace in the unquoted expansions separates fields; an unquoted expansion that is empty
    adds none, a quoted empty string one."""
    fields: list[Located] = []
    cur: list[Located] = []
    started = False
    for text, split in parts:
        if not split:
            cur.append(text)
            started = True
            continue
        i, n = 0, len(text)
        # a symbolic character is source text standing for a value unknown statically (`$(date +%Y-%m-%d)`): its
        # blanks are that text's, not the value's, and separate nothing
        blank = [c in " \t\n" and not sym for c, sym in zip(text.text, text.symbolic, strict=True)]
        while i < n:
            j = i
            while j < n and not blank[j]:
                j += 1
            if j > i:
                cur.append(text[i:j])
                started = True
            if j < n:  # a separator: ends the field
                if started:
                    fields.append(Located.join(cur))
                cur, started = [], False
                while j < n and blank[j]:
                    j += 1
            i = j
    if started:
        fields.append(Located.join(cur))
    return fields


def _unescape(loc: Located, escapes: str | None = None) -> Located:
    """Backslashes removed as the shell removes them: before any character in an unquoted word (`escapes` None),
    only before one of `escapes` inside double quotes; a backslash-newline is nothing either way."""
    keep: list[int] = []
    i, t = 0, loc.text
    while i < len(t):
        if t[i] == "\\" and i + 1 < len(t) and (escapes is None or t[i + 1] in escapes):
            if t[i + 1] != "\n":
                keep.append(i + 1)
            i += 2
            continue
        keep.append(i)
        i += 1
    return _pick(loc, keep)


def _unescape_word(loc: Located) -> Located:
    """An unquoted word's backslashes: `\\x` is x, a backslash-newline is nothing."""
    return _unescape(loc)


def _unescape_dq(loc: Located) -> Located:
    """Inside double quotes a backslash escapes only $ ` " \\ and newline (a backslash-newline is nothing)."""
    return _unescape(loc, _DQ_ESCAPES)


def _pick(loc: Located, idx: list[int]) -> Located:
    return Located(
        "".join(loc.text[i] for i in idx), tuple(loc.offsets[i] for i in idx), tuple(loc.symbolic[i] for i in idx)
    )


def _symbolic(loc: Located) -> Located:
    return Located(loc.text, loc.offsets, (True,) * len(loc.text))


def _word(s: _Script, node: ts.Node, env: Env, quoted: bool = False) -> list[_Part]:
    """The parts of one word node after expansion and quote removal."""
    t = node.type
    if t in ("word", "number", "command_name"):
        return [(_unescape_word(s.node(node)), False)]
    if t == "raw_string":
        return [(s.node(node)[1:-1], False)]
    if t == "ansi_c_string":  # $'...': its common escapes are rare in a launch command; kept as written
        return [(_unescape_word(s.node(node)[2:-1]), False)]
    if t == "concatenation":
        return [p for c in node.children for p in _word(s, c, env, quoted)]
    if t in ("string", "translated_string"):
        return _string(s, node, env)
    if t in ("simple_expansion", "expansion"):
        value = _expand(s, node, env)
        return [(value, not quoted)]
    return [(_symbolic(s.node(node)), False)]  # $(...), $((...)), <(...), arrays, globs: unknown statically


def _string(s: _Script, node: ts.Node, env: Env) -> list[_Part]:
    """A double-quoted string: its text between the children (escapes removed) and its expansions, none split."""
    parts: list[_Part] = []
    pos = node.start_byte + 1  # after the opening quote
    end = (
        node.end_byte - 1 if s.node(node).text.endswith('"') and node.end_byte - node.start_byte > 1 else node.end_byte
    )
    for c in node.named_children:
        if c.start_byte > pos:
            parts.append((_unescape_dq(s.loc(pos, c.start_byte)), False))
        if c.type == "string_content":
            parts.append((_unescape_dq(s.node(c)), False))
        else:
            parts.extend(_word(s, c, env, quoted=True))
        pos = c.end_byte
    if end > pos:
        parts.append((_unescape_dq(s.loc(pos, end)), False))
    return [(p, False) for p, _ in parts]


def _expand(s: _Script, node: ts.Node, env: Env) -> Located:
    """`$X`, `${X}`, `${X:-default}`: the variable's value when the file assigned it, else symbolic."""
    named = node.named_children
    whole = s.node(node)
    if not named or named[0].type != "variable_name":
        return _symbolic(whole)
    name = s.node(named[0]).text
    value = env.get(name)
    ops = [c.type for c in node.children if not c.is_named and c.type not in ("$", "${", "}")]
    if not ops:
        return value if value is not None else _symbolic(whole)
    if ops[0] in (":-", "-") and len(named) == 2:
        if value is not None and not value.is_symbolic and (value.text or ops[0] == "-"):
            return value
        if value is None:
            return _join(_word(s, named[1], env, quoted=True))
    return _symbolic(whole)
