"""The everyday path through `append --run` and `run`: the values found
beside the program, the loss when none is named, and the checks before a run
whose errors say what to pass."""
from __future__ import annotations

import difflib
from pathlib import Path

import pybackward
from pybackward.program_summary import needed_inputs

#: What --params takes, for messages.
PARAMS_FORMATS = ".npz, .pdparams, .pdiparams or a directory of per-var files"


def values_beside(src: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The parameter and feed files `append --run`, `run` and `check` use when none is given:
    params.npz (else IN's own .pdparams, else .pdiparams, as paddle.static.save /
    save_inference_model name them) and feeds.npz in IN's directory."""
    here = Path(src).parent
    params: tuple[str, ...] = ()
    for cand in (here / "params.npz", Path(src).with_suffix(".pdparams"), Path(src).with_suffix(".pdiparams")):
        if cand.is_file() and cand != Path(src):
            params = (str(cand),)
            break
    feeds = (str(here / "feeds.npz"),) if (here / "feeds.npz").is_file() else ()
    return params, feeds


def beside_hint(src: str) -> str:
    stem = Path(src).with_suffix("").name
    return (f" (without --params and --feeds, pybackward reads params.npz or {stem}.pdparams or "
            f"{stem}.pdiparams, and feeds.npz, beside {src})")


def with_values_beside(src: str, params, startup, feeds_npz, feed_items) -> tuple[tuple, tuple]:
    """(params, feeds_npz) for a run of SRC: the ones given, else those found
    beside it (`values_beside`): params only when neither --params nor
    --startup is given, feeds only when neither --feeds nor --feed is."""
    found_params, found_feeds = values_beside(src)
    if not params and not startup:
        params = found_params
    if not feeds_npz and not feed_items:
        feeds_npz = found_feeds
    return tuple(params), tuple(feeds_npz)


def resolve_loss(prog, loss: str | None) -> str:
    """--loss, or the program's only loss candidate (`pybackward.summary`)."""
    if loss:
        return loss
    cands = pybackward.summary(prog).losses
    where = prog.source or "the program"
    if len(cands) == 1:
        return cands[0].name
    if not cands:
        raise pybackward.ArgumentError(f"{where}: no --loss given and no loss candidate (a one-element float "
                                       "var that no op reads); give --loss NAME "
                                       "(`pybackward show --summary` lists feeds and outputs)")
    listed = ", ".join(f"{c.name} ({c.dtype}{c.shape}, from {c.op})" for c in cands)
    raise pybackward.ArgumentError(f"{where}: no --loss given and {len(cands)} loss candidates: {listed}; "
                                   "give --loss NAME")


def check_fetch(prog, fetch) -> None:
    """Every --fetch name is declared by some block (else: did you mean ...)."""
    declared: set[str] | None = None
    for name in fetch:
        if declared is None:
            declared = {n for b in prog.blocks for n in b.vars}
        if name not in declared:
            close = difflib.get_close_matches(name, sorted(declared), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise pybackward.ArgumentError(f"{prog.source or 'the program'}: block 0, var '{name}': cannot "
                                           f"fetch: no block declares a var by that name (--fetch){hint}")


def missing_inputs_error(prog, given, feeds, error: str, hint: str = ""):
    """When a run failed on a feed or persistable var nobody gave (the
    interpreter's `error` names it), an error listing every missing one with
    the options that give them; else None (the run's own error stands)."""
    need_feeds, need_state = needed_inputs(prog)
    miss_feeds = [v for v in need_feeds if v.name not in feeds and v.name not in given]
    miss_state = [v for v in need_state if v.name not in feeds and v.name not in given]
    if not any(f"var '{v.name}'" in error for v in miss_feeds + miss_state):
        return None
    parts = []
    if miss_state:
        what = "parameters" if all(v.is_parameter for v in miss_state) else "persistable vars"
        parts.append(f"{what} {_listing(miss_state)} - give --params FILE ({PARAMS_FORMATS}) "
                     "or --startup STARTUP.pb")
    if miss_feeds:
        parts.append(f"feeds {_listing(miss_feeds)} - give --feeds FEEDS.npz or --feed NAME=FILE.npy")
    first = error.split(": not fed,")[0]      # where the run stopped: file, block, op, var
    return pybackward.ArgumentError(f"{first}. Not given: " + "; ".join(parts) + hint)


def _listing(vs) -> str:
    shown = [f"{v.name} ({_type_text(v)})" for v in vs[:6]]
    return ", ".join(shown) + (f" and {len(vs) - 6} more" if len(vs) > 6 else "")


def _type_text(v) -> str:
    try:
        dt = v.dtype
    except pybackward.PyBackwardError:
        dt = None
    return f"{dt if dt is not None else '?'}{list(v.shape)}"
