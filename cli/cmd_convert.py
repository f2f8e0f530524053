"""`pybackward convert`: programs between binary and text format; arrays between .npz and Paddle's files."""
from __future__ import annotations

import json
import os

import click

import pybackward

from .common import array_output_files, handle_errors, refuse_outputs_over_inputs


@click.command()
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path())
@click.option("--program", "program", type=click.Path(dir_okay=False),
              help="For arrays: the program whose persistable vars a .pdiparams holds (default: the "
                   ".pdmodel beside it); writing a .pdiparams, its vars must be exactly these.")
@click.option("--json", "as_json", is_flag=True,
              help="Print what was written as JSON (arrays: name, dtype, shape; programs: blocks, ops, vars).")
@click.option("--no-restore", "no_restore", is_flag=True,
              help="Legacy -> PIR: Paddle's translation even of a program converted from PIR by pybackward "
                   "(which carries its PIR original, given back by default while the program is unedited).")
@handle_errors
def convert(src, dst, program, as_json, no_restore):
    """Convert SRC to DST (SRC told by content, DST by suffix).

    \b
    programs: binary (.pb, .pdmodel, ...) <-> protobuf text format (.pbtxt / .txt);
              PIR (.json) -> PIR, compact or indented (a DST ending in .readable.json or .txt)
    between the IRs (parameter files beside SRC are written beside DST):
              legacy -> PIR (DST .json): the program Paddle 3.3.1's translator makes,
                or, for a binary legacy program pybackward converted from PIR and
                nobody edited since, that PIR program itself (see --no-restore)
              PIR -> legacy (DST .pdmodel, .pb, .pbtxt, __model__)
    arrays:   .npz, .pdparams / .pdopt, .pdiparams, DIR/ (one file per var) -> any of these
    """
    from pybackward.base.suffixes import is_array_path   # (paddle_files imports NumPy: only for arrays)
    to_arrays = (is_array_path(dst) and not os.path.isdir(dst)) or dst.endswith(("/", os.sep))
    if is_array_path(src) or to_arrays:
        from pybackward.tensors import paddle_files
        prog = pybackward.load(program) if program else None
        arrays = paddle_files.load_arrays(src, prog)
        refuse_outputs_over_inputs(array_output_files(dst, arrays), [src] + ([program] if program else []),
                                   hint="give another DST")
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
    if no_restore and not dst.lower().endswith(".json"):
        raise pybackward.ArgumentError("--no-restore goes with legacy -> PIR (a DST ending in .json)")
    refuse_outputs_over_inputs([dst], [src], hint="give another DST")
    prog = pybackward.load(src)
    if isinstance(prog, pybackward.pir.Program):
        if _is_legacy_path(dst):
            _between_irs(prog, src, dst, as_json)
            return
        if no_restore:
            raise pybackward.ArgumentError("--no-restore goes with legacy -> PIR; SRC is a PIR program")
        _convert_pir(prog, src, dst, as_json)
        return
    if dst.lower().endswith(".json"):
        _between_irs(prog, src, dst, as_json, restore=not no_restore)
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
    readable = low.endswith((".readable.json", ".txt"))
    pir.save(prog, dst, readable=readable)
    if as_json:
        click.echo(json.dumps({"input": src, "output": dst, "kind": "pir program", "readable": readable,
                               "ops": prog.num_ops()}))
    else:
        click.echo(f"wrote {dst}")


def _is_legacy_path(path: str) -> bool:
    low = path.lower()
    return low.endswith((".pb", ".pbtxt", ".pdmodel", ".prototxt")) or os.path.basename(low) == "__model__"


#: Parameter files carried across with a program: (suffix, format).
_PARAM_SUFFIXES = (".pdiparams", ".pdparams", ".pdopt")


def _stem(path: str) -> str:
    low = path.lower()
    for suffix in (".readable.json", ".json", ".pdmodel", ".pbtxt", ".prototxt", ".pb"):
        if low.endswith(suffix):
            return path[:-len(suffix)]
    return path


def _between_irs(prog, src: str, dst: str, as_json: bool, restore: bool = True) -> None:
    """Legacy -> PIR (`convert.to_pir`, as Paddle's translator) or PIR -> legacy
    (`convert.to_legacy`), with the parameter files beside SRC carried beside DST.

    Everything is read and converted before anything is written, so a refusal
    (one line naming the op with no counterpart and the count of such ops)
    leaves no output. A `.pdiparams` is re-written in the order the other
    format's loader reads (both IRs: sorted by name; the PIR file holds only
    the program's `builtin.parameter` values); `.pdparams` / `.pdopt` (pickle
    dicts keyed by name) are copied as they are.

    A legacy program carrying the PIR record `to_legacy` writes gives back the
    recorded PIR program when it still fits (`convert.to_pir.recorded`), unless
    `restore` is off; the report says which (and why a record was not used).
    """
    from pybackward import pir
    from pybackward.tensors import paddle_files
    note, restored = "", None
    if isinstance(prog, pir.Program):
        from pybackward.convert.to_legacy import to_legacy
        out, kind = to_legacy(prog), "legacy program"
    else:
        from pybackward.convert.record import has_record
        from pybackward.convert.to_pir import recorded, to_pir
        kind = "pir program"
        found = recorded(prog) if restore and has_record(prog) else None
        if found is not None and found.program is not None:
            out, restored, note = found.program, True, "the PIR program recorded in it"
        else:
            out = to_pir(prog, restore=False)
            if found is not None:
                restored, note = False, f"Paddle's translation: {found.reason}"
    files: list[tuple[str, str, dict]] = []
    shared: set[str] = set()          # parameter files DST shares with SRC (left as they are)
    for suffix in _PARAM_SUFFIXES:
        beside = _stem(src) + suffix
        if not os.path.isfile(beside):
            continue
        arrays = paddle_files.load_arrays(beside, prog if suffix == ".pdiparams" else None)
        if suffix == ".pdiparams" and isinstance(out, pir.Program):
            keep = set(paddle_files.persistable_names(out))     # (read_combined checked they are all there)
            arrays = {n: a for n, a in arrays.items() if n in keep}
        target = _stem(dst) + suffix
        if os.path.exists(target) and os.path.samefile(target, beside):
            # DST's parameter file is SRC's (same stem, same directory): leave it when it would
            # come out the same; never replace the input with other contents
            if set(arrays) == set(paddle_files.load_arrays(beside, prog if suffix == ".pdiparams" else None)):
                shared.add(target)
                files.append((beside, target, arrays))
                continue
            raise pybackward.ArgumentError(f"{target}: is {src}'s parameter file, and {dst} needs another "
                                           f"set of arrays in it; nothing was written (give DST another name)")
        files.append((beside, target, arrays))
    if isinstance(out, pir.Program):
        pir.save(out, dst, readable=dst.lower().endswith(".readable.json"))
        ops = out.num_ops()
    else:
        pybackward.save(out, dst)
        ops = sum(len(b.ops) for b in out.blocks)
    for _, target, arrays in files:
        if target not in shared:
            paddle_files.save_arrays(target, arrays)
    if as_json:
        report = {"input": src, "output": dst, "kind": kind, "ops": ops,
                  "params": [{"input": a, "output": b, "arrays": len(c)} for a, b, c in files]}
        if restored is not None:
            report["restored"] = restored
            report["record"] = note
        click.echo(json.dumps(report))
    else:
        extra = "".join(f", {b} ({len(c)} arrays)" for _, b, c in files)
        click.echo(f"wrote {dst} ({kind}, {ops} ops{'; ' + note if note else ''}){extra}")
