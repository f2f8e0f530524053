#!/usr/bin/env python
"""Write the legacy -> PIR conversion goldens with a live PaddlePaddle 3.3.1.

Run it with Paddle's interpreter from anywhere::

    /work/main/.paddle-venv/bin/python testdata/convert/gen_to_pir.py

It re-executes itself with ``PYTHONHASHSEED=0``, PIR on (``FLAGS_enable_pir_api``
unset) and an absolute script path. Then, for every legacy golden program
(``testdata/models/*/forward.pb`` and ``backward.pb``, every ``.pb`` of the
``testdata/programs/`` cases that hold a ``conditional_block`` or ``while`` op,
the ``.pdmodel`` files of ``testdata/paddle_files/``), it runs Paddle's program
translator (``paddle.pir.translate_to_pir(desc)``) and writes what Paddle
serializes (``core.serialize_pir_program(prog, path, True, False, True)``:
compact, trainable) as ``to_pir/<group>/<case>/<file stem>.json``.

``to_pir/manifest.json`` lists every program tried: its source, and either the
op count of the translation or why Paddle refused it (the exception's first
line, or "process aborted" when Paddle crashed the worker process: those are
re-run one per process so one crash costs only that case). Paddle is the oracle
only: pybackward never imports it. The output is deterministic (PIR files carry
no call stacks); the script ends with a sha256 over what it wrote.
"""
from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if (os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api", "1") not in ("1", "true", "True")
        or (sys.argv[0] != _SCRIPT and "--worker" not in sys.argv)):
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("FLAGS_enable_pir_api", None)
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

os.environ.setdefault("GLOG_v", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(_SCRIPT).parent
ROOT = HERE.parent.parent
TESTDATA = ROOT / "testdata"
OUT = HERE / "to_pir"
CONTROL_FLOW = (b"conditional_block", b"\x1a\x05while")   # op type strings in a ProgramDesc


def cases() -> list[tuple[str, Path]]:
    """(golden name, source file) for every legacy program to translate, sorted."""
    found: list[tuple[str, Path]] = []
    for d in sorted((TESTDATA / "models").iterdir()):
        for stem in ("forward", "backward"):
            p = d / f"{stem}.pb"
            if p.is_file():
                found.append((f"models/{d.name}/{stem}", p))
    for d in sorted((TESTDATA / "programs").iterdir()):
        pbs = sorted(d.glob("*.pb")) if d.is_dir() else []
        pbs = [p for p in pbs if p.name != "startup.pb"]
        if any(any(m in p.read_bytes() for m in CONTROL_FLOW) for p in pbs):
            found += [(f"programs/{d.name}/{p.stem}", p) for p in pbs]
    for p in sorted((TESTDATA / "paddle_files").rglob("*.pdmodel")):
        found.append((f"paddle_files/{p.parent.name}/{p.stem}", p))
    return found


def worker(names: list[str]) -> None:
    """Translate each case; print one JSON line per case as it is done (the parent
    learns which case crashed the process from the last line it saw)."""
    import warnings
    warnings.filterwarnings("ignore")
    import paddle
    from paddle.base import core
    paddle.enable_static()
    todo = dict(cases())
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        src = todo[name]
        out = OUT / f"{name}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            desc = core.ProgramDesc(src.read_bytes())
            prog = paddle.pir.translate_to_pir(desc)
            core.serialize_pir_program(prog, str(out), True, False, True)
            n = sum(1 for _ in _walk(prog.global_block()))
            rec = {"done": name, "ops": n}
        except Exception as e:      # Paddle refused: record why
            msg = str(e).strip().splitlines()
            line = next((x.strip() for x in msg if x.strip() and not x.startswith("-")), type(e).__name__)
            for x in msg:
                if "Error" in x and "]" in x:
                    line = x.strip()
                    break
            rec = {"refused": name, "why": f"{type(e).__name__}: {line}"[:300]}
        print(json.dumps(rec), flush=True)


def _walk(block):
    """Every op of the block and of the blocks nested in its ops."""
    for op in block.ops:
        yield op
        for b in op.blocks():
            yield from _walk(b)


def run(names: list[str], manifest: dict) -> None:
    """Run a worker over `names`; a crash marks the running case and resumes after it."""
    while names:
        proc = subprocess.run([sys.executable, _SCRIPT, "--worker", *names], capture_output=True, text=True,
                              env=dict(os.environ, PYTHONHASHSEED="0"))
        started = None
        for line in proc.stdout.splitlines():
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            elif "done" in rec:
                manifest[rec["done"]].update(status="translated", ops=rec["ops"])
                started = None
            elif "refused" in rec:
                manifest[rec["refused"]].update(status="refused", why=rec["why"])
                started = None
        if started is None:
            if proc.returncode != 0:
                raise SystemExit(f"worker failed before any case:\n{proc.stderr[-2000:]}")
            return
        err = [x for x in proc.stderr.splitlines() if x.strip()]
        manifest[started].update(status="refused", why="process aborted: " + (err[-1][:240] if err else
                                                                               f"exit {proc.returncode}"))
        (OUT / f"{started}.json").unlink(missing_ok=True)
        names = names[names.index(started) + 1:]


def main() -> None:
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1:])
        return
    import paddle
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    found = cases()
    manifest = {"_generated_by": "testdata/convert/gen_to_pir.py", "paddle": paddle.__version__,
                "paddle_commit": paddle.version.commit,
                "how": "paddle.pir.translate_to_pir(core.ProgramDesc(bytes)); "
                       "core.serialize_pir_program(prog, path, True, False, True)",
                "cases": {n: {"source": str(p.relative_to(ROOT))} for n, p in found}}
    run([n for n, _ in found], manifest["cases"])
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    h = hashlib.sha256()
    files = sorted(p for p in OUT.rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(OUT)).encode() + b"\0" + p.read_bytes())
    ok = sum(1 for c in manifest["cases"].values() if c.get("status") == "translated")
    print(f"{len(found)} programs: {ok} translated, {len(found) - ok} refused; {len(files)} files, "
          f"sha256 {h.hexdigest()}")


if __name__ == "__main__":
    main()
