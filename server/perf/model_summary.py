"""What a `model_name` resolves to, for people: the model file it came from, the decoder's block structure
(server/perf/architecture.py), parameter counts (total, active per token) and the notes that qualify them.

One summary serves `asap models` (the whole catalog, or one config's model) and the hover on `model_name`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.config import models
from server.config import resolve as config
from server.perf import arith
from server.perf.architecture import Architecture


@dataclass(frozen=True)
class ModelSummary:
    name: str
    source: str  # "<file>@<commit>" for the committed catalog, the path for a file read from disk
    origin: str  # models.ORIGIN_*, or "explicit" for dims set in the config (no model file)
    arch: Architecture

    @property
    def total(self) -> int:
        return self.arch.total_params

    @property
    def active(self) -> int:
        return self.arch.active_params

    def groups(self) -> list[dict[str, Any]]:
        return [
            {
                "layers": g.count,
                "block": g.name,
                "params_per_layer": g.params,
                "active_params_per_layer": g.active_params,
            }
            for g in self.arch.groups
        ]

    def to_json(self) -> dict[str, Any]:
        a = self.arch
        return {
            "name": self.name,
            "decoder_block": a.decoder_block,
            "source": self.source,
            "origin": self.origin,
            "layers": a.layers,
            "maxtext_layers": a.maxtext_layers or a.layers,
            "emb_dim": a.emb_dim,
            "vocab_size": a.vocab,
            "moe": a.moe,
            "params": self.total,
            "active_params": self.active,
            "embedding_params": a.embedding,
            "logits_params": a.logits,
            "tied_embedding": a.tied,
            "structure": a.summary(),
            "groups": self.groups(),
            "notes": list(a.notes),
            "sources": list(a.sources),
        }

    def markdown(self) -> str:
        """The hover on `model_name`: structure and counts, with where they come from."""
        a = self.arch
        lines = [
            f"**{self.name}** · `{a.decoder_block}` · {_b(self.total)} parameters"
            + (f", {_b(self.active)} active per token" if a.moe else ""),
            "",
        ]
        rep = max(a.groups, key=lambda g: g.count).attention
        lines.append(
            f"- emb {a.emb_dim}, {a.layers} layers, vocab {a.vocab}; attention {rep.q_heads} query / "
            f"{rep.kv_heads} kv heads × {rep.qk_head_dim}"
        )
        for g in a.groups:
            active = f" ({_b(g.active_params)} active)" if g.active_params != g.params else ""
            lines.append(f"- {g.count} × {g.name}: {_b(g.params)} per layer{active}")
        lines.append(
            f"- embedding {_b(a.embedding)}"
            + (" (tied: the logits reuse it)" if a.tied else f", logits {_b(a.logits)}")
        )
        lines += ["", *(f"_{n}_" for n in a.notes)]
        lines.append(f"_Model file: {self.source}; structure: server/perf/architecture.py (MaxText's decoder code)_")
        return "\n".join(lines)

    def text(self) -> str:
        """The same for a terminal (Markdown's emphasis dropped)."""
        out = []
        for line in self.markdown().replace("**", "").replace("`", "").splitlines():
            out.append(line[1:-1] if len(line) > 1 and line.startswith("_") and line.endswith("_") else line)
        return "\n".join(out)


def _b(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"


def _source(cfg: config.Config) -> tuple[str, str]:
    mf = cfg.model_file
    if mf is None:
        return "the base_* keys of the config (no model file)", "explicit"
    return (f"{mf.file}@{mf.commit[:9]}" if mf.commit else mf.file), mf.origin


def of_config(cfg: config.Config) -> ModelSummary:
    """The summary of the model a loaded config resolves to. Raises arith.ArithError at the key to blame."""
    s = arith.shape(cfg)
    assert s.arch is not None
    source, origin = _source(cfg)
    return ModelSummary(str(cfg.get("model_name")), source, origin, s.arch)


def of_name(name: str, maxtext_path: Path | str | None = None) -> ModelSummary:
    """The summary of `model_name: name` as a config with nothing else would resolve it."""
    return of_config(config.load(None, text=f"model_name: {name}\n", maxtext_path=maxtext_path))


def catalog(maxtext_path: Path | str | None = None) -> list[ModelSummary]:
    """Every model of the committed catalog (and of `maxtext_path`'s models/ folder when given)."""
    names = set(models.catalog_names())
    if maxtext_path is not None:
        d = models.checkout_models_dir(Path(maxtext_path))
        if d is not None:
            names |= {p.stem for p in d.glob("*.yml")}
    return [of_name(n, maxtext_path) for n in sorted(names)]
