"""`pybackward convert`: programs between binary and text format; arrays between .npz and Paddle's files."""
from __future__ import annotations

import json
import os

import click

import pybackward

from .common import handle_errors


@click.command()
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path())
@click.option("--program", "program", type=click.Path(dir_okay=False),
              help="For arrays: the program whose persistable vars a .pdiparams holds (default: the "
                   ".pdmodel beside it); writing a .pdiparams, its vars must be exactly these.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was written as JSON (arrays: name, dtype, shape; programs: blocks, ops, vars).")
@handle_errors
def convert(src, dst, program, as_json):
    """Convert SRC to DST, each format told by its suffix.

    \b
    programs: binary (.pb, .pdmodel, ...) <-> protobuf text format (.pbtxt / .txt);
              PIR (.json) -> PIR, compact or indented (a DST ending in .readable.json or .txt)
    arrays:   .npz, .pdparams / .pdopt, .pdiparams, DIR/ (one file per var) -> any of these
    """
    from pybackward.tensors import paddle_files
    to_arrays = (paddle_files.is_array_path(dst) and not os.path.isdir(dst)) or dst.endswith(("/", os.sep))
    if paddle_files.is_array_path(src) or to_arrays:
        prog = pybackward.load(program) if program else None
        arrays = paddle_files.load_arrays(src, prog)
        paddle_files.save_arrays(dst, arrays, prog)
        if as_json:
            click.echo(json.dumps({"input": src, "output": dst, "kind": "arrays",
                                   "arrays": {n: {"dtype": str(a.dtype), "shape": list(a.shape)}
                                              for n, a in arrays.items()}}))
        else:
            click.echo(f"wrote {dst} ({len(arrays)} arrays)")
        return
    if program:
        raise pybackward.ArgumentError("--program goes with array files (.npz, .pdparams, .pdiparams, DIR/)")
    prog = pybackward.load(src)
    if isinstance(prog, pybackward.pir.Program):
        _convert_pir(prog, src, dst, as_json)
        return
    pybackward.save(prog, dst)
    if as_json:
        click.echo(json.dumps({"input": src, "output": dst, "kind": "program", "blocks": prog.num_blocks,
                               "ops": sum(len(b.ops) for b in prog.blocks),
                               "vars": sum(len(b.vars) for b in prog.blocks)}))
    else:
        click.echo(f"wrote {dst}")


def _convert_pir(prog, src: str, dst: str, as_json: bool) -> None:
    """A PIR program rewritten as PIR: compact JSON, or Paddle's readable=True form for a
    `.readable.json` / `.txt` DST. Between the IRs, see `docs/pir.md` (issue #34)."""
    from pybackward import pir
    low = dst.lower()
    if low.endswith((".pb", ".pbtxt", ".pdmodel", ".prototxt")) or os.path.basename(low) == "__model__":
        raise pybackward.ArgumentError(f"{src}: is a PIR program; converting it to a legacy ProgramDesc "
                                       f"({dst}) is not supported yet: write a .json")
    readable = low.endswith((".readable.json", ".txt"))
    pir.save(prog, dst, readable=readable)
    if as_json:
        click.echo(json.dumps({"input": src, "output": dst, "kind": "pir program", "readable": readable,
                               "ops": prog.num_ops()}))
    else:
        click.echo(f"wrote {dst}")
