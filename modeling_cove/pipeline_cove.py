"""Pipelines for CoVe models that transformers 5.x no longer ships.

`CoveQuestionAnsweringPipeline` — extractive question answering with `CoveForQuestionAnswering` (DCN).
transformers removed its "question-answering" pipeline in 5.3 and blocks the name from 5.19 (HF_NOTES.md), so:

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
(`context[start:end] == answer`); `top_k > 1` returns a list. Contexts longer than `max_seq_len` are read in
overlapping windows (`doc_stride` shared tokens) and the best span over all windows wins; spans obey
s <= e < s + `max_answer_len` tokens (default `config.dcn_max_answer_length`, 15).
"""

import torch
from transformers.pipelines.base import ChunkPipeline
from transformers.utils import logging

from .squad_preprocessing import (
    DEFAULT_DOC_STRIDE,
    DEFAULT_MAX_LENGTH,
    DEFAULT_MAX_QUESTION_LENGTH,
    check_text,
    extract_answers,
    tokenize_windows,
)

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
logger = logging.get_logger(__name__)


class CoveQuestionAnsweringPipeline(ChunkPipeline):
    """Extractive QA over a CoVe DCN checkpoint (see the module docstring)."""

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
            if not isinstance(value, int) or value < (0 if name == "doc_stride" else 1):
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
        return super().__call__(inputs, **kwargs)

    def preprocess(self, inputs, max_seq_len=DEFAULT_MAX_LENGTH, doc_stride=DEFAULT_DOC_STRIDE,
                   max_question_len=DEFAULT_MAX_QUESTION_LENGTH):
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
            yield {**window, "offsets": offsets, "context": context, "is_last": w == num_windows - 1}

    def _forward(self, inputs):
        output = self.model(**{k: inputs[k] for k in MODEL_INPUTS})
        return {"start_logits": output.start_logits, "end_logits": output.end_logits,
                "offsets": inputs["offsets"], "context": inputs["context"], "is_last": inputs["is_last"]}

    def postprocess(self, outputs, top_k=1, max_answer_len=None):
        if max_answer_len is None:
            max_answer_len = getattr(self.model.config, "dcn_max_answer_length", 15)
        windows = [(o["start_logits"][0], o["end_logits"][0], o["offsets"]) for o in outputs]
        answers = extract_answers(outputs[0]["context"], windows, max_answer_len, top_k)
        return answers[0] if top_k == 1 else answers
