"""PIR format versions: which ones pybackward reads, and how files of versions 1-3 become 4.

Paddle numbers its PIR format separately from its releases; 3.3.1 writes
version 4. Each version's changes to op signatures are a patch set in
Paddle's source (`paddle/fluid/pir/serialize_deserialize/patch/N.yaml`),
compiled into `libpaddle.so`; reading a file of version v, Paddle 3.3.1
applies the sets v..4 (the file's own version included) to the JSON before
it builds ops. `PATCHES` below is those sets as data, taken from the 3.3.1
binary and checked against what 3.3.1 writes after loading such a file
(testdata/pir/v*_*.upgraded.json).

What pybackward does differently from Paddle:
* version 0 (develop builds) and versions above 4 are refused, each with one
  line; Paddle fails on 0 with `map::at` and reads newer files silently;
* `moe_unpermute`'s patch 4 adds `using_ue8m0_scale`, which 3.3.1's op does
  not declare: Paddle adds it while reading and drops it when writing, so
  that action is left out here (the upgraded program is what Paddle writes).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..base.errors import ProgramFileError

#: The format version pybackward writes (Paddle 3.3.1's).
CURRENT = 4
OLDEST = 1

# Actions: ("retag", attr, new tag) changes a scalar attribute's tag, or every
# element's tag when the attribute is an array, keeping the data; ("add", attr,
# tag, default) adds an attribute the older op lacked (kept if already there).
I64 = "0.a_i64"
F64 = "0.a_f64"
PATCHES: dict[int, dict[str, list[tuple]]] = {
    2: {  # int32 -> int64 pool strides / paddings / kernel sizes and expand_as's target shape
        "pd_op.lp_pool2d": [("retag", "strides", I64), ("retag", "paddings", I64)],
        "pd_op.pool2d": [("retag", "strides", I64), ("retag", "paddings", I64)],
        "pd_op.pool3d": [("retag", "kernel_size", I64), ("retag", "strides", I64), ("retag", "paddings", I64)],
        "pd_op.expand_as": [("retag", "target_shape", I64)],
    },
    3: {  # kthvalue's k becomes int64; repeat_interleave gains output_size
        "pd_op.kthvalue": [("retag", "k", I64)],
        "pd_op.repeat_interleave": [("add", "output_size", I64, -1)],
        "pd_op.repeat_interleave_with_tensor_index": [("add", "output_size", I64, -1)],
    },
    4: {  # float attributes become double; top_p_sampling's seed int64; new MoE flags
        "pd_op.leaky_relu": [("retag", "negative_slope", F64)],
        "pd_op.softplus": [("retag", "beta", F64), ("retag", "threshold", F64)],
        "pd_op.logit": [("retag", "eps", F64)],
        "pd_op.pad3d": [("retag", "pad_value", F64)],
        "pd_op.group_norm": [("retag", "epsilon", F64)],
        "pd_op.add_group_norm_silu": [("retag", "epsilon", F64)],
        "pd_op.group_norm_silu_xpu": [("retag", "epsilon", F64)],
        "pd_op.top_p_sampling": [("retag", "seed", I64)],
        "pd_op.bicubic_interp": [("retag", "scale", F64)],
        "pd_op.nearest_interp": [("retag", "scale", F64)],
        "pd_op.linear_interp": [("retag", "scale", F64)],
        "pd_op.bilinear_interp": [("retag", "scale", F64)],
        "pd_op.trilinear_interp": [("retag", "scale", F64)],
        "pd_op.moe_permute": [("add", "using_ue8m0_scale", "0.a_bool", False),
                              ("add", "return_expert_indices", "0.a_bool", False),
                              ("add", "override_buffer_size", "0.a_i32", -1)],
        "pd_op.moe_unpermute": [("add", "using_weighted_combine", "0.a_bool", False)],
        # (onednn_op.fused_softplus is patched too, but its dialect has no id: no file can hold it)
    },
}
_ID = {"builtin": "0", "pd_op": "1", "cf": "2"}


def check_version(version: int, loc: str) -> None:
    """Refuse what pybackward cannot read, with one line."""
    if version == 0:
        raise ProgramFileError(f"{loc}: PIR format version 0 is a Paddle develop build's (no release writes it); "
                               f"pybackward reads versions {OLDEST}-{CURRENT}")
    if version > CURRENT:
        raise ProgramFileError(f"{loc}: PIR format version {version} is newer than the newest pybackward reads "
                               f"({CURRENT}, Paddle 3.3.1's): refusing to guess at the newer ops' signatures")
    if version < 0:
        raise ProgramFileError(f"{loc}: PIR format version {version} is negative")


def patches_for(version: int) -> dict[str, list[tuple]]:
    """The actions Paddle 3.3.1 applies to a file of `version`, per compressed op name ("1.pool2d")."""
    merged: dict[str, list[tuple]] = {}
    for v in range(version, CURRENT + 1):
        for op, actions in PATCHES.get(v, {}).items():
            dialect, name = op.split(".", 1)
            merged.setdefault(f"{_ID[dialect]}.{name}", []).extend(actions)
    return merged


def upgrade(program_json: Any, version: int, loc: str) -> int:
    """Apply the patch sets for a file of `version` to its 'program' JSON, in place.
    Returns how many ops were changed. Malformed parts are left for the reader to refuse."""
    patches = patches_for(version)
    changed = 0
    for op in _ops(program_json):
        actions = patches.get(op.get("#"))
        if actions and isinstance(op.get("A"), list):
            _apply(op["A"], actions)
            changed += 1
    return changed


def _apply(attrs: list, actions: list[tuple]) -> None:
    by_name = {a.get("N"): a for a in attrs if isinstance(a, dict)}
    for action in actions:
        if action[0] == "retag":
            _, name, tag = action
            entry = by_name.get(name)
            at = entry.get("AT") if isinstance(entry, dict) else None
            if not isinstance(at, dict):
                continue
            if at.get("#") == "0.a_array" and isinstance(at.get("D"), list):
                for e in at["D"]:
                    if isinstance(e, dict):
                        e["#"] = tag
            else:
                at["#"] = tag
        else:
            _, name, tag, default = action
            if name not in by_name:
                entry = {"AT": {"#": tag, "D": default}, "N": name}
                attrs.append(entry)
                by_name[name] = entry


def _ops(program_json: Any) -> Iterator[dict]:
    """Every op object in the program JSON, nested ones included (no recursion;
    anything not shaped like a program is skipped)."""
    stack: list[Any] = [program_json]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        for region in node.get("regions", ()) if isinstance(node.get("regions"), list) else ():
            blocks = region.get("blocks") if isinstance(region, dict) else None
            for block in blocks if isinstance(blocks, list) else ():
                ops = block.get("ops") if isinstance(block, dict) else None
                for op in ops if isinstance(ops, list) else ():
                    if isinstance(op, dict):
                        yield op
                        stack.append(op)
