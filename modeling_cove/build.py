"""Building CoVe checkpoints: vocabulary counting, checkpoint assembly, and conversion of the Salesforce weights.

The released MT-LSTM (`wmtlstm-b142a7f2.pth`, `wmtlstm-8f474287.pth`) is the state dict of
`nn.LSTM(300, 300, num_layers=2, bidirectional=True)` with no prefix (docs/paper.md §1); `CoveModel` keeps that
module as `encoder.rnn`, so conversion is a prefix rename plus shape checks.
"""

from collections import Counter
from typing import Iterable, Optional

import torch

from .configuration_cove import CoveConfig, is_int
from .modeling_cove import CoveModel
from .tokenization_cove import (
    DEFAULT_MODEL_MAX_LENGTH,
    SPECIAL_TOKENS,
    build_cove_tokenizer,
    moses_tokenize,
    vocabulary_fingerprint,
)

__all__ = ["convert_salesforce_state_dict", "count_tokens", "create_cove_checkpoint", "load_salesforce_state_dict",
           "SALESFORCE_PREFIX", "salesforce_shapes", "select_vocabulary"]

SALESFORCE_PREFIX = "encoder.rnn."


def salesforce_shapes(word_vector_dim: int = 300, hidden_size: int = 300, num_layers: int = 2) -> dict:
    """Key -> shape of the original state dict (PyTorch gate order i, f, g, o: 4 * hidden rows)."""
    shapes = {}
    for layer in range(num_layers):
        input_size = word_vector_dim if layer == 0 else 2 * hidden_size
        for suffix in ("", "_reverse"):
            shapes[f"weight_ih_l{layer}{suffix}"] = (4 * hidden_size, input_size)
            shapes[f"weight_hh_l{layer}{suffix}"] = (4 * hidden_size, hidden_size)
            shapes[f"bias_ih_l{layer}{suffix}"] = (4 * hidden_size,)
            shapes[f"bias_hh_l{layer}{suffix}"] = (4 * hidden_size,)
    return shapes


def load_salesforce_state_dict(path) -> dict:
    """Read a `wmtlstm-*.pth` file safely (`weights_only=True`) and return its tensors."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # corrupted / not a torch file / pickled code
        raise ValueError(f"could not read {path} as a PyTorch state dict (weights_only=True): {err}") from err
    if hasattr(state, "state_dict") and not isinstance(state, dict):
        state = state.state_dict()
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a {type(state).__name__}, expected a state dict of tensors")
    return dict(state)


def convert_salesforce_state_dict(state_dict: dict, config: CoveConfig) -> dict:
    """Original MT-LSTM keys -> `CoveModel` keys (`weight_ih_l0` -> `encoder.rnn.weight_ih_l0`), checked.

    Accepts keys with a leading `rnn.` or `module.` (DataParallel) prefix. Raises ValueError naming the key and
    both shapes on a mismatch, and listing missing / unexpected keys.
    """
    expected = salesforce_shapes(config.word_vector_dim, config.hidden_size, config.num_hidden_layers)
    cleaned = {}
    for key, value in state_dict.items():
        name = key
        for prefix in ("module.", "rnn."):
            if name.startswith(prefix):
                name = name[len(prefix):]
        cleaned[name] = value
    missing = sorted(set(expected) - set(cleaned))
    unexpected = sorted(set(cleaned) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"state dict does not have the MT-LSTM layout: missing keys {missing}, unexpected keys {unexpected}"
        )
    converted = {}
    for name, shape in expected.items():
        tensor = cleaned[name]
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{name}: expected a tensor, got {type(tensor).__name__}")
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name}: checkpoint shape {tuple(tensor.shape)} != expected shape {shape}")
        converted[SALESFORCE_PREFIX + name] = tensor.detach().to(torch.float32).clone()
    return converted


def count_tokens(texts: Iterable[str], lowercase: bool = True, progress: bool = False) -> Counter:
    """Token counts of `texts` under the CoVe tokenizer's splitting (Moses-like)."""
    counts = Counter()
    if progress:
        from tqdm.auto import tqdm

        texts = tqdm(texts, desc="counting tokens", unit=" texts")
    for text in texts:
        counts.update(moses_tokenize(text, lowercase=lowercase))
    return counts


def select_vocabulary(counts: Counter, has_vector=None, oov_min_count: int = 5, max_size: Optional[int] = None) -> list:
    """Words to keep, most frequent first (ties alphabetical).

    Args:
        counts: token counts (`count_tokens`); the special tokens are never selected.
        has_vector: `word -> bool`, whether the word has a pretrained vector; such words are always kept.
        oov_min_count: words without a vector are kept when they occur at least this often (useful for
            trainable/random-embedding baselines).
        max_size: the most words to return (the special tokens not included); `None` = no cap, `0` = none.

    Raises:
        ValueError: `max_size` is not `None` or an int >= 0.
    """
    valid_cap = is_int(max_size) and max_size >= 0
    if max_size is not None and not valid_cap:
        raise ValueError(f"max_size must be None (no cap) or an int >= 0, got {max_size!r}")
    words = [w for w, c in counts.items() if w not in SPECIAL_TOKENS and
             ((has_vector is not None and has_vector(w)) or c >= oov_min_count)]
    words.sort(key=lambda w: (-counts[w], w))
    return words if max_size is None else words[:max_size]


# Config fields that create_cove_checkpoint sets itself, from the tokenizer and the vectors.
_DERIVED_FIELDS = ("vocab_size", "word_vector_dim", "vocabulary_fingerprint")


def create_cove_checkpoint(
    words: list,
    vectors: torch.Tensor,
    config: Optional[CoveConfig] = None,
    lstm_state_dict: Optional[dict] = None,
    lowercase: Optional[bool] = None,
    model_max_length: int = DEFAULT_MODEL_MAX_LENGTH,
    seed: int = 0,
    **config_overrides,
):
    """Assemble `(CoveModel, tokenizer)` from a word list and its vector matrix.

    Args:
        words: the vocabulary without the special tokens; the tokenizer is `SPECIAL_TOKENS + words`.
        vectors: `(len(words) + 4, dim)` matrix in tokenizer order (the 4 special tokens' rows first; they are
            zeroed).
        config: the model's configuration. Its `vocab_size`, `word_vector_dim` and `vocabulary_fingerprint` are set
            (in place) from the tokenizer and `vectors`; everything else is used as given. `None`: a default `CoveConfig` with
            `config_overrides`.
        lstm_state_dict: MT-LSTM weights with converted keys (`convert_salesforce_state_dict`); `None` initialises
            the MT-LSTM freshly with `seed`.
        lowercase: whether the tokenizer lower-cases; it is also stored as `config.lowercase`. `None` (default)
            takes `config.lowercase` when a config is given, else `True`.
        model_max_length: the tokenizer's `model_max_length` (default 4096, the BCN's default `bcn_max_length`).
        seed: seed of the fresh initialisation.
        **config_overrides: `CoveConfig` fields for the default config (e.g. `hidden_size=4`).

    Raises:
        ValueError: `config` together with `config_overrides` (set the fields on the config instead), `config`
            with a `lowercase` that disagrees with `config.lowercase`, an override of a field set here (`vocab_size`,
            `word_vector_dim`, `vocabulary_fingerprint`), a `vectors` matrix of the wrong shape, or MT-LSTM weights
            that do not fit.
    """
    derived = [name for name in _DERIVED_FIELDS if name in config_overrides]
    if derived:
        raise ValueError(
            f"config_overrides may not set {derived}: vocab_size, word_vector_dim and vocabulary_fingerprint come "
            f"from the tokenizer and the vectors"
        )
    if config is not None:
        if config_overrides:
            raise ValueError(
                f"create_cove_checkpoint got both a config and config overrides {sorted(config_overrides)}; set "
                f"those fields on the config instead"
            )
        if lowercase is not None and lowercase != config.lowercase:
            raise ValueError(
                f"lowercase={lowercase} disagrees with config.lowercase={config.lowercase}: the tokenizer and the "
                f"config must agree (omit lowercase to use the config's)"
            )
        lowercase = config.lowercase
    elif lowercase is None:
        lowercase = True
    tokenizer = build_cove_tokenizer(words, lowercase=lowercase, model_max_length=model_max_length)
    vocab_size = len(tokenizer)
    if vectors.dim() != 2 or vectors.shape[0] != vocab_size:
        raise ValueError(
            f"vector matrix has shape {tuple(vectors.shape)}, expected ({vocab_size}, dim): one row per tokenizer "
            f"entry ({len(SPECIAL_TOKENS)} special tokens + {len(words)} words)"
        )
    fingerprint = vocabulary_fingerprint(tokenizer)
    if config is None:
        config = CoveConfig(vocab_size=vocab_size, word_vector_dim=vectors.shape[1], lowercase=lowercase,
                            vocabulary_fingerprint=fingerprint, **config_overrides)
    else:
        config.vocab_size = vocab_size
        config.word_vector_dim = vectors.shape[1]
        config.vocabulary_fingerprint = fingerprint
    torch.manual_seed(seed)
    model = CoveModel(config)
    with torch.no_grad():
        model.embeddings.weight.copy_(vectors)
        model.embeddings.zero_special_rows()
    if lstm_state_dict is not None:
        missing, unexpected = model.load_state_dict(lstm_state_dict, strict=False)
        lstm_missing = [k for k in missing if k.startswith(SALESFORCE_PREFIX)]
        if lstm_missing or unexpected:
            raise ValueError(f"MT-LSTM weights do not fit: missing {lstm_missing}, unexpected {unexpected}")
    model.eval()
    return model, tokenizer
