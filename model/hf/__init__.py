"""The transformers adapters: local Hugging Face folders read safely (``common``), BERT-layout
weights mapped into our encoder (``bert``), and everything else run by transformers itself
(``fallback``) behind LabModel's public surface."""
