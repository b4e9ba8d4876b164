"""A GGUF file's tokenizer, rebuilt from its metadata as a ``tokenizers`` fast tokenizer.

A GGUF carries no tokenizer.json: llama.cpp stores the vocabulary, the merges (or, for a
SentencePiece vocabulary, scores and no merges) and the special ids as metadata. Two kinds
are rebuilt here, each exactly as transformers' own GGUF loader rebuilds it (the reference
the parity tests hold us to, id for id):

- ``tokenizer.ggml.model == "gpt2"``: byte-level BPE (GPT-2, SmolLM2, Qwen2, LLaMA 3): every
  byte is a printable character (``Ġ`` for a space), the file's merges in their order.
- ``"llama"``: SentencePiece BPE with byte fallback (LLaMA 2, Mistral, Gemma): spaces become
  ``▁``, a character outside the vocabulary falls back to ``<0xE2>``-style byte tokens. Gemma's
  file lists no merges; they are recovered from the vocabulary, best first in file order.

transformers takes about two minutes for Gemma's 262k-token vocabulary (it adds six thousand
control tokens one by one through its Python layer); built directly here it takes seconds.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from model.runtime.types import ModelLoadError

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
SENTENCEPIECE_ARCHS = {"gemma", "gemma2", "gemma3"}  # their files list no merges

# The split regexes transformers applies for a byte-level file's ``tokenizer.ggml.pre``
# (llama.cpp's pre-tokenizer names); a name not listed keeps GPT-2's own split.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZER_SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx"), _LLAMA3_SPLIT),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen"), _QWEN2_SPLIT),
}


@cache
def byte_alphabet() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (``0x20`` -> ``Ġ``)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def _byte_level(meta: dict):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    spelling = byte_alphabet()
    alphabet = set(spelling.values())
    vocab = {}
    for index, token in enumerate(meta["tokens"]):
        if not set(token) <= alphabet:  # stored as text: spell its UTF-8 bytes
            token = "".join(spelling[b] for b in token.encode("utf-8"))
        vocab[token] = index
    merges = [tuple(m.split(" ")) for m in meta.get("merges") or ()]
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    )
    split = PRE_TOKENIZER_SPLITS.get(meta.get("pre") or "")
    if split is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    tok.decoder = decoders.ByteLevel()
    return tok, alphabet


def recovered_merges(tokens: list[str], order: dict[str, int]) -> list[tuple[str, str]]:
    """The merges a merge-less SentencePiece vocabulary implies: every split of a token into
    two tokens, best first by ``order`` (lower first), then longer left and right pieces
    (transformers' ``generate_merges`` with the same order, in one pass: it takes two
    minutes on Gemma's vocabulary through transformers, seconds here)."""
    has = {t: i for i, t in enumerate(tokens)}.__contains__
    found = []
    add = found.append
    for index, (token, rank) in enumerate(order.items()):
        n = len(token)
        for cut in range(1, n):
            left = token[:cut]
            if has(left):
                right = token[cut:]
                if has(right):
                    add((rank, -cut, cut - n, index, left, right))
    found.sort()  # ties in rank keep the vocabulary's order, as transformers' stable sort
    return [(m[4], m[5]) for m in found]


def _sentencepiece(meta: dict, architecture: str):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    tokens = list(meta["tokens"])
    if architecture in SENTENCEPIECE_ARCHS:
        # Gemma stores a token of two or more spaces as spaces; its merges spell them "▁".
        tokens = ["▁" * len(t) if " " in t and not t.strip() else t for t in tokens]
        order = {t: i for i, t in enumerate(tokens)}  # file order is merge order
        merges = recovered_merges(tokens, order)
    elif meta.get("merges"):
        merges = [tuple(m.split(" ")) for m in meta["merges"]]
    else:  # scores give the order
        order = {t: -s for t, s in zip(tokens, meta["scores"])}
        merges = recovered_merges(tokens, order)
    vocab = {t: i for i, t in enumerate(tokens)}
    unk = "<unk>"  # transformers' Gemma and LLaMA tokenizers name it so, whatever the file says
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=merges,
            fuse_unk=True,
            unk_token=unk,
            dropout=None,
            byte_fallback=True,
        )
    )
    if architecture in SENTENCEPIECE_ARCHS:  # GemmaTokenizer's shape
        tok.normalizer = normalizers.Replace(" ", "▁")
        tok.pre_tokenizer = pre_tokenizers.Split(
            pattern=" ", behavior="merged_with_previous", invert=False
        )
        tok.decoder = decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
        )
    else:  # LlamaTokenizer's shape: a ▁ before the first word, spaces as ▁
        tok.normalizer = None
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="▁", prepend_scheme="first", split=False
        )
        tok.decoder = decoders.Sequence(
            [
                decoders.Replace("▁", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(content=" ", left=1, right=0),
            ]
        )
    return tok, None


def _post_processor(tok, bos: str | None, eos: str | None, add_bos: bool, add_eos: bool):
    from tokenizers import processors

    single, pair, specials = "$A:0", "$A:0 $B:1", []
    if add_bos and bos is not None:
        single, pair = f"{bos}:0 {single}", f"{bos}:0 $A:0 {bos}:1 $B:1"
        specials.append((bos, tok.token_to_id(bos)))
    if add_eos and eos is not None:
        single += f" {eos}:0"
        pair = pair.replace("$A:0", f"$A:0 {eos}:0").replace("$B:1", f"$B:1 {eos}:1")
        specials.append((eos, tok.token_to_id(eos)))
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=list(dict.fromkeys(specials))
    )


def build_tokenizer(meta: dict, architecture: str):
    """``(tokenizers.Tokenizer, tokenizer_config dict)`` for a GGUF's ``tokenizer.*`` metadata
    (keys without the ``tokenizer.ggml.`` prefix: tokens, token_type, merges, scores, model,
    pre, bos_token_id, ...; ``chat_template`` as the file names it)."""
    from tokenizers import AddedToken

    kind = meta.get("model")
    if kind == "gpt2":
        tok, alphabet = _byte_level(meta)
    elif kind == "llama":
        tok, alphabet = _sentencepiece(meta, architecture)
    else:
        raise ModelLoadError(
            f"the GGUF's tokenizer type {kind!r} is not one Attention Lab rebuilds "
            "(byte-level BPE 'gpt2', SentencePiece BPE 'llama')"
        )
    tokens, types = meta["tokens"], meta.get("token_type") or ()
    # Control tokens (<|im_start|>, <bos>) stay whole and special; user-defined ones (Gemma's
    # "\n\n" runs, <think>) stay whole but are text. A "control" token a byte-level file spells
    # outside the byte alphabet is a llama.cpp mislabel, skipped as transformers skips it.
    control = [
        AddedToken(t, normalized=False, special=True)
        for t, kind_ in zip(tokens, types)
        if kind_ == CONTROL and (alphabet is None or set(t) <= alphabet)
    ]
    tok.add_special_tokens(control)
    vocab = tok.get_vocab()
    user = [
        AddedToken(t, normalized=False, special=False)
        for t, kind_ in zip(tokens, types)
        if kind_ == USER_DEFINED and t in vocab
    ]
    tok.add_tokens(user)

    def name(role: str) -> str | None:
        index = meta.get(f"{role}_token_id")
        return tokens[index] if index is not None and 0 <= index < len(tokens) else None

    add_bos = meta.get("add_bos_token")
    if add_bos is None:  # llama.cpp adds BOS to a SentencePiece vocabulary that is silent
        add_bos = kind == "llama"
    add_eos = bool(meta.get("add_eos_token", False))
    _post_processor(tok, name("bos"), name("eos"), bool(add_bos), add_eos)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": name("bos"),
        "eos_token": name("eos"),
        "unk_token": name("unknown"),
        "pad_token": name("padding"),
        "add_bos_token": bool(add_bos),
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
    }
    if meta.get("chat_template"):
        config["chat_template"] = meta["chat_template"]
    return tok, {k: v for k, v in config.items() if v is not None}


def write_tokenizer(meta: dict, architecture: str, folder: Path) -> None:
    """tokenizer.json and tokenizer_config.json in ``folder``, as a Hugging Face folder has."""
    tok, config = build_tokenizer(meta, architecture)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8"
    )
