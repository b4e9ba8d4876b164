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
