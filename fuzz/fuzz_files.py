"""An atheris (libFuzzer) harness for pybackward's array-file readers: Paddle
pickles (.pdparams / .pdopt), .npz archives and Paddle tensor files.

    pip install atheris
    python fuzz/fuzz_files.py --make-seeds fuzz/corpus_files      # once
    python fuzz/fuzz_files.py fuzz/corpus_files -max_total_time=3600 -timeout=30 -rss_limit_mb=2048

Each input's first byte picks the kind (pickle, npz, tensor) and whether the
rest is the file itself (even) or drives `filefuzz`'s mutator of that kind
over a seed (odd; libFuzzer's coverage then steers the mutations). Reading
must give arrays or an ArrayFileError, within filefuzz.TIMEOUT seconds and
the memory the file's size bounds; anything else is a crash. Without
atheris, `python fuzz/fuzz_files.py --replay FILE...` runs inputs through
the same entry point.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import atheris
except ImportError:          # the test suite and --replay do not need it
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["pybackward", "filefuzz"]):
        import filefuzz
else:
    import filefuzz
from fuzz_program import BytesChooser  # noqa: E402


def one_input(data: bytes) -> None:
    if not data:
        return
    kind = filefuzz.KINDS[(data[0] >> 1) % len(filefuzz.KINDS)]
    rest = data[1:]
    seeds = filefuzz.seeds(kind)
    if data[0] & 1:
        ch = BytesChooser(rest)
        seed = filefuzz.choice(ch, seeds)
        mutated, _ = filefuzz.MUTATORS[kind](ch, seed.data)
    else:
        seed = seeds[len(rest) % len(seeds)]     # only its program is used
        mutated = rest
    filefuzz.exercise(kind, mutated, seed.program)


def seed_inputs() -> list[bytes]:
    """Every seed file as itself, and as the start of a mutation."""
    out = []
    for k, kind in enumerate(filefuzz.KINDS):
        for i, s in enumerate(filefuzz.seeds(kind)):
            out.append(bytes([2 * k]) + s.data)
            out.append(bytes([2 * k + 1, i]) + bytes(8))
    return out


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--make-seeds"]:
        d = Path(argv[2] if len(argv) > 2 else Path(__file__).parent / "corpus_files")
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(seed_inputs()):
            (d / f"seed_{i:03d}").write_bytes(data)
        print(f"wrote {len(seed_inputs())} seed inputs to {d}")
        return
    if argv[1:2] == ["--replay"]:
        for f in argv[2:]:
            print(f)
            one_input(Path(f).read_bytes())
        return
    if atheris is None:
        raise SystemExit("atheris is not installed: pip install atheris (or use --replay FILE...)")
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
