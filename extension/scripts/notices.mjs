// Writes THIRD_PARTY_NOTICES.md for the VSIX: the npm packages esbuild put into the bundles, each with its version,
// its declared licence and the text of its licence files. The MIT, ISC and BSD licences of the bundled code
// (vscode-languageclient, vega, d3, ...) ask that their notices go with every copy, and the bundles are copies.
//
//   node scripts/notices.mjs OUT.md META.json...     (run in the folder esbuild ran in: the metafile's paths are
//                                                     relative to it; `npm run package` passes --metafile)
//
// A package counts when one of its files has bytes in an output (tree-shaken files do not). A bundled package
// without a licence file stops the packaging: its notice cannot be shipped, and a human must look.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const LICENCE_FILE = /^(licen[cs]e|copying|notice)(\.|$|-)/i;

/** The package folders (e.g. `node_modules/a/node_modules/@s/b`) whose code is in the metafiles' outputs. */
export function bundledPackages(metafiles) {
  const dirs = new Set();
  for (const meta of metafiles) {
    for (const output of Object.values(meta.outputs ?? {})) {
      for (const [input, { bytesInOutput }] of Object.entries(output.inputs ?? {})) {
        const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input.replace(/\\/g, '/'));
        if (m && bytesInOutput > 0) dirs.add(m[1]);
      }
    }
  }
  return [...dirs];
}

/** The notices as Markdown; throws naming every bundled package that has no licence file. */
export function notices(metafiles, cwd = process.cwd()) {
  const entries = new Map();
  const missing = [];
  for (const dir of bundledPackages(metafiles)) {
    const pkg = JSON.parse(readFileSync(join(cwd, dir, 'package.json'), 'utf8'));
    const files = readdirSync(join(cwd, dir)).filter((f) => LICENCE_FILE.test(f)).sort();
    if (files.length === 0) missing.push(`${pkg.name}@${pkg.version} (${dir})`);
    const texts = files.map((f) => readFileSync(join(cwd, dir, f), 'utf8').trim());
    // one entry per name and version: a package nested twice is one notice
    entries.set(`${pkg.name}@${pkg.version}`, { pkg, texts });
  }
  if (missing.length > 0) throw new Error(`bundled packages without a licence file: ${missing.join(', ')}`);
  const out = [
    '# Third-party notices',
    '',
    "The extension's scripts (dist/extension.js, dist/roofline.js) bundle the following npm packages, each under",
    'its own licence, reproduced here. Generated from the bundles by scripts/notices.mjs.',
  ];
  for (const [id, { pkg, texts }] of [...entries].sort(([a], [b]) => a.localeCompare(b))) {
    const licence = typeof pkg.license === 'string' ? pkg.license : (pkg.license?.type ?? 'see the text');
    out.push('', `## ${id}`, '', `Licence: ${licence}`);
    for (const text of texts) {
      const fence = '`'.repeat(Math.max(3, ...[...text.matchAll(/`+/g)].map((m) => m[0].length + 1)));
      out.push('', fence, text, fence);
    }
  }
  return out.join('\n') + '\n';
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [outFile, ...metaPaths] = process.argv.slice(2);
  if (!outFile || metaPaths.length === 0 || metaPaths.some((p) => !existsSync(p))) {
    console.error('usage: node scripts/notices.mjs OUT.md META.json... (esbuild --metafile outputs)');
    process.exit(2);
  }
  try {
    const text = notices(metaPaths.map((p) => JSON.parse(readFileSync(p, 'utf8'))));
    writeFileSync(outFile, text);
    console.error(`${outFile}: ${(text.match(/^## /gm) ?? []).length} packages`);
  } catch (e) {
    console.error(`notices: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  }
}
