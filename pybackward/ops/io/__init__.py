"""File ops: save / load (Paddle's tensor format), read_file, faster_tokenizer.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `file_io`, `read_file_and_tokenizer`.
"""
