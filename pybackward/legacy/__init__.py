"""The legacy IR: Paddle's protobuf `ProgramDesc` (`.pdmodel`, `__model__`, `.pb`, `.pbtxt`).

`program` (Program -> Block -> Operator / Variable, thin views over the
generated descs, with name indexes built once), `wire` (parsing and the
structural checks of the wire form), `validate` (what a loaded program must
satisfy), `text` (the readable listing), `io` (load / save, binary or text,
atomic), `names` (Paddle's grad var naming: `x@GRAD`, `@RENAME@`, `@EMPTY@`).
May import: `pybackward.base`, `pybackward._proto`, `pybackward.ops` (op facts).
"""
