"""The `asap.*` settings the server reads (initializationOptions, workspace/configuration, didChangeConfiguration),
as one typed model. The extension declares them in `extension/package.json` (a test keeps the two in step).

A value of the wrong type or outside its choices falls back to that setting's default, with a warning in the log:
a typo in settings.json must not stop the server or wipe the other settings.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from server.common import pg_store
from server.config.run_flags import FlagSource

log = logging.getLogger("asap")


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True, extra="ignore")

    default_slice: StrictStr | None = None  # asap.defaultSlice: the slice of a config that declares none
    show_estimate: StrictBool = True  # asap.showEstimate: the ASAP120 information line (with the setting below)
    # asap.showInformationDiagnostics: publish the estimate's, the diagnosis', the profile's and the compiler's
    # information entries too (they live in the hover and the code lens; a healthy file has no Problems entry)
    show_information_diagnostics: StrictBool = False
    kb_path: StrictStr | None = None  # asap.kbPath: the knowledge index file
    llm: Literal["off", "auto"] = "off"  # asap.llm: the offline engine only, or Claude when a key is set
    profile_search_paths: tuple[StrictStr, ...] = ()  # asap.profileSearchPaths: where <run_name>/ profiles may be
    verify: Literal["manual", "auto"] = "manual"  # asap.verify: ASAP: Verify only, or after each analysis
    maxtext_python: StrictStr | None = None  # asap.maxtextPython: compile MaxText's own train step with it
    maxtext_path: StrictStr | None = None  # asap.maxtextPath: a MaxText checkout whose models/ model_name is read from
    # asap.store: the shared experiment log (postgresql://...). The extension hands it to the server process as
    # ASAP_STORE when it starts it (and restarts the server when it changes): the process reads the variable
    # (server/common/pg_store.py). Kept here for the record; never shown with its password (repr, warnings).
    store: StrictStr | None = Field(default=None, repr=False)
    # asap.verifyCluster: "HOST:PORT" of a Ray cluster's head; Verify runs its compiles there (background.py)
    verify_cluster: StrictStr | None = None
    # asap.xlaFlags: the run's LIBTPU_INIT_ARGS / XLA_FLAGS string, priced under when a config's own
    # `# LIBTPU_INIT_ARGS=...` comment states none (server/config/run_flags.py); blank: libtpu's defaults
    xla_flags: StrictStr | None = None
    # Workspace trust (not an asap.* setting: the extension sends `trusted: false` when VS Code runs the workspace in
    # Restricted Mode). An untrusted workspace's files are read and priced (diagnostics, hovers, fixes, estimates),
    # but nothing it names is run: no Verify (MaxText or the TPU compiler: a compile imports the workspace's code
    # through maxtextPython/maxtextPath), no Claude (llm off), no Ray cluster. See `restricted()`.
    trusted: StrictBool = True

    @field_validator("default_slice", "kb_path", "store", "verify_cluster", "xla_flags", mode="after")
    @classmethod
    def _blank_is_unset(cls, v: str | None) -> str | None:
        return (v.strip() or None) if v is not None else None

    @field_validator("maxtext_python", "maxtext_path", mode="after")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        return str(Path(v.strip()).expanduser()) if v is not None and v.strip() else None

    @field_validator("profile_search_paths", mode="before")
    @classmethod
    def _paths(cls, v: Any) -> Any:
        # a list whose non-string or blank entries are dropped (VS Code's array editor leaves blank rows)
        return tuple(p for p in v if isinstance(p, str) and p.strip()) if isinstance(v, list) else v

    @classmethod
    def from_client(cls, raw: Any) -> Settings:
        """The settings a client sent (camelCase keys, as `asap.<key>`); each invalid value takes its default."""
        if not isinstance(raw, dict):
            return cls()
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            key = info.alias or name
            if key not in raw:
                continue
            try:
                cls.model_validate({key: raw[key]})
            except ValidationError:
                shown = pg_store.redact(repr(raw[key]))
                log.warning("asap.%s: %s is not a valid value; using the default", key, shown)
                continue
            values[key] = raw[key]
        settings = cls.model_validate(values)
        # fails closed: a `trusted` that is not exactly true (false, "false", null) restricts, never the default
        return settings.restricted() if "trusted" in raw and raw["trusted"] is not True else settings

    def restricted(self) -> Settings:
        """These settings as an untrusted workspace gets them: whatever its `.vscode/settings.json` says, the server
        runs no compile, calls no LLM and reads no MaxText environment or checkout of its choosing."""
        off = {"llm": "off", "verify": "manual", "maxtext_python": None, "maxtext_path": None, "verify_cluster": None}
        return self.model_copy(update={**off, "trusted": False})

    @property
    def flags(self) -> FlagSource | None:
        """asap.xlaFlags as a source of the run's flags (None: blank)."""
        return FlagSource.given("setting", self.xla_flags)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The settings as logged ("settings: Settings(...)"): the store's URL without its password."""
        yield from super().__repr_args__()
        if self.store is not None:
            yield "store", pg_store.redact_url(self.store)
