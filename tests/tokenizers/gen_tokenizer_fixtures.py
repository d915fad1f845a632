"""Writes small Hugging Face tokenizer directories for tests/tokenizers/tokenizers.test.ts.

Each fixture copies the layout of a real hub tokenizer.json with a vocabulary small enough to
derive encodings by hand (the derivations are in the test file):

- byte_bpe/      Llama-3 style byte-level BPE: Split(Llama-3 regex, Isolated) + ByteLevel
                 pre-tokenizer, ignore_merges, <|begin_of_text|> added by TemplateProcessing,
                 a ChatML chat template. Base ids: id of byte b is b (token = GPT-2's
                 bytes_to_unicode(b)); merges give ids 256.. in order.
- llama2_spm/    Llama-2 style SentencePiece BPE as meta-llama/Llama-2-7b-hf's tokenizer.json:
                 normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, byte_fallback
                 (<0x00>..<0xFF> = ids 3..258), decoder Replace/ByteFallback/Fuse/Strip,
                 <s> added by TemplateProcessing; pad_token from special_tokens_map.json.
- metaspace_bpe/ the same vocabulary in the newer (legacy=false) form of transformers'
                 LlamaConverter: Metaspace pre-tokenizer, prepend_scheme "first", no
                 normalizer; tokenizer_config add_eos_token true (LlamaTokenizerFast
                 rebuilds the template as "<s> $A </s>").

Run: /usr/bin/python3 tests/tokenizers/gen_tokenizer_fixtures.py (no dependencies).
Sources: openai/gpt-2 encoder.py (bytes_to_unicode); meta-llama/Meta-Llama-3-8B and
meta-llama/Llama-2-7b-hf tokenizer.json on the Hugging Face hub (component layout).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def added(id_, content, special=True, normalized=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": normalized, "special": special}


def template(bos, bos_id):
    return {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": bos, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }


def bpe_model(vocab, merges, **kw):
    m = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
         "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab, "merges": merges}
    m.update(kw)
    return m


def write(name, files):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for fname, obj in files.items():
        with open(os.path.join(d, fname), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=2)
            f.write("\n")


LLAMA3_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def byte_bpe():
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r"), ("Ġw", "or"), ("l", "d"),
              ("Ġwor", "ld"), ("Ġ", "t"), ("Ġt", "he")]
    for left, right in merges:
        vocab[left + right] = len(vocab)  # 256 "he", 257 "ll", 258 "hell", 259 "hello", 260 "Ġw", ... 266 "Ġthe"
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    first = len(vocab)  # 267
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(first + i, s) for i, s in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            template("<|begin_of_text|>", first)]},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": bpe_model(vocab, [list(m) for m in merges], ignore_merges=True),
    }
    chatml = ("{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
              "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
              "model_max_length": 16, "clean_up_tokenization_spaces": False, "chat_template": chatml}
    write("byte_bpe", {"tokenizer.json": tok, "tokenizer_config.json": config})


def spm_vocab():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for c in ["▁", "t", "h", "e", "l", "o", "w", "r", "d", "a"]:
        vocab[c] = len(vocab)  # 259 "▁" .. 268 "a"
    merges = [("▁", "t"), ("h", "e"), ("▁t", "he"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("▁", "hello"), ("o", "r"),
              ("▁", "w"), ("▁w", "or"), ("l", "d"), ("▁wor", "ld")]
    for left, right in merges:
        vocab[left + right] = len(vocab)  # 269 "▁t", 270 "he", 271 "▁the", ... 275 "▁hello", ... 280 "▁world"
    return vocab, [list(m) for m in merges]


LLAMA2_CHAT = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
               "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}")


def spm(name, metaspace):
    vocab, merges = spm_vocab()
    if metaspace:
        normalizer = None
        pre = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
        # transformers' LlamaConverter(legacy=False): Metaspace splits, the decoder stays the byte-fallback sequence
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    else:
        normalizer = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                          {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
        pre = None
        decoder = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": normalizer, "pre_tokenizer": pre,
        "post_processor": template("<s>", 1),
        "decoder": decoder,
        "model": bpe_model(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True),
    }
    config = {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": metaspace, "legacy": not metaspace,
              "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
              "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None, "model_max_length": 32,
              "clean_up_tokenization_spaces": False, "chat_template": LLAMA2_CHAT}
    special_map = {"bos_token": {"content": "<s>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False},
                   "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<unk>"}
    write(name, {"tokenizer.json": tok, "tokenizer_config.json": config, "special_tokens_map.json": special_map})


if __name__ == "__main__":
    byte_bpe()
    spm("llama2_spm", metaspace=False)
    spm("metaspace_bpe", metaspace=True)
    print("wrote", sorted(os.listdir(OUT)))
