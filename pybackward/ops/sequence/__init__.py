"""LoD sequence ops of legacy NLP programs: sequence pooling / softmax / expand, sequence convolutions, LSTM / GRU, beam search, decoding, chunk_eval.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `beam_search`, `chunk_eval`, `conv`, `decoding`, `lstm_gru`, `sequence_mask`, `sequence_ops`.
"""
