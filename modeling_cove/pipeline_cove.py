"""Pipelines for CoVe models: the question-answering pipeline transformers 5.x no longer ships, token classification
for the word-level CoVe tokenizer, and a length-sorting feature-extraction pipeline.

`CoveFeatureExtractionPipeline` — `pipeline("feature-extraction")` for many texts at LSTM speed. The stock pipeline
tokenizes one text at a time and batches texts in arrival order, so a padded batch mixes short and long texts and the
encoder must pack it (slower than the fused kernel on CPU), and every text keeps its batch's padding in the output.
This one (for a list of texts) tokenizes the list in one call, runs the texts longest first, so each batch holds
near-equal lengths (`CoveModel` then runs them unpacked), returns the results in the input order, and cuts every result
to its own tokens: `(1, T_i, D)` per text, equal to running it alone (tested), whatever the batch size. A text without
tokens in a list gives `(1, 0, D)` (`[[]]` as lists), as `CoveModel.encode` gives `(0, D)`; alone it is an error, as
in the stock pipeline. Single texts and generators go through the stock code. `import modeling_cove` registers it as
"cove-feature-extraction": `pipeline("cove-feature-extraction", model=dir)`, or pass
`pipeline_class=CoveFeatureExtractionPipeline`. It is not recorded in saved checkpoints: a checkpoint's
`custom_pipelines` entry takes precedence over the locally registered name and demands `trust_remote_code=True` even
with the package installed; without the package, `model.encode` (remote code) is the fast path.

`CoveTokenClassificationPipeline` — `pipeline("token-classification")` for `CoveForTokenClassification`. The stock
pipeline fuses tokens into words only for tokenizers with a sub-word prefix (WordPiece, BPE); for the word-level CoVe
tokenizer it falls back to a heuristic (with a warning under `aggregation_strategy` first / average / max) that treats
any token not preceded by a space as a sub-word of the one before, so "Paris, France" gives the entity "paris ,", and
its `word` is the lower-cased token text. This one:

* on raw text, every token is a word of its own (the tokenizer splits words, never sub-words), so "," after "Paris"
  is a word with its own tag: it is inside an entity only when the model tags it inside one (I-X after X), as any
  other word; no warning;
* on pre-split input (a list of words with `is_split_into_words=True`), the later tokens of one word (`word_ids()`:
  "don't" -> "don", "'t") are that word's sub-words, which first / average / max fuse into one word;
* every token's and every entity's `word` is `text[start:end]`, the text as written (case kept; for pre-split input
  the words joined by `delimiter`, as the stock pipeline's offsets are);
* every `aggregation_strategy` (none, simple, first, average, max) works as documented in transformers;
* a tagger trained on BIOES labels (`cove-train-tagger --label-scheme bioes`; any label S-X or E-X) is grouped as an
  IOB2 tagger: simple / first / average / max read each token's (word's) S-X as B-X and E-X as I-X before grouping,
  so they give the entities a BIO tagger with the same predictions gives; none returns the model's own labels;
* a list of texts (or of pre-split sentences) runs longest first by characters, so that each batch holds texts of
  near-equal lengths and its biLSTMs pad or pack little; the results come back in the input order, each equal to
  the text run alone (tested);
* a text with no tokens (empty, whitespace only, or characters the tokenizer drops), alone or in a list, gives
  `[]`, as transformers' pipeline gives for BERT; it never reaches the model, which refuses a row without tokens;
  any other input that is not a text (None, a number, a non-string word of pre-split input) is a `TypeError`
  naming it (and its position in a list).

`import modeling_cove` registers it as the pipeline of the task "token-classification" (alias "ner") itself, so
`pipeline("token-classification", model=dir)` builds it for a CoVe tagger with no remote code. transformers keeps one
pipeline class per task, so the class serves every model: for a model that is not a CoVe model, `__new__` returns
transformers' own `TokenClassificationPipeline`, exactly what that task built before (BERT's taggers are unchanged).
A tagger checkpoint still records this class as `custom_pipelines["token-classification"]` and ships this file, for a
process without the package: there `pipeline("token-classification", model=dir, trust_remote_code=True)` runs the
copy in the folder. With the package imported, `CoveConfig` leaves that entry out when it reads a checkpoint (the
registry already maps the task to the same class, `configuration_cove.pipelines_needing_remote_code`), so
transformers does not ask for `trust_remote_code=True`. It is also registered as "cove-token-classification", the name
that worked before; docs/tagging.md has the details.

`CoveQuestionAnsweringPipeline` — extractive question answering with `CoveForQuestionAnswering` (DCN).
transformers removed its "question-answering" pipeline in 5.3 and blocks the name from 5.19
(docs/transformers_notes.md), so:

* a checkpoint saved by `CoveForQuestionAnswering.save_pretrained` records this class as `custom_pipelines` in
  config.json and carries this file, so `pipeline("question-answering", model=dir, trust_remote_code=True)` works
  in a process that does not have `modeling_cove` installed;
* `import modeling_cove` registers it locally as "cove-question-answering":
  `pipeline("cove-question-answering", model=dir)`;
* or instantiate it directly: `CoveQuestionAnsweringPipeline(model=model, tokenizer=tokenizer)`.

The "without the package" case is tested (tests/test_qa_pipeline.py) in a fresh `python -I -S` interpreter: `-I`
drops PYTHONPATH and the working directory from sys.path, `-S` skips site processing so the editable install's
`.pth` import hook never loads; only the site-packages folders are appended by hand, and the test asserts that
`importlib.util.find_spec("modeling_cove")` is None before calling `pipeline(...)`.

Call it as `qa(question=..., context=...)`, `qa({"question": ..., "context": ...})` or with a list of such dicts.
Each answer is `{"answer", "score", "start", "end"}` with character offsets into the original context
(`context[start:end] == answer`); `top_k > 1` returns a list of distinct spans. Contexts longer than `max_seq_len`
(default 384 tokens) are read in overlapping windows (`doc_stride` shared tokens; default
min(max_seq_len // 2, 128), as in the transformers 4.x pipeline) and the best span over all windows wins; spans obey
s <= e < s + `max_answer_len` tokens (default `config.dcn_max_answer_length`, 15).
A list of questions runs longest first (characters of question and context), so that a batch of windows holds
near-equal lengths; the answers come back in the input order.
"""

import types

import torch
from transformers.pipelines.base import ChunkPipeline, Dataset
from transformers.pipelines.feature_extraction import FeatureExtractionPipeline
from transformers.pipelines.token_classification import AggregationStrategy, TokenClassificationPipeline
from transformers.utils import logging

from .lstm_kernels import order_longest_first, to_device_async
from .modeling_cove_tagger import bioes_label_to_bio, casing_class, has_bioes_labels
from .squad_preprocessing import (
    DEFAULT_DOC_STRIDE,
    DEFAULT_MAX_LENGTH,
    DEFAULT_MAX_QUESTION_LENGTH,
    check_text,
    extract_answers,
    tokenize_windows,
)
from .tokenization_cove import check_tokenizer_matches

__all__ = ["CoveFeatureExtractionPipeline", "CoveQuestionAnsweringPipeline", "CoveTokenClassificationPipeline"]

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# what the stock token-classification chunks carry beside the model's inputs, from `preprocess` to `postprocess`
BOOKKEEPING = ("special_tokens_mask", "offset_mapping", "sentence", "is_last", "word_ids", "word_to_chars_map")
logger = logging.get_logger(__name__)


class CheckedTokenizer:
    """Pipeline mixin: refuses, when the pipeline is built, a tokenizer whose vocabulary is not the one the
    checkpoint's word vectors are indexed by (`check_tokenizer_matches`: another vocabulary maps words to other
    words' vectors and would give wrong answers without an error)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.tokenizer is not None:
            check_tokenizer_matches(self.model.config, self.tokenizer)


def run_longest_first(call, items: list, keys: list) -> list:
    """`call(list)` on `items` longest first by `keys`, its results put back in the order of `items`."""
    order = order_longest_first(keys)
    outputs = call([items[i] for i in order])
    if len(outputs) != len(items):  # one result per input, or the order could not be put back
        raise RuntimeError(f"the pipeline gave {len(outputs)} results for {len(items)} inputs")
    results = [None] * len(items)
    for position, i in enumerate(order):
        results[i] = outputs[position]
    return results


class WindowSpans:
    """A window's character span per token (None outside the context), carried from `preprocess` to `postprocess`
    as one object: the pipeline walks lists and tuples item by item to move tensors between devices (thousands of
    spans per batch), and leaves other objects as they are."""

    __slots__ = ("spans",)

    def __init__(self, spans: list):
        self.spans = spans


class CoveQuestionAnsweringPipeline(CheckedTokenizer, ChunkPipeline):
    """Extractive QA over a CoVe DCN checkpoint (see the module docstring); an empty list of inputs gives `[]`."""

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False

    def _sanitize_parameters(self, top_k=None, max_answer_len=None, max_seq_len=None, doc_stride=None,
                             max_question_len=None, **unknown):
        if unknown:
            raise TypeError(f"unknown question-answering arguments {sorted(unknown)}; accepted: top_k, "
                            f"max_answer_len, max_seq_len, doc_stride, max_question_len")
        preprocess, postprocess = {}, {}
        for name, value, target in (("max_seq_len", max_seq_len, preprocess), ("doc_stride", doc_stride, preprocess),
                                    ("max_question_len", max_question_len, preprocess),
                                    ("top_k", top_k, postprocess), ("max_answer_len", max_answer_len, postprocess)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "doc_stride" else 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            target[name] = value
        return preprocess, {}, postprocess

    def __call__(self, *args, **kwargs):
        """`qa(question=..., context=...)`, `qa({"question": q, "context": c})`, `qa([{...}, ...])` or
        `qa(question, context)`. Lists of questions and contexts (same length) are paired up."""
        if "question" in kwargs or "context" in kwargs:
            if args:
                raise ValueError("pass the inputs either positionally or as question=/context=, not both")
            question, context = kwargs.pop("question", None), kwargs.pop("context", None)
            if isinstance(question, (list, tuple)) or isinstance(context, (list, tuple)):
                if not (isinstance(question, (list, tuple)) and isinstance(context, (list, tuple))) or \
                        len(question) != len(context):
                    raise ValueError("lists of questions and contexts must have the same length")
                inputs = [{"question": q, "context": c} for q, c in zip(question, context)]
            else:
                inputs = {"question": question, "context": context}
        elif len(args) == 1:
            inputs = args[0]
        elif len(args) == 2:
            inputs = {"question": args[0], "context": args[1]}
        else:
            raise ValueError("question answering needs a question and a context: qa(question=..., context=...)")
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        if isinstance(inputs, list) and not inputs:
            return []  # a list in, a list of as many answers out
        if isinstance(inputs, list) and len(inputs) > 1 and all(isinstance(x, dict) for x in inputs):
            stock = super().__call__
            return run_longest_first(lambda items: stock(items, **kwargs), inputs, self.length_keys(inputs))
        return super().__call__(inputs, **kwargs)

    @staticmethod
    def length_keys(inputs: list) -> list:
        """The length a list's question runs by (longest first): characters of its question and context, which
        set its windows' token counts closely enough to batch neighbours together, at no tokenizer cost."""
        return [len(str(x.get("question", ""))) + len(str(x.get("context", ""))) for x in inputs]

    def preprocess(self, inputs, max_seq_len=DEFAULT_MAX_LENGTH, doc_stride=None,
                   max_question_len=DEFAULT_MAX_QUESTION_LENGTH):
        """One model input per window of the context. `doc_stride` defaults to min(max_seq_len // 2, 128), so that
        `max_seq_len` alone can be lowered; an explicit `doc_stride` too large for `max_seq_len` raises ValueError."""
        if doc_stride is None:
            doc_stride = min(max_seq_len // 2, DEFAULT_DOC_STRIDE)
        if not isinstance(inputs, dict) or "question" not in inputs or "context" not in inputs:
            raise ValueError(f"each input must be a dict with 'question' and 'context', got {inputs!r:.80}")
        question = check_text(inputs["question"], "question")
        context = check_text(inputs["context"], "context")
        encoding, truncated = tokenize_windows(self.tokenizer, [question], [context], max_seq_len, doc_stride,
                                               max_question_len)
        if truncated:
            logger.warning(f"the question has more than max_question_len={max_question_len} tokens and was cut "
                           f"there: {question[:80]!r}...")
        num_windows = len(encoding["input_ids"])
        for w in range(num_windows):
            sequence_ids = encoding.sequence_ids(w)
            offsets = [tuple(o) if s == 1 else None for o, s in zip(encoding["offset_mapping"][w], sequence_ids)]
            window = {k: torch.tensor([encoding[k][w]], dtype=torch.long) for k in MODEL_INPUTS}
            yield {**window, "offsets": WindowSpans(offsets), "context": context, "is_last": w == num_windows - 1}

    def _forward(self, inputs):
        output = self.model(**{k: inputs[k] for k in MODEL_INPUTS})
        return {"start_logits": output.start_logits, "end_logits": output.end_logits,
                "offsets": inputs["offsets"], "context": inputs["context"], "is_last": inputs["is_last"]}

    def postprocess(self, outputs, top_k=1, max_answer_len=None):
        if max_answer_len is None:
            max_answer_len = getattr(self.model.config, "dcn_max_answer_length", 15)
        windows = [(o["start_logits"][0], o["end_logits"][0], o["offsets"].spans) for o in outputs]
        answers = extract_answers(outputs[0]["context"], windows, max_answer_len, top_k)
        return answers[0] if top_k == 1 else answers


class PreTokenized(dict):
    """One text's tokenizer output (lists of ids), made by `CoveFeatureExtractionPipeline.__call__`."""


class CoveFeatureExtractionPipeline(CheckedTokenizer, FeatureExtractionPipeline):
    """Feature extraction that runs a list of texts in length order (see the module docstring); an empty list gives
    `[]`, a list holding anything but texts a TypeError naming the items."""

    def __call__(self, *args, **kwargs):
        texts = args[0] if len(args) == 1 else None
        if isinstance(texts, (list, tuple)):
            if not texts:
                return []  # a list in, a list of as many results out
            not_texts = [i for i, text in enumerate(texts) if not isinstance(text, str)]
            if not_texts:
                raise TypeError(f"feature extraction takes a text or a list of texts: item(s) {not_texts[:10]} of "
                                f"{len(texts)} are not strings (the first: {texts[not_texts[0]]!r:.80})")
        if not isinstance(texts, (list, tuple)):
            return super().__call__(*args, **kwargs)

        def fresh(kwargs):  # the stock _sanitize_parameters writes into tokenize_kwargs: each call its own copy
            return {**kwargs, "tokenize_kwargs": dict(kwargs["tokenize_kwargs"])} if kwargs.get("tokenize_kwargs") \
                else kwargs

        tokenize_kwargs = {**self._preprocess_params, **self._sanitize_parameters(**fresh(kwargs))[0]}
        encodings = self.tokenizer(list(texts), **tokenize_kwargs)  # one batched call, lists of ids per text
        keys = [k for k in encodings.keys() if k in ("input_ids", "attention_mask", "token_type_ids")]
        lengths = [len(ids) for ids in encodings["input_ids"]]
        # longest first: batches of near-equal lengths; texts without tokens never reach the model
        order = [i for i in order_longest_first(lengths) if lengths[i] > 0]
        items = [PreTokenized({k: encodings[k][i] for k in keys}) for i in order]
        outputs = super().__call__(items, **fresh(kwargs)) if items else []
        results = [None] * len(texts)
        for position, i in enumerate(order):
            results[i] = outputs[position]
        if len(order) < len(texts):  # texts without tokens: (1, 0, D)
            return_tensors = kwargs.get("return_tensors", self._postprocess_params.get("return_tensors", False))
            empty = torch.zeros(1, 0, self.model.config.output_size, device=self.device)
            results = [r if r is not None else (empty if return_tensors else [[]]) for r in results]
        return results

    def preprocess(self, inputs, **tokenize_kwargs):
        if isinstance(inputs, PreTokenized):
            return {k: torch.tensor([v], dtype=torch.long) for k, v in inputs.items()}  # (1, T) each
        return super().preprocess(inputs, **tokenize_kwargs)

    def postprocess(self, model_outputs, return_tensors=False):
        hidden = model_outputs[0]  # (1, T_batch, D): this text's row of its padded batch
        mask = model_outputs.get("attention_mask") if hasattr(model_outputs, "get") else None
        if mask is not None:
            hidden = hidden[:, : int(mask.sum())]  # (1, T_i, D): its own tokens only, as if run alone
        return hidden if return_tensors else hidden.tolist()


def span_in_sentence(start: int, end: int, word, word_to_chars_map) -> tuple:
    """A token's (start, end) in the pipeline's sentence: for pre-split input the tokenizer's offsets are within the
    token's word (`word`, an index into `word_to_chars_map`), for raw text already in the sentence."""
    if word is None or word_to_chars_map is None:
        return start, end
    shift = word_to_chars_map[word][0]
    return start + shift, end + shift


def is_cove_model(model) -> bool:
    """Whether `model` is a CoVe model (the installed classes or their remote-code copies alike: by config type)."""
    return getattr(getattr(model, "config", None), "model_type", None) == "cove"


def check_tagging_input(item, where: str, split: bool) -> None:
    """`TypeError` naming `item` (`where`: its place, e.g. "input 2") unless it is a text (str) or, with `split`
    (`is_split_into_words=True`), a list of words (str)."""
    if not split:
        if not isinstance(item, str):
            raise TypeError(f"{where} is {item!r:.80} ({type(item).__name__}), not a text (str)")
        return
    if not isinstance(item, list):
        raise TypeError(f"{where} is {item!r:.80} ({type(item).__name__}), not a list of words "
                        "(is_split_into_words=True)")
    for index, word in enumerate(item):
        if not isinstance(word, str):
            raise TypeError(f"word {index} of {where} is {word!r:.80} ({type(word).__name__}), not a str")


def check_tagging_inputs(inputs, split: bool) -> None:
    """`check_tagging_input` for each input of a pipeline call: `inputs` is one text or a list of them, or with
    `split` one list of words or a list of such lists. An empty list is left to the stock call (its error)."""
    if isinstance(inputs, (list, tuple)) and not inputs:
        return
    several = isinstance(inputs, (list, tuple)) and (all(isinstance(x, list) for x in inputs) if split else True)
    if not several:
        check_tagging_input(inputs, "the input", split)
        return
    for index, item in enumerate(inputs):
        check_tagging_input(item, f"input {index}", split)


class CoveTokenClassificationPipeline(CheckedTokenizer, TokenClassificationPipeline):
    """Token classification over a CoVe tagger with word-level tokens (see the module docstring): on raw text each
    token is a word; on pre-split input the later tokens of a word are its sub-words; `word` is the text as written;
    a text without tokens gives `[]`. Built for a model that is not a CoVe model, it is transformers' own
    `TokenClassificationPipeline` (`import modeling_cove` registers this class as the "token-classification" task's)."""

    def __new__(cls, *args, **kwargs):
        model = kwargs.get("model", args[0] if args else None)
        if model is not None and not is_cove_model(model):
            return TokenClassificationPipeline(*args, **kwargs)  # not an instance of cls: __init__ is not run again
        return super().__new__(cls)

    def __call__(self, inputs, **kwargs):
        """The stock call, with each input checked first (`check_tagging_inputs`); a list of texts (or of pre-split
        sentences, `is_split_into_words=True`) runs longest first (characters), so that each batch pads little, and
        its results come back in the input order. A dataset or a generator goes to the stock call as it is (its
        items are checked one by one in `preprocess`)."""
        split = kwargs.get("is_split_into_words", False)
        if not isinstance(inputs, types.GeneratorType) and not (Dataset is not None and isinstance(inputs, Dataset)):
            check_tagging_inputs(inputs, split)
        if isinstance(inputs, (list, tuple)) and len(inputs) > 1 and kwargs.get("offset_mapping") is None and \
                all(isinstance(x, list) if split else isinstance(x, str) for x in inputs):
            stock = super().__call__
            return run_longest_first(lambda items: stock(items, **kwargs), list(inputs), self.length_keys(inputs))
        return super().__call__(inputs, **kwargs)

    @staticmethod
    def length_keys(inputs: list) -> list:
        """The length a list's text runs by (longest first): its characters (words joined by spaces when pre-split),
        close enough to its token count to batch neighbours together, at no tokenizer cost."""
        return [len(x) if isinstance(x, str) else sum(len(str(word)) + 1 for word in x) for x in inputs]

    def preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        """The stock chunks, each input checked first (`check_tagging_input`: the items of a dataset or generator
        reach the pipeline only here); a text without tokens keeps `offset_mapping` of shape (1, 0, 2), as other
        texts', so that it pads into a batch with them. For a tagger that reads each token's casing
        (`config.tagger_case_dim > 0`), each chunk also carries `case_ids` (1, T): `casing_class` of the text each
        token covers, as written."""
        check_tagging_input(sentence, "an input", preprocess_params.get("is_split_into_words", False))
        reads_case = getattr(self.model.config, "tagger_case_dim", 0) > 0
        text = None
        for model_inputs in super().preprocess(sentence, offset_mapping=offset_mapping, **preprocess_params):
            text = model_inputs["sentence"] if model_inputs["sentence"] is not None else text
            offsets = model_inputs.get("offset_mapping")
            if isinstance(offsets, torch.Tensor) and offsets.numel() == 0:
                model_inputs["offset_mapping"] = offsets.reshape(1, 0, 2)
            # read here, on the host copy: `_forward` then needs no read of the device mask to find empty texts
            mask = model_inputs.get("attention_mask")  # absent if the tokenizer was asked for none
            model_inputs["has_tokens"] = bool(mask.any()) if mask is not None else model_inputs["input_ids"].numel() > 0
            if reads_case:
                word_ids, word_chars = model_inputs.get("word_ids"), model_inputs.get("word_to_chars_map")
                cases = []
                for index, (start, end) in enumerate(model_inputs["offset_mapping"][0].tolist()):
                    word = word_ids[index] if word_ids is not None else None
                    start, end = span_in_sentence(start, end, word, word_chars)
                    cases.append(casing_class(text[start:end]))
                model_inputs["case_ids"] = torch.tensor([cases], dtype=torch.long)
            yield model_inputs

    def _forward(self, model_inputs):
        """The stock forward, except that rows without tokens (texts without tokens) never reach the model, which
        refuses them: the model runs on the other rows, if any, and the empty rows' logits are zeros at positions
        that are all padding (special tokens for `postprocess`), so their results are `[]`. Which rows are empty
        comes from `preprocess` (`has_tokens`, read on the host), so a batch costs the device no read beyond the
        model's own."""
        has_tokens = model_inputs.pop("has_tokens")
        rows = has_tokens if isinstance(has_tokens, list) else [has_tokens]  # a batch's flags, or one text's
        if all(rows):
            return super()._forward(model_inputs)
        outputs = {key: model_inputs.pop(key, None) for key in BOOKKEEPING}
        ids = model_inputs["input_ids"]  # (B, T)
        logits = torch.zeros(len(rows), ids.shape[1], self.model.config.num_labels, device=ids.device,
                             dtype=self.model.dtype)  # (B, T, labels)
        kept = [i for i, row in enumerate(rows) if row]
        if kept:
            kept = to_device_async(torch.tensor(kept), ids.device)  # the rows with tokens, sent without a wait
            output = self.model(**{key: value.index_select(0, kept) if isinstance(value, torch.Tensor) else value
                                   for key, value in model_inputs.items()})
            tagged = output["logits"] if isinstance(output, dict) else output[0]
            logits.index_copy_(0, kept, tagged.to(logits.dtype))
        return {"logits": logits, **outputs, **model_inputs}

    def gather_pre_entities(self, sentence, input_ids, scores, offset_mapping, special_tokens_mask,
                            aggregation_strategy, word_ids=None, word_to_chars_map=None) -> list:
        """One entry per non-special token: its scores, character span in `sentence`, and whether it continues the
        word of the token before it (only for pre-split input, by `word_ids`)."""
        if offset_mapping is None:
            raise ValueError("CoveTokenClassificationPipeline needs character offsets: use the checkpoint's fast "
                             "CoVe tokenizer")
        # plain lists once: indexing a tensor or an array row by row costs more than the rest of this loop
        offsets = offset_mapping.tolist() if hasattr(offset_mapping, "tolist") else offset_mapping
        special = special_tokens_mask.tolist() if hasattr(special_tokens_mask, "tolist") else special_tokens_mask
        pre_entities, previous_word = [], None
        for index, token_scores in enumerate(scores):
            if special[index]:
                continue
            word_index = word_ids[index] if word_ids is not None else None
            start, end = span_in_sentence(int(offsets[index][0]), int(offsets[index][1]), word_index,
                                          word_to_chars_map)
            pre_entities.append({"word": sentence[start:end], "scores": token_scores, "start": start, "end": end,
                                 "index": index, "is_subword": word_index is not None and word_index == previous_word})
            previous_word = word_index
        return pre_entities

    def group_entities(self, entities: list) -> list:
        """The stock grouping of tokens (simple) or words (first / average / max) into entities, for a tagger whose
        labels are BIOES (`has_bioes_labels`) after each one's label is read as IOB2 (`bioes_label_to_bio`: S-X ->
        B-X, E-X -> I-X), so that its entities are grouped exactly as a BIO tagger's. transformers' grouping knows
        only B- and I-: it would merge two one-word entities S-X S-X into one. Not called for aggregation_strategy
        none, whose results keep the model's own labels (S-X, E-X)."""
        if has_bioes_labels(self.model.config.id2label.values()):
            entities = [{**entity, "entity": bioes_label_to_bio(entity["entity"])} for entity in entities]
        return super().group_entities(entities)

    def postprocess(self, all_outputs, aggregation_strategy=AggregationStrategy.NONE, ignore_labels=None):
        """The stock grouping, then each result's `word` set to the text it covers (`text[start:end]`)."""
        entities = super().postprocess(all_outputs, aggregation_strategy=aggregation_strategy,
                                       ignore_labels=ignore_labels)
        sentence = all_outputs[0]["sentence"]
        for entity in entities:
            entity["word"] = sentence[entity["start"]:entity["end"]]
        return entities
