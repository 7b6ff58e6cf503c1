"""`asap` command line: the same analysis as the editor, for terminals and CI.

    asap check CONFIG.yml [CONFIG.yml ...] [--json] [--slice v5e-256]

Exit status: 0 when no config has an error, 1 when any has, 2 for usage errors
(a file that cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from server.analysis import Analysis, analyze
from server.perf.findings import Severity


def _human(an: Analysis) -> str:
    out = []
    chk = an.check
    rel = an.path
    if not an.config.is_maxtext:
        return f"{rel}: not a MaxText config (no MaxText keys); nothing to check"
    for f in an.findings:
        where = f.file or an.path
        out.append(f"{where}:{f.span.line + 1}:{f.span.column + 1}: {f.severity.label} {f.code}: {f.message}")
        out.extend(f"    fix: {fx.title}" for fx in f.fixes)
    if chk.slice is not None:
        mesh = {d.axis.name: d.degree for d in chk.ici if d.degree != 1}
        dcn = {d.axis.name: d.degree for d in chk.dcn if d.degree != 1}
        parts = [f"{rel}: slice {chk.slice.describe()} from {chk.slice_source}"]
        if chk.resolved:
            parts.append("ICI " + (" x ".join(f"{k}={v}" for k, v in mesh.items()) or "all 1"))
            if dcn:
                parts.append("DCN " + " x ".join(f"{k}={v}" for k, v in dcn.items()))
        out.append("; ".join(parts))
    errors = sum(f.severity == Severity.ERROR for f in an.findings)
    warnings = sum(f.severity == Severity.WARNING for f in an.findings)
    out.append(f"{rel}: {errors} error(s), {warnings} warning(s)")
    return "\n".join(out)


def cmd_check(args: argparse.Namespace) -> int:
    results = []
    for name in args.configs:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            print(f"asap: cannot read {name}: {e.strerror}", file=sys.stderr)
            return 2
        results.append(analyze(path, text, default_slice=args.slice))
    if args.json:
        payload: object = results[0].to_json() if len(results) == 1 else [r.to_json() for r in results]
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(_human(r) for r in results))
    failed = any(f.severity == Severity.ERROR for r in results for f in r.findings)
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="asap", description="ASAP: performance advisor for MaxText configs on TPU")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate the sharding mesh of MaxText configs for their TPU slice")
    c.add_argument("configs", nargs="+", metavar="CONFIG.yml")
    c.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    c.add_argument("--slice", metavar="NAME", help="slice to assume when a config declares none (e.g. v5e-256)")
    c.set_defaults(func=cmd_check)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def run() -> None:
    """Console-script entry point."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `asap check ... | head`
        sys.stderr.close()
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    run()
