"""Paddle's tensor files: the values a program's vars hold, read and written.

`safe_pickle` (a pickle reader that runs no code from the file) on
`pickle_machine` (pickle opcodes run in time linear in the file and memory
bounded by it), `tensor_format` (Paddle's binary tensor record, as
`save_combine` writes it), `npz_format` (`.npz` / `.npy`, sizes checked
before they are read), `paddle_files` (`.pdparams` / `.pdopt` /
`.pdiparams`, per-var files, `.npz`).
May import: `pybackward.base`, `pybackward.legacy` (the program names the values).
"""
