"""Tiny random Hugging Face models saved into folders, for tests that load local models.

Built with transformers' own classes and save_pretrained, each with a tokenizer beside it;
nothing touches the network. The session fixture ``hf_folders`` (tests/conftest.py) builds
them once for every test that needs them.
"""

import shutil

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tokenizers.implementations import SentencePieceUnigramTokenizer
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertForMaskedLM,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    T5Config,
    T5ForConditionalGeneration,
)

from model.hf.bert import minilm_path

CORPUS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "I study math every day",
    "hello world, attention is all you need",
]
BERT_TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def byte_level_tokenizer(specials: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def save_bert_tokenizer(folder) -> None:
    for name in BERT_TOKENIZER_FILES:
        shutil.copy(minilm_path() / name, folder / name)


def build_folders(tmp_path_factory) -> dict:
    """name -> folder of a tiny random model with its tokenizer (bert, distilbert, gpt2, bart, t5)."""
    torch.manual_seed(0)
    out = {}

    out["bert"] = tmp_path_factory.mktemp("bert")  # saved with its MLM head: "bert." prefix
    BertForMaskedLM(
        BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).save_pretrained(out["bert"])
    save_bert_tokenizer(out["bert"])

    out["distilbert"] = tmp_path_factory.mktemp("distilbert")
    DistilBertModel(
        DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64)
    ).save_pretrained(out["distilbert"])
    save_bert_tokenizer(out["distilbert"])

    out["gpt2"] = tmp_path_factory.mktemp("gpt2")
    tok = byte_level_tokenizer(["<|endoftext|>"])
    end = "<|endoftext|>"  # GPT-2's one token for unknown, start and end
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=end, eos_token=end, unk_token=end
    ).save_pretrained(out["gpt2"])
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=tok.get_vocab_size(),
            n_positions=48,
            n_embd=32,
            n_layer=2,
            n_head=4,
            bos_token_id=0,
            eos_token_id=0,
        )
    ).save_pretrained(out["gpt2"])

    out["bart"] = tmp_path_factory.mktemp("bart")
    tok = byte_level_tokenizer(["<s>", "<pad>", "</s>", "<unk>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    ).save_pretrained(out["bart"])
    BartForConditionalGeneration(
        BartConfig(
            vocab_size=tok.get_vocab_size(),
            max_position_embeddings=48,
            d_model=32,
            encoder_layers=2,
            decoder_layers=3,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
        )
    ).save_pretrained(out["bart"])

    out["t5"] = tmp_path_factory.mktemp("t5")
    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(CORPUS, vocab_size=60, special_tokens=["<pad>", "</s>", "<unk>"])
    sp._tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", 1)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=sp._tokenizer, eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(out["t5"])
    T5ForConditionalGeneration(
        T5Config(
            vocab_size=sp.get_vocab_size(),
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=4,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
    ).save_pretrained(out["t5"])
    return out


# --- today's decoder-only layouts, run by our own engine -------------------------------------

DECODER_TYPES = ("llama", "qwen2", "mistral", "gpt2")


def decoder_tokenizer(model_type: str) -> tuple[PreTrainedTokenizerFast, dict]:
    """A small byte-level BPE in the family's manner, and the config's special ids.

    LLaMA and Mistral put <s> before every text; Qwen2 and GPT-2 add nothing.
    """
    if model_type in ("llama", "mistral"):
        tok = byte_level_tokenizer(["<unk>", "<s>", "</s>"])
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", 1)]
        )
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
        )
        return fast, {"bos_token_id": 1, "eos_token_id": 2}
    end = "<|endoftext|>"
    tok = byte_level_tokenizer([end])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=end, pad_token=end)
    if model_type == "gpt2":
        fast = PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token=end, eos_token=end, unk_token=end
        )
        return fast, {"bos_token_id": 0, "eos_token_id": 0}
    return fast, {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def decoder_model(model_type: str, vocab: int, ids: dict, **overrides):
    """A random-initialised causal LM of the family: 2 layers, hidden 64, grouped-query
    heads where the layout has them (8 query heads sharing 2 key/value heads)."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        MistralConfig,
        MistralForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    if model_type == "gpt2":
        cfg = dict(vocab_size=vocab, n_positions=64, n_embd=64, n_layer=2, n_head=4, **ids)
        cfg["initializer_range"] = 0.1  # sharper attention than the default 0.02
        return GPT2LMHeadModel(GPT2Config(**{**cfg, **overrides}))
    classes = {
        "llama": (LlamaConfig, LlamaForCausalLM, {"tie_word_embeddings": False}),
        # Qwen2.5's small models tie their embeddings and use a large rotary base.
        "qwen2": (Qwen2Config, Qwen2ForCausalLM, {"tie_word_embeddings": True}),
        "mistral": (MistralConfig, MistralForCausalLM, {"sliding_window": 32}),
    }
    config_cls, model_cls, extra = classes[model_type]
    cfg = dict(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_theta=1_000_000.0 if model_type == "qwen2" else 10_000.0,
        initializer_range=0.1,  # sharper attention than the default 0.02
        **ids,
        **extra,
    )
    return model_cls(config_cls(**{**cfg, **overrides}))


def build_decoder_folder(model_type: str, folder, **overrides):
    """A tiny random ``model_type`` folder (safetensors + its tokenizer) saved into ``folder``."""
    torch.manual_seed(0)
    tokenizer, ids = decoder_tokenizer(model_type)
    model = decoder_model(model_type, len(tokenizer), ids, **overrides)
    with torch.no_grad():  # random biases, so a mapping that drops one cannot pass
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name or name.startswith("ln"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_long_folder(folder, positions: int = 8192):
    """A tiny LLaMA folder that reads long inputs: ``positions`` positions, 2 layers of 2
    heads sharing one key/value head (the maps of a long input stay small in memory)."""
    return build_decoder_folder(
        "llama",
        folder,
        max_position_embeddings=positions,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        hidden_size=32,
        intermediate_size=64,
    )


def long_text(n_chars: int = 9000, seed: int = 0) -> str:
    """Lowercase nonsense words: the test tokenizer reads it as more than one token per two
    characters, so 9,000 characters are more than 4,096 tokens."""
    import random

    rng = random.Random(seed)
    words = []
    while sum(len(w) + 1 for w in words) < n_chars:
        words.append(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8)))
        )
    return " ".join(words)[:n_chars]


CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_chat_folder(folder, template: str | None = None):
    """A tiny LLaMA-type folder whose tokenizer carries a ChatML chat template with its own
    special tokens, as SmolLM2-Instruct's does (``<|im_start|>``, ``<|im_end|>``), or
    ``template``."""
    torch.manual_seed(0)
    tok = byte_level_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|im_end|>",
    )
    fast.chat_template = template or CHATML
    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    decoder_model("llama", len(fast), ids).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


# --- Gemma 3: sliding-window and global layers, QK-norm, four norms a layer -----------------

GEMMA3_LAYER_TYPES = [
    "sliding_attention",
    "sliding_attention",
    "full_attention",
    "sliding_attention",
]


def build_gemma3_folder(folder, **overrides):
    """A tiny random Gemma 3 text model (Gemma3ForCausalLM, model_type "gemma3_text") and a
    small byte-level tokenizer saved into ``folder``: 4 layers of d_model 64, 4 query heads
    sharing 1 key/value head of width 16, a sliding window of 8 on three layers and a global
    layer between, local and global rotary bases 10,000 and 1,000,000, and a score scale
    (query_pre_attn_scalar 24) that differs from the head width, so a mapping that takes
    1/√d_k cannot pass. Norm weights get random offsets (a fresh Gemma norm's w is 0)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    tokenizer, ids = decoder_tokenizer("llama")  # <s> before every text
    cfg = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        query_pre_attn_scalar=24,
        sliding_window=8,
        layer_types=list(GEMMA3_LAYER_TYPES),
        max_position_embeddings=128,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
        initializer_range=0.1,  # sharper attention than the default 0.02
        pad_token_id=0,
        **ids,
    )
    model = Gemma3ForCausalLM(Gemma3TextConfig(**{**cfg, **overrides}))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
