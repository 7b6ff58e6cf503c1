"""The LSP handlers, one file per feature: lifecycle (initialize, settings, shutdown), documents (open, change,
save, close), hover, code actions, code lens, and the executeCommand commands. server/lsp.py registers them."""
