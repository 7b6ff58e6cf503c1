/** The code lens' "Proposals": put the cursor at the mesh block and open the quick fixes there, where the
 * server offers "Apply proposal N" (computed for the document as it is, re-validated, minimal edits). */
import * as vscode from 'vscode';

export async function showProposals(uri?: unknown, line?: unknown, character?: unknown): Promise<boolean> {
  const editor =
    typeof uri === 'string'
      ? await vscode.window.showTextDocument(vscode.Uri.parse(uri), { preserveFocus: false })
      : vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showErrorMessage('ASAP: open a MaxText config (YAML) to see its proposals.');
    return false;
  }
  if (typeof line === 'number' && typeof character === 'number') {
    const pos = new vscode.Position(line, character);
    editor.selection = new vscode.Selection(pos, pos);
    editor.revealRange(new vscode.Range(pos, pos));
  }
  await vscode.commands.executeCommand('editor.action.quickFix');
  return true;
}
