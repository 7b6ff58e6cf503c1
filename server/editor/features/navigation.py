"""textDocument/definition and textDocument/documentLink (server/presentation/navigation.py decides where).

Definition uses the analysis of the document as it is now when it is ready, else resolves the config's chain alone
(no mesh rules, no estimate) in a worker thread; reading the parents happens there too. Document links read the
text's lines and look up at most a few paths on disk. A document over the size limit gets neither.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from server.common.findings import Span
from server.config import models
from server.config.resolve import Config, load
from server.editor import lsp_convert
from server.editor.features.completion import client_range, position
from server.editor.server import AsapServer
from server.launch import analysis as launch
from server.presentation import navigation

log = logging.getLogger("asap")

LINK_OPTIONS = lsp.DocumentLinkOptions(resolve_provider=False)


def _path(uri: str) -> Path | None:
    fs = to_fs_path(uri)
    return Path(fs) if fs else None


async def definition(ls: AsapServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if ls.too_large(doc) is not None:
        return None
    line, column = position(doc, params.position)
    an = ls.ready_analysis(doc)
    path, text, read = _path(doc.uri), doc.source, ls.read

    def find() -> navigation.Target | None:
        if an is not None and an.runs is not None:  # a launch file: the definition of the run's token there
            recipe = launch.recipe_at(an.runs, line, column)
            if recipe is not None:  # a recipe in the user's checkout: its MaxTextModel( line
                r = recipe[0].run.found_recipe
                file = Path(r.file)
                if r.commit is None and file.is_file():
                    return navigation.Target(file, Span.point(max(r.line - 1, 0)), "benchmark recipe")
                return None
            hit = launch.run_at(an.runs, line, column)
            if hit is None:
                return None
            ra, vline, vcol, _ = hit
            return navigation.definition(ra.analysis.config, vline, vcol, read)
        cfg: Config = an.config if an is not None else load(path, text, read)
        return navigation.definition(cfg, line, column, read)

    try:
        target = await asyncio.get_running_loop().run_in_executor(None, find)
    except Exception as e:  # a bug in resolving must not become an error reply on every F12
        log.error("definition in %s at %d:%d failed: %s", doc.uri, line + 1, column + 1, e, exc_info=e)
        return None
    if target is None:
        return None
    uri = target.file.as_uri()
    opened = ls.workspace.text_documents.get(uri)
    return lsp.Location(uri=uri, range=lsp_convert.client_range(opened, target.span))


def document_link(ls: AsapServer, params: lsp.DocumentLinkParams) -> list[lsp.DocumentLink] | None:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    if ls.too_large(doc) is not None:
        return None
    links = navigation.document_links(doc.source, _path(doc.uri), models.default_maxtext_path())
    td = ls.client_capabilities.text_document
    tooltips = bool(td and td.document_link and td.document_link.tooltip_support)
    return [
        lsp.DocumentLink(
            range=client_range(doc, k.span), target=k.target.as_uri(), tooltip=k.tooltip if tooltips else None
        )
        for k in links
    ]
