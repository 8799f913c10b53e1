-- Headless Neovim as the Fixpoint server's client (Neovim 0.7+; no plugins, no lspconfig).
-- Starts $LSP_CMD with the working directory as the root, attaches it to the current buffer, waits for
-- diagnostics, asks for the code actions at the first one, and writes what it saw to $LSP_OUT:
--   DIAG <line>:<col> <code> <message>      one per diagnostic of the buffer (0-based)
--   ACTION <title>                          one per code action offered at the first diagnostic
-- Exits 0 when it saw at least one diagnostic and one action, 1 otherwise.
local out_path = assert(os.getenv('LSP_OUT'), 'LSP_OUT not set')
local cmd = vim.split(assert(os.getenv('LSP_CMD'), 'LSP_CMD not set'), ' ', { trimempty = true })
local timeout_ms = tonumber(os.getenv('LSP_TIMEOUT_MS') or '20000')
local lines, published = {}, nil
local bufnr = vim.api.nvim_get_current_buf()
if vim.bo[bufnr].filetype == '' then vim.bo[bufnr].filetype = 'c' end

local client_id = vim.lsp.start_client({
  name = 'fixpoint',
  cmd = cmd,
  root_dir = vim.fn.getcwd(),
  handlers = {
    ['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
      if result.uri == vim.uri_from_bufnr(bufnr) then published = result end
      return vim.lsp.handlers['textDocument/publishDiagnostics'](err, result, ctx, config)
    end,
  },
})
if not client_id then
  vim.fn.writefile({ 'FAIL the server did not start' }, out_path)
  vim.cmd('cquit 1')
end
vim.lsp.buf_attach_client(bufnr, client_id)

local got = vim.wait(timeout_ms, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
if not got then table.insert(lines, 'FAIL no diagnostics') end
for _, d in ipairs(vim.diagnostic.get(bufnr)) do
  table.insert(lines, string.format('DIAG %d:%d %s %s', d.lnum, d.col, tostring(d.code), d.message))
end

local actions = 0
if published and #published.diagnostics > 0 then
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = published.diagnostics[1].range,
    context = { diagnostics = published.diagnostics },
  }
  for _, response in pairs(vim.lsp.buf_request_sync(bufnr, 'textDocument/codeAction', params, timeout_ms) or {}) do
    for _, action in ipairs(response.result or {}) do
      actions = actions + 1
      table.insert(lines, 'ACTION ' .. action.title)
    end
  end
end

vim.fn.writefile(lines, out_path)
vim.lsp.stop_client(client_id)
vim.wait(3000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
if got and actions > 0 then vim.cmd('qall!') else vim.cmd('cquit 1') end
