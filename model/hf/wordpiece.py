"""The shipped MiniLM's config and WordPiece tokenizer read without importing transformers.

Importing transformers for ``AutoConfig`` and ``AutoTokenizer`` took ~1.7 s of the 2.1 s a
first MiniLM load cost, on the first visit of every page that shows MiniLM. The shipped folder
is a known, plain BERT folder, so its ``config.json`` is read as JSON and its
``tokenizer.json`` by the ``tokenizers`` library (the Rust tokenizer transformers' own
"fast" BERT tokenizer runs). Folders a person loads still go through transformers
(model.hf.common), which knows every family's quirks; tests/unit/test_pretrained.py holds
this tokenizer equal to transformers' on the same files.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from model.hf.common import subword_style
from model.hf.pieces import display_pieces, style_of
from model.runtime.types import Encoded, ModelLoadError, read_json_object

# transformers' BertConfig defaults, for keys a config.json leaves out.
BERT_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "is_encoder_decoder": False,
    "add_cross_attention": False,
    "architectures": None,
}
SPECIAL_ROLES = ("unk", "sep", "pad", "cls", "mask", "bos", "eos")


def read_bert_config(folder: str | Path) -> SimpleNamespace:
    """A BERT folder's config.json with BertConfig's defaults filled in (model.hf.bert reads
    the same attributes from it as from a transformers config)."""
    data = read_json_object(Path(folder) / "config.json")
    if data.get("model_type") != "bert":
        raise ModelLoadError(f"{folder}/config.json is not a BERT config")
    return SimpleNamespace(**{**BERT_DEFAULTS, **data})


class WordPieceTokenizer:
    """A BERT folder's tokenizer.json behind the runtime's Tokenizer protocol, as
    model.hf.common.HFTokenizer puts transformers' tokenizer behind it: [CLS] text [SEP]
    cut to ``max_len``, [UNK] words reported, ## pieces joined back into words."""

    def __init__(self, folder: str | Path):
        from tokenizers import Tokenizer

        folder = Path(folder)
        try:
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as err:  # the Rust library raises plain Exceptions
            raise ModelLoadError(f"{folder}: the tokenizer could not be read ({err})") from err
        # Saved files may carry a fixed truncation (128) and padding: cut and pad per call.
        tok.no_truncation()
        tok.no_padding()
        self.tok = tok
        names = read_json_object(folder / "special_tokens_map.json")
        roles = {role: names.get(f"{role}_token") for role in SPECIAL_ROLES}
        ids = {role: tok.token_to_id(name) if name else None for role, name in roles.items()}
        self.bos_id, self.eos_id = ids["bos"], ids["eos"]
        self.pad_id = ids["pad"] if ids["pad"] is not None else 0
        self.unk_id = ids["unk"]
        framing = {name for role, name in roles.items() if name and role != "unk"}
        self.special_tokens = frozenset(framing)
        self.n_special = tok.num_special_tokens_to_add(is_pair=False)
        self.subword_style = style_of(tok) or subword_style(tok.get_vocab(with_added_tokens=True))

    def encode(self, text: str, max_len: int) -> Encoded:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        body = self.tok.encode(text, add_special_tokens=False)
        n_body = len(body.ids)
        body.truncate(max(max_len - self.n_special, 0))
        enc = self.tok.post_process(body)
        ids = list(enc.ids)
        unknown: list[str] = []
        if self.unk_id is not None:
            for i, (start, end) in zip(ids, enc.offsets):
                word = text[start:end]
                if i == self.unk_id and word and word not in unknown:
                    unknown.append(word)
        return Encoded(ids, self.tokens(ids), unknown, n_body + self.n_special > max_len)

    def encode_target(self, text: str, max_len: int) -> Encoded:
        ids = list(self.tok.encode(text, add_special_tokens=False).ids)
        return Encoded(ids[:max_len], self.tokens(ids[:max_len]), truncated=len(ids) > max_len)

    def pieces(self, ids: list[int]) -> list[str]:
        """Ids -> the vocabulary's own pieces (for WordPiece, already what people read)."""
        return [self.tok.id_to_token(int(i)) for i in ids]

    def tokens(self, ids: list[int]) -> list[str]:
        """Ids of one text -> its tokens as people read them (model.hf.pieces): a WordPiece
        vocabulary's pieces are text with "##" marks, and come back as they are."""
        return display_pieces(self.pieces(ids), self.subword_style, self.special_tokens)

    def detokenize(self, ids: list[int]) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=True).strip()

    def written(self, tokens: list[str]) -> str:
        """Tokens as the text they spell: "##" pieces joined to the word before them."""
        return self.tok.decoder.decode(list(tokens)).strip()
