"""A plain fast tokenizer read with the ``tokenizers`` library alone, the way transformers'
``PreTrainedTokenizerFast`` reads the same two files.

A converted GGUF folder (model.hf.gguf_tokenizer) holds tokenizer.json and a tokenizer_config.json
of a few plain keys. Importing transformers only to wrap that tokenizer was most of what was left
of a cached SmolLM2 load (~0.8 s of CPU on the 2-core machine), on the first page a visitor opens
after a start. This class answers what ``HFTokenizer`` asks of a transformers tokenizer with the
same results (tests/unit/test_gguf.py compares them id for id); the chat template alone is
rendered by transformers, imported when somebody first asks the model a question.
"""

from __future__ import annotations

from pathlib import Path

# transformers' name for "no limit" (VERY_LARGE_INTEGER), its model_max_length when the
# config names none; model.hf.decoder reads it as such.
NO_LIMIT = int(1e30)
# transformers' named special tokens, in its order (SPECIAL_TOKENS_ATTRIBUTES)
ROLES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")


class PlainFastTokenizer:
    """tokenizer.json plus a plain tokenizer_config.json (``config``: its keys, read already)
    that asks for no clean-up of decoded spaces (model.hf.common sends any other folder to
    AutoTokenizer)."""

    is_fast = True

    def __init__(self, tokenizer_file: Path, config: dict):
        from tokenizers import Tokenizer

        self.tokenizer_file = Path(tokenizer_file)
        self.config = dict(config)
        self.backend_tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.backend_tokenizer.no_truncation()  # truncated per call, never as shared state
        self.backend_tokenizer.no_padding()
        self.chat_template = config.get("chat_template")
        self.model_max_length = int(config.get("model_max_length", NO_LIMIT))
        for role in ROLES:
            token = config.get(f"{role}_token")
            setattr(self, f"{role}_token", token)
            token_id = None if token is None else self.backend_tokenizer.token_to_id(token)
            setattr(self, f"{role}_token_id", token_id)
        self.all_special_tokens = list(
            dict.fromkeys(t for t in (getattr(self, f"{r}_token") for r in ROLES) if t)
        )
        self._transformers_tokenizer = None

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    def get_vocab(self) -> dict[str, int]:
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self.backend_tokenizer.num_special_tokens_to_add(pair)

    def __call__(
        self,
        text: str,
        add_special_tokens: bool = True,
        truncation: bool = False,
        max_length: int | None = None,
        return_offsets_mapping: bool = False,
        verbose: bool = True,  # noqa: ARG002 - transformers' keyword: no warnings here anyway
    ) -> dict:
        """{"input_ids", "attention_mask"[, "offset_mapping"]} of one text. Truncation cuts
        the text's own tokens so that, with the specials added, ``max_length`` remain (as
        transformers' "longest_first" does for one sequence)."""
        encoding = self.backend_tokenizer.encode(text, add_special_tokens=False)
        if truncation and max_length is not None:
            specials = self.num_special_tokens_to_add(False) if add_special_tokens else 0
            encoding.truncate(max(max_length - specials, 0))
        encoding = self.backend_tokenizer.post_process(
            encoding, add_special_tokens=add_special_tokens
        )
        out = {"input_ids": list(encoding.ids), "attention_mask": list(encoding.attention_mask)}
        if return_offsets_mapping:
            out["offset_mapping"] = [tuple(o) for o in encoding.offsets]
        return out

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str | None]:
        return [self.backend_tokenizer.id_to_token(int(i)) for i in ids]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.backend_tokenizer.decode(
            [int(i) for i in ids], skip_special_tokens=skip_special_tokens
        )

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return self.backend_tokenizer.decoder.decode(list(tokens))

    def apply_chat_template(self, *args, **kwargs):
        """transformers' own rendering of the chat template (its sandbox, its helpers), on a
        transformers tokenizer built from the same files the first time it is asked for."""
        if self._transformers_tokenizer is None:
            from transformers import PreTrainedTokenizerFast

            kwargs_of_config = {
                k: v
                for k, v in self.config.items()
                if k not in ("tokenizer_class", "add_bos_token", "add_eos_token")
            }
            self._transformers_tokenizer = PreTrainedTokenizerFast(
                tokenizer_file=str(self.tokenizer_file), **kwargs_of_config
            )
        return self._transformers_tokenizer.apply_chat_template(*args, **kwargs)
