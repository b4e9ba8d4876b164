"""Text in, Trace or decoding steps out: the LabModel facade, load(), checkpoints, tokenizers.

Floors inside: ``types``, ``device`` and ``decoding`` at the bottom (the transformers
adapters in ``model.hf`` use them), then ``tokenizer``, ``lab``, ``checkpoint``, ``bundle``
and ``loading`` on top; ``kept`` (the lab's one byte-bounded cache, ``ByteLRU``) beside
them.
"""
