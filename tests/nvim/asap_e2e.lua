-- ASAP outside VS Code: Neovim's built-in LSP client against `python -m server`.
-- Diagnostics (ASAP101 on the mesh), hover on ici_tensor_parallelism, and the quick fix applied.
local function out(s) io.stdout:write(s .. '\n') end
local cmd = { vim.env.ASAP_PY, '-m', 'server' }
vim.api.nvim_create_autocmd('FileType', { pattern = 'yaml', callback = function(ev)
  local cfg = { name = 'asap', cmd = cmd, root_dir = vim.fn.getcwd() }
  if vim.lsp.start then vim.lsp.start(cfg, { bufnr = ev.buf })          -- nvim >= 0.8
  else vim.lsp.buf_attach_client(ev.buf, vim.lsp.start_client(cfg)) end  -- nvim 0.7 (Debian)
end })
local function request(buf, method, params)
  for _, r in pairs(vim.lsp.buf_request_sync(buf, method, params, 20000) or {}) do if r.result then return r.result end end
end
local function find(buf, prefix)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do if l:sub(1, #prefix) == prefix then return i - 1 end end
end
vim.api.nvim_create_autocmd('VimEnter', { callback = function()
  local ok, err = pcall(function()
    local buf = vim.api.nvim_get_current_buf(); local td = { uri = vim.uri_from_bufnr(buf) }
    local function mesh_error()
      for _, d in ipairs(vim.diagnostic.get(buf)) do if d.code == 'ASAP101' then return d end end
    end
    assert(vim.wait(60000, function() return mesh_error() ~= nil end, 50), 'no ASAP101 diagnostic')
    local d = mesh_error()
    out(('DIAG %d:%d %s'):format(d.lnum + 1, d.col + 1, d.message))
    local tline = find(buf, 'ici_tensor_parallelism')
    local hover = request(buf, 'textDocument/hover', { textDocument = td, position = { line = tline, character = 2 } })
    assert(hover and hover.contents.value:find('Degree', 1, true), 'hover without the degree: ' .. vim.inspect(hover))
    out('HOVER ' .. hover.contents.value:sub(1, 80):gsub('\n', ' '))
    local range = { start = { line = d.lnum, character = d.col }, ['end'] = { line = d.end_lnum, character = d.end_col } }
    local actions = request(buf, 'textDocument/codeAction', { textDocument = td, range = range,
      context = { diagnostics = { { range = range, message = d.message, code = d.code, source = 'asap' } } } })
    local fix
    for _, a in ipairs(actions or {}) do if a.title:find('Set ici_fsdp_parallelism to 16', 1, true) then fix = a end end
    assert(fix, 'no quick fix')
    out('CODEACTION ' .. fix.title)
    vim.lsp.util.apply_workspace_edit(fix.edit, 'utf-16')
    local fixed = vim.api.nvim_buf_get_lines(buf, d.lnum, d.lnum + 1, false)[1]
    assert(fixed == 'ici_fsdp_parallelism: 16   # tuned by hand last week', 'edit not applied: ' .. fixed)
    out('FIXED ' .. fixed)
    out('OK')
  end)
  if ok then vim.cmd('qa!') else io.stderr:write('FAIL: ' .. tostring(err) .. '\n'); vim.cmd('cquit 1') end
end })
