"""Converting programs between the two IRs: legacy ProgramDesc -> PIR (`to_pir`), as
Paddle's program translator does, and PIR -> legacy (`to_legacy`), which Paddle cannot.
A legacy program `to_legacy` writes carries its PIR original (`record`: a field Paddle
ignores), which `to_pir` gives back while the legacy program is unedited.

Sits over both IRs (`legacy`, `pir`), the op tables (`ops`, `pybackward.pir.opmap`) and
the tensor files (`tensors`, for carrying parameters across); imported by the API layer
(`formats`, the CLI's `convert`). Never imports the passes or the interpreter.
"""
