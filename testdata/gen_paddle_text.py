"""Record what Paddle 3.3.1 prints for golden programs: `print(program)`.

For each `programs/<case>/{startup,forward,backward}.pb` this parses the file with
`paddle.static.Program.parse_from_string` (legacy IR) and writes `str(program)`
- what `print(program)` shows, `Program._to_readable_code()` - to
`paddle_text/<case>/<file>.txt`. `tests/views/test_paddle_text.py` compares
`pybackward show --format paddle` with these files, without Paddle.

    FLAGS_enable_pir_api=0 /path/to/paddle/venv/bin/python testdata/gen_paddle_text.py [CASE...]

Deterministic: `op_callstack` (the only attr holding paths) is not printed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
OUT = HERE / "paddle_text"
FILES = ("startup.pb", "forward.pb", "backward.pb")


def main(cases: list[str]) -> None:
    if os.environ.get("FLAGS_enable_pir_api") != "0":
        os.environ["FLAGS_enable_pir_api"] = "0"
        os.execv(sys.executable, [sys.executable, str(Path(__file__).resolve()), *cases])
    import paddle
    paddle.enable_static()
    cases = cases or sorted(p.name for p in PROGRAMS.iterdir() if (p / "forward.pb").exists())
    for case in cases:
        for name in FILES:
            src = PROGRAMS / case / name
            if not src.exists():
                continue
            prog = paddle.static.Program.parse_from_string(src.read_bytes())
            dst = OUT / case / (Path(name).stem + ".txt")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(str(prog))
            print(f"wrote {dst.relative_to(HERE)}")


if __name__ == "__main__":
    main(sys.argv[1:])
