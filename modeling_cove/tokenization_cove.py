"""Word-level fast tokenizer for CoVe: Moses-like English splitting, exact character offsets, optional lowercasing.

The released CoVe MT-LSTM (and the stand-in vectors of a local data folder, docs/data.md) were trained on
`sacremoses.MosesTokenizer(lang="en").tokenize(text, escape=False)` tokens, lower-cased afterwards. This module
rebuilds that tokenization with the `tokenizers` library so that it

* serialises completely into `tokenizer.json` (no sacremoses, no custom Python class at load time:
  `AutoTokenizer.from_pretrained(path)` returns a plain `PreTrainedTokenizerFast`);
* keeps exact character offsets (`return_offsets_mapping=True`), also with lowercasing.

Loading a checkpoint's tokenizer: the tokenizer needs no code, but a model checkpoint's config.json names
`configuration_cove.CoveConfig` as remote code (so that `AutoModel...(trust_remote_code=True)` works without this
package), and `AutoTokenizer.from_pretrained` reads config.json with `AutoConfig` first. Where this package is not
imported, transformers does not know the model type "cove", so a bare `AutoTokenizer.from_pretrained(checkpoint)`
asks "[y/N]" and, refused, falls back with a "model of type `cove`" warning; nothing in tokenizer_config.json can
avoid that. These load it with no question and no warning (tested offline, without the package):
`PreTrainedTokenizerFast.from_pretrained(checkpoint)` (no code from the checkpoint at all);
`AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=True)` (runs only configuration_cove.py; the tokenizer
is still the stock class); or, with this package imported first (it registers "cove"), a bare AutoTokenizer.

How it works
------------
Moses is itself a chain of regex substitutions that insert spaces. We replay that chain as `tokenizers`
normalizers: each step is a `normalizers.Replace(Regex(...), content)` that matches ONE known character (`.`,
`,` or `'`), with look-behind/look-ahead for the context Moses captured with groups, and replaces it by the
same character padded with spaces (e.g. `'` -> `" '"`). `tokenizers` aligns every inserted space with the
character it came from, so offsets stay exact. The only Moses step that pads *arbitrary* characters (every
symbol that is not alphanumeric and not one of ``. ' ` , -``) is not replayed; instead every look-around treats
such a symbol like a space (which is what Moses sees after padding), and the pre-tokenizer cuts each symbol
out as a token of its own. Because all decisions are taken on the text as written, Moses' case-sensitive rule
"keep a final period when the next token starts lower-case" (and its case-sensitive non-breaking prefix list)
see the original case; `Lowercase` is the LAST normalizer, so it only changes the looked-up strings.

Pipeline (normalizers, in Moses' order; `sacremoses/tokenize.py` names in brackets):

1. drop ASCII control characters that are not whitespace [ASCII_JUNK]; strip leading/trailing whitespace and
   squeeze whitespace runs [DEDUPLICATE_SPACE];
2. put spaces around runs of two or more dots [replace_multidots];
3. separate commas except between digits: "5,300" stays, "a, b" -> "a , b" [COMMA_SEPARATE_1..3];
4. English apostrophe rules: "didn't" -> "didn 't", "he's" -> "he 's", "1990's" -> "1990 's",
   "dogs' " -> "dogs ' ", " 'em" -> " ' em" [ENGLISH_SPECIFIC_APOSTROPHE 1..5];
5. split a token-final period unless the token is a non-breaking prefix ("Mr.", "Dr.", single capitals...),
   contains another period and a letter ("U.S."), precedes a lower-case word, or is "No."/"Art."/"pp."
   before a number [handles_nonbreaking_prefixes];
6. split a final ".'" [TRAILING_DOT_APOSTROPHE];
7. optionally lower-case (with Python's word-final sigma rule, so that tokens equal `str.lower()`).

Then the pre-tokenizer keeps each run of "token characters" (alphanumerics and ``. ' ` , -``) and each other
non-space character as a token; whitespace is dropped. Hyphens and backquotes stay inside tokens
("well-known", "good--but"), as in Moses without `aggressive_dash_splits`; URLs are split at their symbols.

Moses' substitutions consume the characters around each match, so e.g. "rock'n'roll" -> "rock 'n'roll" and
"''" after a space splits differently from a lone "'"; the look-behinds below reproduce that left-to-right
consumption (see APOSTROPHE_UNIT_START, LETTER_CHAIN_PHASE, COMMA_RUN_PHASE).

Agreement with sacremoses (`benchmarks/tokenizer_agreement.py`, benchmarks/results/tokenizer_agreement.json):
100 % of the SST, TREC, Multi30k and IMDb test texts are tokenized identically. The known difference:
character classes are Unicode properties (`\\p{Alpha}`, `\\p{Alnum}`, `\\p{N}`, `\\p{Lower}` of the Oniguruma
tables in `tokenizers`, plus the Indic viramas/nuktas that sacremoses adds), whereas Moses uses frozen Perl
tables. They agree on Latin, Greek, Cyrillic, Arabic and Devanagari text (fuzz-tested); they differ for
characters that newer Unicode classes as alphabetic (e.g. the combining Latin letters U+0363..U+036F) and for CJK
ideographs, Hangul and Kana, which Moses' tables lack, so Moses cuts them into one token per character while we
keep runs of them together.

Empty input: an empty or whitespace-only text gives ZERO tokens (with `add_eos=True`, only `</s>`).
Texts longer than `model_max_length` are only cut with `truncation=True` (the usual transformers behaviour).
`model_max_length` defaults to `DEFAULT_MODEL_MAX_LENGTH` (4096 tokens), the BCN's default `bcn_max_length`, so
`pipeline("text-classification", ..., truncation=True)` cuts every text to a length the classifier accepts.

Vocabulary fingerprint: `vocabulary_fingerprint(tokenizer)` is a short digest of the id-ordered token list;
`create_cove_checkpoint` stores it as `config.vocabulary_fingerprint`, and `check_tokenizer_matches(config, tokenizer)`
refuses a tokenizer whose vocabulary differs from the one the checkpoint's word vectors are indexed by.
"""

from __future__ import annotations

import functools
import hashlib
import json
import numbers
import re
import weakref

from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>"]
PAD_TOKEN, UNK_TOKEN, BOS_TOKEN, EOS_TOKEN = SPECIAL_TOKENS
# Default `model_max_length` of a built tokenizer: the BCN's default `bcn_max_length` (its T x T biattention bounds
# the text length), so that `truncation=True` always gives inputs the classifier accepts.
DEFAULT_MODEL_MAX_LENGTH = 4096

# English non-breaking prefixes of Moses (sacremoses 0.2.0, `nonbreaking_prefix.en`, comments dropped):
# a token "<prefix>." keeps its period. Copied here so that building/loading never needs sacremoses.
NONBREAKING_PREFIXES_EN = (
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z "
    "Adj Adm Adv Asst Bart Bldg Brig Bros Capt Cmdr Col Comdr Con Corp Cpl DR Dr Drs Ens Gen Gov Hon Hr Hosp "
    "Insp Lt MM MR MRS MS Maj Messrs Mlle Mme Mr Mrs Ms Msgr Op Ord Pfc Ph Prof Pvt Rep Reps Res Rev Rt Sen Sens "
    "Sfc Sgt Sr St Supt Surg v vs i.e rev e.g Rs Nos Nr Jan Feb Mar Apr Jun Jul Aug Sep Oct Nov Dec"
).split()
# Prefixes marked #NUMERIC_ONLY#: they keep their period only when the next token starts with a digit.
NUMERIC_ONLY_PREFIXES_EN = ("No", "Art", "pp")

# ---------------------------------------------------------------------------------------------------------
# Character classes (Oniguruma syntax, the regex engine of `tokenizers`).
# ---------------------------------------------------------------------------------------------------------
# Whitespace exactly as Python's `str.isspace` (what Moses' `\s` and `str.split()` see).
_WS = r"\t\n\x0B\f\r\x1C-\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
# Indic viramas and nuktas: combining marks that sacremoses adds to its letter classes (sacremoses/indic.py).
_INDIC_MARKS = "".join(
    rf"\x{{{code:X}}}"
    for code in (
        0x93C, 0x94D, 0x9BC, 0x9CD, 0xA3C, 0xA4D, 0xABC, 0xACD, 0xAFD, 0xAFE, 0xAFF, 0xB3C, 0xB4D, 0xBCD, 0xC4D,
        0xCBC, 0xCCD, 0xD3B, 0xD3C, 0xD4D, 0xDCA, 0xEBA, 0x1039, 0x1714, 0x1BAB, 0x1C37, 0xA8C4, 0xA8F3, 0xA8F4,
        0xA953, 0xAAF6, 0x10A3F, 0x11046, 0x110B9, 0x110BA, 0x11133, 0x11173, 0x111C0, 0x111CA, 0x11235, 0x11236,
        0x112E9, 0x112EA, 0x1133C, 0x1134D, 0x11442, 0x11446, 0x114C2, 0x114C3, 0x115BF, 0x115C0, 0x1163F,
        0x116B6, 0x116B7, 0x11839, 0x1183A, 0x119E0, 0x11A34, 0x11C3F, 0x11D42, 0x11D45, 0x11D97, 0x1E94A,
    )
)
# Characters Moses keeps inside tokens: alphanumerics and . ' ` , -  ("run" characters).
_RUN = rf"\p{{Alnum}}{_INDIC_MARKS}.'`,\-"
RUN = f"[{_RUN}]"
SEP = f"[^{_RUN}]"  # a space, or a symbol that Moses pads with spaces (so it looks like a space to every rule)
_ALPHA = rf"\p{{Alpha}}{_INDIC_MARKS}"
ALPHA = f"[{_ALPHA}]"
NOT_ALPHA = f"[^{_ALPHA}]"
NUM = r"[\p{N}&&\p{Alnum}]"  # a number character that is not padded away as a symbol
NOT_NUM = r"[^[\p{N}&&\p{Alnum}]]"  # anything else, including spaces and symbols
NOT_ALPHA_NUM = rf"[^{_ALPHA}[\p{{N}}&&\p{{Alnum}}]]"
LOWER = r"\p{Lower}"
WS = f"[{_WS}]"
# Rule 4a (below) scans left to right and each match consumes the characters on both sides of its apostrophe, so
# after a match the next two characters cannot be matched. Along a chain of non-letters that are not symbols
# (apostrophes and e.g. digits, dots, hyphens, spaces; Moses pads symbols with spaces, so they break a chain),
# the greedy scan therefore splits the chain into units "x" (a non-apostrophe) and "' y y" (a matched
# apostrophe and the two characters it blocks). An apostrophe can fire only where a new unit starts.
_CHAIN = rf"[[{_RUN}{_WS}]&&[^{_ALPHA}']]"  # non-letter, non-apostrophe, not a symbol
_CHAIN_ANY = rf"[[{_RUN}{_WS}]&&[^{_ALPHA}]]"  # the same or an apostrophe
_UNITS = rf"(?:{_CHAIN}|'{_CHAIN_ANY}{{2}})*"
APOSTROPHE_UNIT_START = (
    rf"(?:(?:\A|{ALPHA})(?:{_CHAIN_ANY}{_UNITS})?"  # after the start or a letter, the first apostrophe can't fire
    rf"|[^{_RUN}{_WS}]{_UNITS})"  # after a symbol (a space in Moses' text), it can
)
# What precedes an apostrophe on which rule 4d fires: the start of a chain letter ' letter ' ... and an even
# number of "' letter" steps (the apostrophe before the chain, if any, has no letter before it).
LETTER_CHAIN_PHASE = rf"(?:\A|[^']|(?:\A|{NOT_ALPHA})'){ALPHA}(?:'{ALPHA}'{ALPHA})*"
# What precedes a comma on which rule 3 fires: a non-number and 2k commas, or (start/number, one comma) and 2k.
COMMA_RUN_PHASE = rf"(?:[^{NUM},]|(?:\A|{NUM}),)(?:,,)*"


def _alternation(words) -> str:
    # longest first, so that "Mrs" is tried before "Mr" (look-behind alternatives are anchored anyway)
    return "|".join(sorted((w.replace(".", r"\.") for w in words), key=len, reverse=True))


def _moses_steps() -> list[tuple[str, str]]:
    """The Moses substitutions as (pattern matching one character, replacement) pairs, in Moses' order."""
    token_start = rf"(?:\A|{SEP})"  # what precedes the first character of a token
    prefixes = _alternation(NONBREAKING_PREFIXES_EN)
    numeric_prefixes = _alternation(NUMERIC_ONLY_PREFIXES_EN)
    return [
        # 1. [ASCII_JUNK] control characters that are not whitespace vanish (they may join two words)
        (r"[\x00-\x08\x0E-\x1B]", ""),
        # [PAD_NOT_ISALNUM] symbols are cut out by the pre-tokenizer, except U+0307 (combining dot above), which
        # lower-casing "İ" creates ("i" + U+0307) and must stay in that token: pad the ones in the text instead
        ("\u0307", " \u0307 "),
        # strip (Moses strips before tokenizing; "text start/end" below means the stripped text) and squeeze
        # whitespace runs to one space [DEDUPLICATE_SPACE], so that neighbours are the ones Moses sees
        (rf"\A{WS}+|{WS}+\z", ""),
        (rf"{WS}{{2,}}", " "),
        # 2. [replace_multidots] a run of >= 2 dots is a token of its own
        (r"(?<!\.)\.(?=\.)", " ."),
        (r"(?<=\.)\.(?!\.)", ". "),
        # 3. [COMMA_SEPARATE_1] "x," -> "x , " unless a number precedes. Moses' match consumes the character
        #    before the comma, so in a run of commas it fires on every second one.
        (rf"(?<={COMMA_RUN_PHASE}),", " , "),
        # 3b. [COMMA_SEPARATE_2] ",x" -> " , x" unless a number follows
        (rf",(?={NOT_NUM})", " , "),
        # 3c. [COMMA_SEPARATE_3] a comma ending the text after a number
        (rf"(?<={NUM}),\z", " , "),
        # 4. English apostrophes [EN_SPECIFIC_1..5]
        #    a) between two non-letters: "5'6" -> "5 ' 6" (with Moses' left-to-right consumption, see above:
        #       "''" after a space -> only the first fires)
        (
            rf"(?<={NOT_ALPHA})(?<={APOSTROPHE_UNIT_START})'(?={NOT_ALPHA})",
            " ' ",
        ),
        #    b) opening quote before a letter: " 'em" -> " ' em"
        (rf"(?<={NOT_ALPHA_NUM})'(?={ALPHA})", " ' "),
        #    c) after a letter, before a non-letter: "dogs' " -> "dogs ' "
        (rf"(?<={ALPHA})'(?={NOT_ALPHA})", " ' "),
        #    d) between letters: "didn't" -> "didn 't", "he's" -> "he 's". The match consumes both letters, so
        #       along a chain letter'letter'letter it fires on every second apostrophe ("rock'n'roll" ->
        #       "rock 'n'roll").
        (rf"(?<={LETTER_CHAIN_PHASE})'(?={ALPHA})", " '"),
        #    e) "1990's" -> "1990 's"
        (rf"(?<={NUM})'(?=s)", " '"),
        # 5. [handles_nonbreaking_prefixes] split the period ending a token, unless ...
        (
            rf"(?<=[{_RUN}&&[^.]])"  # ... the token is only "." (or a dot run)
            rf"(?<!(?:\.{RUN}*{ALPHA}|{ALPHA}{RUN}*\.){RUN}*)"  # ... it has another "." and a letter ("U.S.")
            rf"(?<!{token_start}(?:{prefixes}))"  # ... it is a non-breaking prefix ("Mr.")
            r"\."
            rf"(?={SEP}|\z)"  # (token-final: a space, a symbol or the end follows)
            rf"(?!{WS}+{LOWER})"  # ... the next token starts lower-case
            rf"(?:(?<!{token_start}(?:{numeric_prefixes})\.)|(?!{WS}+[0-9]))",  # ... "No. 5"
            " .",
        ),
        # 6. [TRAILING_DOT_APOSTROPHE] the text ends with ".'"
        (r"\.(?='\z)", " . "),
    ]


# The pre-tokenizer: each run of token characters, and each other non-space character, is a token.
# (U+0307 only occurs inside a run when lower-casing "İ" made it; the text's own ones were padded with spaces.)
SPLIT_PATTERN = rf"[{_RUN}\x{{307}}]+|[^{_RUN}{_WS}]"

# Python's `str.lower()` (used on the reference tokens) writes a capital sigma as final "ς" at the end of a word
# (Unicode Final_Sigma: a cased letter before it, none after it, skipping case-ignorable characters, within the
# token); the per-character `Lowercase` normalizer would give "σ". Applied after the splitting steps.
_IN_TOKEN_CASE_IGNORABLE = rf"[\p{{Case_Ignorable}}&&[{_RUN}]]"
FINAL_SIGMA = rf"(?<=\p{{Cased}}{_IN_TOKEN_CASE_IGNORABLE}*)\x{{3A3}}(?!{_IN_TOKEN_CASE_IGNORABLE}*\p{{Cased}})"


def build_normalizer(lowercase: bool = True) -> normalizers.Normalizer:
    """The Moses-like normalizer chain (see the module docstring), optionally followed by `Lowercase`."""
    steps = [normalizers.Replace(Regex(pattern), content) for pattern, content in _moses_steps()]
    if lowercase:
        steps.append(normalizers.Replace(Regex(FINAL_SIGMA), "\u03c2"))
        steps.append(normalizers.Lowercase())
    return normalizers.Sequence(steps)


def build_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Keep the regex matches (tokens), drop everything else (whitespace)."""
    return pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="removed", invert=True)


@functools.lru_cache(maxsize=2)
def _pipeline(lowercase: bool):
    return build_normalizer(lowercase), build_pre_tokenizer()


def moses_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Tokens of `text` exactly as the fast tokenizer splits it (before the vocabulary lookup).

    Approximates `[t.lower() for t in MosesTokenizer(lang="en").tokenize(text, escape=False)]` (without
    `.lower()` when `lowercase=False`) without needing sacremoses. Empty or whitespace-only text gives `[]`.
    """
    if not isinstance(text, str):
        raise TypeError(f"moses_tokenize expects a str, got {type(text).__name__}")
    normalizer, pre_tokenizer = _pipeline(bool(lowercase))
    return [token for token, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))]


class _CoveTokenizerFast(PreTrainedTokenizerFast):
    """`PreTrainedTokenizerFast` whose `save_pretrained` records `"tokenizer_class": "PreTrainedTokenizerFast"`.

    transformers 5 writes `type(tokenizer).__name__` into tokenizer_config.json, i.e. `"TokenizersBackend"`,
    which transformers 4.x cannot resolve; `"PreTrainedTokenizerFast"` loads in both (in 5 it is an alias of
    `TokenizersBackend`). Nothing else differs, so the saved tokenizer needs no custom code: `AutoTokenizer`
    returns the stock class. (`__qualname__` keeps the real name, so pickling and `datasets` hashing work.)
    """


_CoveTokenizerFast.__name__ = "PreTrainedTokenizerFast"


def build_cove_tokenizer(
    words,
    lowercase: bool = True,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    add_eos: bool = False,
) -> PreTrainedTokenizerFast:
    """Word-level fast tokenizer over `SPECIAL_TOKENS + words`.

    Args:
        words: the vocabulary (iterable of str), e.g. the words of the embedding matrix, in row order.
            Duplicates and entries equal to a special token are dropped (first occurrence wins), so the ids are
            `0..3` for `<pad> <unk> <s> </s>` and then `words` in order, contiguous. With `lowercase=True` the
            text is lower-cased before lookup, so upper-case entries in `words` can never be produced.
        lowercase: lower-case the text (after splitting decisions, see the module docstring).
        model_max_length: maximum sequence length (`truncation=True` cuts to it; saved in tokenizer_config.json).
            Defaults to `DEFAULT_MODEL_MAX_LENGTH` (4096), the BCN's default `bcn_max_length`.
        add_eos: append `</s>` to each sequence (MT target side): single "$A </s>", pair "$A </s> $B </s>".

    Returns:
        a `PreTrainedTokenizerFast` returning `input_ids`, `token_type_ids` (0 for the first sequence and its
        `</s>`, 1 for the second) and `attention_mask`; padding on the right with `<pad>` (id 0). Empty or
        whitespace-only text gives zero tokens (only `</s>` with `add_eos=True`). The special tokens' strings in
        raw text (an HTML `<s>`, a literal `<pad>`) are plain text, tokenized as `moses_tokenize` does.
    """
    if isinstance(words, str):
        raise TypeError("words must be an iterable of tokens, not a single string")
    if (isinstance(model_max_length, bool) or not isinstance(model_max_length, numbers.Integral)
            or model_max_length < 1):
        raise ValueError(f"model_max_length must be an int >= 1, got {model_max_length!r}")
    vocab: dict[str, int] = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for word in words:
        if not isinstance(word, str) or not word:
            raise ValueError(f"vocabulary entries must be non-empty strings, got {word!r}")
        if word not in vocab:
            vocab[word] = len(vocab)

    tokenizer = Tokenizer(WordLevel(vocab, unk_token=UNK_TOKEN))
    tokenizer.normalizer = build_normalizer(lowercase)
    tokenizer.pre_tokenizer = build_pre_tokenizer()
    eos_id = vocab[EOS_TOKEN]
    if add_eos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A {EOS_TOKEN}",
            pair=f"$A:0 {EOS_TOKEN}:0 $B:1 {EOS_TOKEN}:1",
            special_tokens=[(EOS_TOKEN, eos_id)],
        )
    else:
        tokenizer.post_processor = processors.TemplateProcessing(single="$A", pair="$A:0 $B:1", special_tokens=[])

    fast = _CoveTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token=UNK_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        model_max_length=int(model_max_length),
        padding_side="right",
        truncation_side="right",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        clean_up_tokenization_spaces=False,
        split_special_tokens=True,  # "<s>", "<pad>" in raw text are text, split as Moses splits them
    )
    return fast


# ---------------------------------------------------------------------------------------------------------
# Vocabulary fingerprint: which vocabulary a checkpoint's word-vector rows are indexed by.
# ---------------------------------------------------------------------------------------------------------
FINGERPRINT_PATTERN = re.compile(r"([1-9][0-9]*):([0-9a-f]{16})")
# tokenizer -> {(len(tokenizer), size): fingerprint}; `encode` may check the same tokenizer on every call
_FINGERPRINT_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _vocabulary_digest(tokens: list) -> str:
    # tokens in id order (None for an id without a token); JSON keeps any string, newlines included, unambiguous
    payload = json.dumps(tokens, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()[:16]


def vocabulary_fingerprint(tokenizer, size=None) -> str:
    """Fingerprint of `tokenizer`'s vocabulary: `"<size>:<16 hex digits>"`.

    The hex digits are the start of the sha256 of the JSON list of the tokens with ids `0..size-1`, in id order
    (`null` for an id no token has), added tokens included. `size` defaults to `len(tokenizer)`. The same words
    in another order (other ids) give another fingerprint; the fingerprint of a tokenizer's first `size` ids does
    not change when tokens are appended (`tokenizer.add_tokens`), so a checkpoint resized for them still matches.

    Raises:
        TypeError: `tokenizer` has no `get_vocab()`.
        ValueError: `size` is not an int in `[1, len(tokenizer)]`.
    """
    if not callable(getattr(tokenizer, "get_vocab", None)):
        raise TypeError(f"vocabulary_fingerprint expects a tokenizer with get_vocab(), got {type(tokenizer).__name__}")
    total = len(tokenizer)
    if size is None:
        size = total
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= total:
        raise ValueError(f"size must be an int in [1, {total}] (the tokenizer's length), got {size!r}")
    try:
        cache = _FINGERPRINT_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        cache = {}
    key = (total, size)
    if key not in cache:
        tokens = [None] * size
        for token, index in tokenizer.get_vocab().items():
            if 0 <= index < size:
                tokens[index] = token
        cache[key] = f"{size}:{_vocabulary_digest(tokens)}"
    return cache[key]


def parse_vocabulary_fingerprint(fingerprint: str) -> tuple:
    """`"<size>:<16 hex digits>"` -> `(size, hex digits)`; ValueError naming the value otherwise."""
    match = FINGERPRINT_PATTERN.fullmatch(fingerprint) if isinstance(fingerprint, str) else None
    if match is None:
        raise ValueError(
            f"vocabulary_fingerprint must be None or '<size>:<16 lower-case hex digits>' (as "
            f"vocabulary_fingerprint(tokenizer) returns), got {fingerprint!r}"
        )
    return int(match.group(1)), match.group(2)


def check_tokenizer_matches(config, tokenizer) -> None:
    """Raise ValueError unless `tokenizer` has the vocabulary the checkpoint of `config` was built with.

    The checkpoint's word vectors are rows indexed by token id: another vocabulary maps words to other words'
    vectors and gives wrong results without any error. A config without `vocabulary_fingerprint` (checkpoints
    from before the field existed) is accepted. The tokenizer's first `size` ids (the size recorded in the
    fingerprint) must match, and it may not have more tokens than the model has rows (`config.vocab_size`): tokens
    added with `tokenizer.add_tokens` need `model.resize_token_embeddings(len(tokenizer))`.
    """
    recorded = getattr(config, "vocabulary_fingerprint", None)
    if recorded is None:
        return
    size, _ = parse_vocabulary_fingerprint(recorded)
    have = len(tokenizer)
    if have < size:
        raise ValueError(
            f"the tokenizer does not belong to this checkpoint: it has {have} tokens (fingerprint "
            f"{vocabulary_fingerprint(tokenizer)}), the checkpoint's vocabulary has {size} (fingerprint {recorded}). "
            f"Load the tokenizer saved with the model (AutoTokenizer.from_pretrained on the checkpoint folder)"
        )
    found = vocabulary_fingerprint(tokenizer, size)
    if found != recorded:
        whole = "" if have == size else f"; all {have} tokens: {vocabulary_fingerprint(tokenizer)}"
        raise ValueError(
            f"the tokenizer does not belong to this checkpoint: its vocabulary differs from the one the word vectors "
            f"are indexed by. Checkpoint: {size} tokens, fingerprint {recorded}; tokenizer: {have} tokens, "
            f"fingerprint of its first {size} ids {found}{whole}. Load the tokenizer saved with the model "
            f"(AutoTokenizer.from_pretrained on the checkpoint folder)"
        )
    vocab_size = getattr(config, "vocab_size", None)
    if vocab_size is not None and have > vocab_size:
        raise ValueError(
            f"the tokenizer has {have} tokens but the model has {vocab_size} word-vector rows (vocab_size): ids "
            f">= {vocab_size} have no vector. After tokenizer.add_tokens(...), call "
            f"model.resize_token_embeddings(len(tokenizer))"
        )


__all__ = [
    "DEFAULT_MODEL_MAX_LENGTH",
    "SPECIAL_TOKENS",
    "NONBREAKING_PREFIXES_EN",
    "NUMERIC_ONLY_PREFIXES_EN",
    "build_cove_tokenizer",
    "build_normalizer",
    "build_pre_tokenizer",
    "check_tokenizer_matches",
    "moses_tokenize",
    "parse_vocabulary_fingerprint",
    "vocabulary_fingerprint",
]
