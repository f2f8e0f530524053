"""The shared base every layer stands on: errors, dtypes, attribute codecs, op roles, file helpers.

`errors` (the exception hierarchy rooted at `PyBackwardError` and `where()`,
the one formatter of "file, block, op, var" locations), `dtypes` (Paddle's
VarType dtypes and NumPy's), `attrs` (typed op attributes), `op_roles`
(Paddle's OpRole bits and the attrs every op carries), `suffixes` (file
suffixes that say what a file is), `_gc` and `_args` (bulk-work and argument
helpers). Shared by both IRs.
May import: `pybackward._proto` (the enums of Paddle's schema) and the standard library.
"""
