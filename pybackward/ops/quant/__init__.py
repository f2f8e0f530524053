"""Quantization: fake quantize / dequantize for QAT, weight_quantize, lookup_table_dequant.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `fake_quant`, `weight_quant`.
"""
