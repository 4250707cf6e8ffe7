"""Does device evidence name the code it ran? Its source digest against a commit's, computed from a clean checkout.

    python tests/perf/device/provenance.py COMMIT results/device/<machine>/results.json [environment.json ...]

A run records `podbench_source_sha256`, the digest of podbench's own code as it was on the machine
(bench/harness/host.py ``source_digest``), and what git said there (the commit, a clean tree or its
diff's hash). The device tool runs a copy of the working tree, where git may say nothing: the digest is
what ties the figures to a commit. This prints, for each file, whether its digest is COMMIT's (exit 0 when
all are) and what it recorded.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from bench.harness import host  # noqa: E402


def commit_digest(commit: str) -> str:
    """The source digest of ``commit``'s tree, from a clean export of it."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, *host.SOURCE_DIRS], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        return host.source_digest(Path(tmp))


def recorded(path: Path) -> dict:
    """The provenance a results.json (its "provenance") or an environment.json records."""
    data = json.loads(path.read_text())
    return data.get("provenance", data)


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    want = commit_digest(args[0])
    ok = True
    for name in args[1:]:
        found = recorded(Path(name))
        same = found.get("podbench_source_sha256") == want
        ok &= same
        print(f"{name}: {'the code of' if same else 'NOT the code of'} {args[0][:12]} "
              f"(digest {str(found.get('podbench_source_sha256'))[:12]} against {want[:12]}); there: "
              f"{found.get('podbench_provenance')}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
