// Checks and stages what `vsce package` packs besides the bundles; run in the extension folder by `npm run package`
// (`make vsix` builds the wheel and copies it to server/ first).
//   - The server wheel the extension installs (*ASAP: Install Server*): exactly one, wheels/asap-<version>-py3-none-
//     any.whl, where <version> is package.json's and pyproject.toml's alike. An extension that offered another
//     version's server than its own would talk to it with another protocol contract.
//   - The repository's LICENSE, copied beside package.json, where vsce looks for it.
// Any failure exits 1 with the reason and the fix, so no VSIX is written.
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** [project] version of a pyproject.toml's text, or undefined. */
export function pyprojectVersion(text) {
  const project = /^\[project\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text);
  return project ? /^version\s*=\s*["']([^"']+)["']/m.exec(project[1])?.[1] : undefined;
}

/** The problems that stop the packaging of the extension in `dir` (its parent holds pyproject.toml, LICENSE). */
export function problems(dir) {
  const version = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).version;
  const found = [];
  const py = pyprojectVersion(readFileSync(join(dir, '..', 'pyproject.toml'), 'utf8'));
  if (py !== version) {
    found.push(`pyproject.toml's version is ${py}, package.json's ${version}: make them the same (one release)`);
  }
  const want = `asap-${version}-py3-none-any.whl`;
  const wheels = existsSync(join(dir, 'wheels')) ? readdirSync(join(dir, 'wheels')).filter((f) => f.endsWith('.whl')) : [];
  if (wheels.length !== 1 || wheels[0] !== want) {
    found.push(`wheels/ must hold exactly ${want}, it holds [${wheels.join(', ')}]: run \`make vsix\` at the repository root`);
  }
  if (!existsSync(join(dir, '..', 'LICENSE'))) found.push('no LICENSE at the repository root');
  return found;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.cwd();
  const found = problems(dir);
  if (found.length > 0) {
    for (const p of found) console.error(`package: ${p}`);
    process.exit(1);
  }
  copyFileSync(join(dir, '..', 'LICENSE'), join(dir, 'LICENSE'));
}
