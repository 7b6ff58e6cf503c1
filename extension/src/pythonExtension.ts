/** The active interpreter of the Python extension (ms-python.python), through its public API. */
import * as vscode from 'vscode';

interface PythonEnvironmentsApi {
  environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
  };
}

export async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension<PythonEnvironmentsApi>('ms-python.python');
  if (!ext) return undefined;
  const api = ext.isActive ? ext.exports : await ext.activate();
  const active = api?.environments?.getActiveEnvironmentPath(resource);
  if (!active) return undefined;
  const env = await api.environments.resolveEnvironment(active);
  return env?.executable.uri?.fsPath;
}
