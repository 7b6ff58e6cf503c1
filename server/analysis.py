"""One analysis of one config document: load it (with its parents), run the static mesh
checks, and keep everything the editor and the CLI show. No editor types here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from server.perf import config as config_mod
from server.perf.config import Config, Reader
from server.perf.findings import Finding
from server.perf.mesh import MeshCheck, check


@dataclass
class Analysis:
    path: Path | None
    config: Config
    check: MeshCheck
    findings: list[Finding] = field(default_factory=list)

    @property
    def depends_on(self) -> list[Path]:
        """Parent files whose edits change this analysis."""
        return list(self.config.chain)

    def to_json(self) -> dict[str, object]:
        sl = self.check.slice
        return {
            "file": str(self.path) if self.path else None,
            "is_maxtext_config": self.config.is_maxtext,
            "slice": None
            if sl is None
            else {
                "name": sl.name,
                "source": self.check.slice_source,
                "generation": sl.chip.generation,
                "chips": sl.chips,
                "topology": list(sl.topology),
                "wraparound": list(sl.wrap),
                "devices_per_slice": sl.devices_per_slice,
                "num_slices": sl.num_slices,
                "devices": sl.devices,
            },
            "model": None if self.config.model is None else self.config.model.name,
            "mesh": self.check.mesh_dict(),
            "findings": [f.to_json() for f in self.findings],
        }


def analyze(
    path: Path | None,
    text: str | None = None,
    reader: Reader | None = None,
    default_slice: str | None = None,
) -> Analysis:
    """Analyze a config file (or an editor buffer's `text` for it)."""
    cfg = config_mod.load(path, text, reader) if reader else config_mod.load(path, text)
    chk = check(cfg, default_slice)
    findings = [*cfg.findings, *chk.findings] if cfg.is_maxtext else []
    findings.sort(key=lambda f: (f.span.line, f.span.column, f.code))
    return Analysis(path, cfg, chk, findings)
