"""initialize, initialized, shutdown and settings changes; the server's log forwarded to the client."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import ClassVar

from lsprotocol import types as lsp

from server import __version__
from server.editor import background
from server.editor.contract import CommandError
from server.editor.server import AsapServer, ClientFeatures
from server.editor.settings import Settings
from server.presentation import explain

log = logging.getLogger("asap")


def initialize(ls: AsapServer, params: lsp.InitializeParams) -> None:
    ls.features = ClientFeatures.of(params.capabilities)
    opts = params.initialization_options
    if isinstance(opts, dict):
        ls.settings = Settings.from_client(opts.get("settings", opts))


async def initialized(ls: AsapServer, params: lsp.InitializedParams) -> None:
    handler = _ClientLogHandler(ls, asyncio.get_running_loop())
    # the message alone: the client's output channel adds the time and the level (one format, no "INFO asap:")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_no_command_errors)
    log.setLevel(logging.INFO)
    log.info("ASAP language server %s started", __version__)
    # The knowledge notes' titles (cited by the diagnostics' hovers) need pydantic: pay for it now, off the loop.
    warm = asyncio.get_running_loop().run_in_executor(None, _warm_up)
    warm.add_done_callback(_log_warm_up)
    if ls.features.configuration:
        before = ls.settings
        await _pull_settings(ls)
        if ls.settings != before:  # documents opened meanwhile were analysed with the old settings
            ls.reanalyze_all()
            _rerun_agents(ls, before)


def _no_command_errors(record: logging.LogRecord) -> bool:
    """pygls logs every error reply with its traceback (to stderr, which the client shows in its output channel).
    A CommandError is a command refusing what it was asked, answered with its message: no traceback for it."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, CommandError)


def shutdown(ls: AsapServer, params: None) -> None:
    """Stop background work: analyses, agents, compiles and profile conversions (child processes are killed)."""
    ls.stop_background()


async def did_change_configuration(ls: AsapServer, params: lsp.DidChangeConfigurationParams) -> None:
    before = ls.settings
    settings = params.settings.get("asap") if isinstance(params.settings, dict) else None
    if settings is not None:
        ls.settings = _keep_trust(ls, Settings.from_client(settings))
    else:
        await _pull_settings(ls)
    ls.reanalyze_all()
    _rerun_agents(ls, before)


def _keep_trust(ls: AsapServer, settings: Settings) -> Settings:
    """Trust is the initialization's: a later settings message (which carries the `asap` section alone) cannot raise
    it. The extension restarts the server when the user trusts the workspace."""
    return settings if ls.settings.trusted else settings.restricted()


def _rerun_agents(ls: AsapServer, before: Settings) -> None:
    """The agents again for every open document when asap.xlaFlags changed: their diagnosis and proposals are priced
    under the flags, and they otherwise run only on open, save and Analyze."""
    if ls.settings.xla_flags != before.xla_flags:
        for uri in list(ls.workspace.text_documents):
            background.start(ls, uri, "agents")


def _warm_up() -> None:
    explain.warm_up()


def _log_warm_up(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("warming up the hover explanations failed: %s", fut.exception())


async def _pull_settings(ls: AsapServer) -> None:
    try:
        res = await ls.workspace_configuration_async(
            lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="asap")])
        )
    except Exception as e:  # clients without workspace/configuration keep the initialization options
        log.info("workspace/configuration not available (%s); keeping initialization settings", e)
        return
    if res and isinstance(res[0], dict):  # a client without an `asap` section answers [null]
        ls.settings = _keep_trust(ls, Settings.from_client(res[0]))
    log.info("settings: %r", ls.settings)


class _ClientLogHandler(logging.Handler):
    """Forward Python logging to the client's output channel (window/logMessage)."""

    LEVELS: ClassVar[dict[int, lsp.MessageType]] = {
        logging.ERROR: lsp.MessageType.Error,
        logging.WARNING: lsp.MessageType.Warning,
        logging.INFO: lsp.MessageType.Info,
    }

    def __init__(self, ls: AsapServer, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(logging.DEBUG)
        self.ls, self.loop = ls, loop

    def emit(self, record: logging.LogRecord) -> None:
        if self.ls.shutting_down:  # the client stopped reading
            return
        kind = next((t for lvl, t in self.LEVELS.items() if record.levelno >= lvl), lsp.MessageType.Log)
        params = lsp.LogMessageParams(type=kind, message=self.format(record))
        try:
            if threading.current_thread() is threading.main_thread():
                self.ls.window_log_message(params)
            else:
                self.loop.call_soon_threadsafe(self.ls.window_log_message, params)
        except Exception:  # logging must never raise
            pass
