#!/usr/bin/env python3
"""Fetch the outside data sets the tests and benchmarks read (README.md, "Test data").

    python .ci/fetch_data.py [DEST]          # DEST defaults to ../shared/data beside the clone
    python .ci/fetch_data.py DEST --from DIR # DIR holds clones already (DIR/<owner>+<name>/repo or DIR/<name>)

Clones three public repositories at pinned commits (git, shallow), picks the same files, rows
and tests the project uses, writes them in the layout the tests expect, and checks the SHA-256
of every file against ``.ci/data.json`` (the Cedar corpus by its members, since a tarball's own
bytes depend on the tool that packed it). It only writes inside DEST, and refuses a DEST that
holds files it would not write. About 3 MB once done; the clones (about 60 MB) are temporary.

Sources (licences in each repository): alexeyignatiev/mbd-mobs (MIT): the ISCAS-85 netlists,
99 of its 144 diagnosis instances, the paper's published results; Yale-LILY/FOLIO (CC BY-SA
4.0): 104 examples of data/v0.0/folio-validation.jsonl; cedar-policy/cedar-integration-tests
(Apache-2.0): the handwritten tests and sample data, 1,000 of the corpus tests.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCES = {  # name: (GitHub repository, pinned commit)
    "mbd-mobs": ("alexeyignatiev/mbd-mobs", "20aee8de147387f61d48777c3949e2ab00aa954e"),
    "folio": ("Yale-LILY/FOLIO", "5d7bb84c7edab3fb358e057d2807f19cf5cf5e2d"),
    "cedar": ("cedar-policy/cedar-integration-tests", "f161e9f858a05134aeb74d5e13c91d85bc8c320d"),
}


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _clone(name: str, work: Path, local: Path | None) -> Path:
    """A checkout of the source at its pinned commit (from ``local`` clones when given)."""
    repo, commit = SOURCES[name]
    if local is not None:
        for candidate in (local / repo.replace("/", "+") / "repo", local / repo.split("/")[1], local / name):
            if candidate.exists():
                origin = str(candidate)
                break
        else:
            raise SystemExit(f"fetch_data: no clone of {repo} under {local}")
    else:
        origin = f"https://github.com/{repo}.git"
    target = work / name
    _git("init", "-q", str(target))
    try:
        _git("-c", "protocol.file.allow=always", "fetch", "-q", "--depth", "1", origin, commit, cwd=target)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"fetch_data: cannot fetch {repo} at {commit} from {origin}: {exc.stderr.strip()}") from None
    _git("-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD", cwd=target)
    return target


def _members_digest(tar: tarfile.TarFile) -> str:
    files = sorted((m.name, hashlib.sha256(tar.extractfile(m).read()).hexdigest())  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isfile())
    return hashlib.sha256("".join(f"{n} {h}\n" for n, h in files).encode()).hexdigest()


def build(dest: Path, local: Path | None) -> None:
    spec = json.loads((HERE / "data.json").read_text(encoding="utf-8"))
    expected: dict[str, str] = spec["sha256"]
    if dest.exists():
        foreign = [p for p in dest.rglob("*") if p.is_file() and str(p.relative_to(dest)) not in expected
                   and p.relative_to(dest).as_posix() not in ("cedar/corpus-dev.tar.gz", "README.md")]
        if foreign:
            raise SystemExit(f"fetch_data: {dest} holds files this script does not write (e.g. {foreign[0]}): "
                             "give an empty or missing folder")
    with tempfile.TemporaryDirectory(prefix="cda-data-") as tmp:
        work = Path(tmp)
        out = work / "data"
        mobs, folio, cedar = (_clone(n, work, local) for n in ("mbd-mobs", "folio", "cedar"))
        (out / "iscas85").mkdir(parents=True)
        for bench in sorted((mobs / "experiment" / "orig-circuits").glob("*.bench")):
            shutil.copy(bench, out / "iscas85" / bench.name)
        for rel in spec["mbd_mobs"]:
            (out / "mbd-mobs" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(mobs / "experiment" / "iscas85-mobs" / rel, out / "mbd-mobs" / rel)
        (out / "mbd-mobs" / "published-results").mkdir()
        for name in ("hsd.json", "dc.json", "dcstar.json"):
            shutil.copy(mobs / "experiment" / "results" / name, out / "mbd-mobs" / "published-results" / name)
        rows = [json.loads(line) for line in (folio / "data" / "v0.0" / "folio-validation.jsonl")
                .read_text(encoding="utf-8").splitlines() if line.strip()]
        (out / "folio").mkdir()
        keys = ("premises", "premises-FOL", "conclusion", "conclusion-FOL", "label")
        (out / "folio" / "folio-v0.0-validation-dev.jsonl").write_text(
            "".join(json.dumps({k: rows[i][k] for k in keys}, ensure_ascii=False) + "\n"
                    for i in spec["folio_validation_lines"]), encoding="utf-8")
        (out / "cedar").mkdir()
        for folder in ("tests", "sample-data"):
            shutil.copytree(cedar / folder, out / "cedar" / folder)
        shutil.copy(cedar / "LICENSE", out / "cedar" / "LICENSE")
        wanted = set(spec["cedar_corpus_tests"])
        with tarfile.open(cedar / "corpus-tests.tar.gz") as source, \
                tarfile.open(out / "cedar" / "corpus-dev.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as target:
            for member in sorted(source.getmembers(), key=lambda m: m.name):
                stem = member.name.rpartition("/")[2].split(".")[0]
                if member.isfile() and stem in wanted:
                    data = source.extractfile(member).read()  # type: ignore[union-attr]
                    info = tarfile.TarInfo(member.name)
                    info.size, info.mode, info.mtime = len(data), 0o644, 0
                    target.addfile(info, io.BytesIO(data))
        problems = []
        for rel, digest in sorted(expected.items()):
            path = out / rel
            if not path.is_file():
                problems.append(f"{rel}: not built")
            elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                problems.append(f"{rel}: not the bytes the tests were written against")
        with tarfile.open(out / "cedar" / "corpus-dev.tar.gz") as tar:
            if _members_digest(tar) != spec["cedar_corpus_members_sha256"]:
                problems.append("cedar/corpus-dev.tar.gz: not the 1,000 corpus tests the tests were written against")
        extra = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()
                 and str(p.relative_to(out)) not in expected and p.name != "corpus-dev.tar.gz"]
        problems += [f"{rel}: built but not expected" for rel in extra]
        if problems:
            raise SystemExit("fetch_data: " + "; ".join(problems[:10]))
        for path in sorted(out.rglob("*")):
            if path.is_file():
                target_path = dest / path.relative_to(out)
                target_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target_path)
    print(f"fetch_data: {len(expected) + 1} files in {dest}, each checked")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dest", nargs="?", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--from", dest="local", type=Path, default=None, help="a folder of clones already made")
    args = parser.parse_args()
    build(args.dest.resolve(), args.local)
    return 0


if __name__ == "__main__":
    sys.exit(main())
