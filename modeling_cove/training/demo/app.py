"""The CoVe demo: a Gradio app over saved CoVe models, one tab per model kind.

- Classifier (BCN): the label and every label's score of a text or a pair, with the biattention maps of eqs. 9-10
  (`output_attentions=True`) drawn as heat maps.
- Question answering (DCN): the answer highlighted in its context, with the start and end distributions.
- Tagger: the tagged spans highlighted in the text.
- Words in context: a word's nearest neighbours, CoVe against the word vectors, over a named corpus: the word in two
  sentences, each with its CoVe neighbours (occurrences of words in the corpus's sentences) and the one list of
  word-vector neighbours (the vocabulary) that does not depend on the sentence.

Each model is loaded as a user loads it: `pipeline("text-classification")`, the question-answering pipeline,
`pipeline("token-classification")`, `AutoModel` / `AutoTokenizer`; the page calls the pipelines and reads the maps and
distributions off the same models. A tab without a model says so and names the command that makes one. Bad input
is a message on the page (`gr.Error`), never a traceback.

This file imports nothing of the package but the optional `import modeling_cove`: it is also, as it is, the app.py
of the Space `cove-push-to-hub --space` writes, where the models come from the Hub by id with their own code
(`trust_remote_code=True`). gradio is imported only by `build_app`, so the rest runs without the `demo` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

try:  # the package registers CoVe with the Auto classes and pipelines; a Space runs the checkpoints' own code
    import modeling_cove  # noqa: F401

    QA_TASK = "cove-question-answering"
except ImportError:  # pragma: no cover - only where the package is not installed (a Space)
    QA_TASK = "question-answering"

__all__ = ["ClassifierDemo", "CorpusNeighbours", "DemoInputError", "DemoModels", "MAKES", "QuestionAnsweringDemo",
           "TaggerDemo", "build_app", "load_demos"]

# per model kind: the tab's title, the model's name and what makes such a model (named on a tab without one)
MAKES = {
    "classifier": ("Classifier (BCN)", "BCN classifier", "`cove-main` (its BCN: runs/main/publish/sentiment/hub) or "
                                                         "`cove-train-classifier`"),
    "qa": ("Question answering (DCN)", "DCN question-answering", "`cove-train-qa`"),
    "tagger": ("Tagger", "tagger", "`cove-train-tagger`"),
    "encoder": ("Words in context", "CoVe encoder", "`cove-main` (its encoder: runs/main/pretrain/encoder) or "
                                                    "`cove-export-encoder`"),
}
FLAGS = {"classifier": "--classifier", "qa": "--qa", "tagger": "--tagger", "encoder": "--encoder"}
NEIGHBOURS = 8  # rows per neighbour table


class DemoInputError(ValueError):
    """Input the page cannot answer (shown there as a message)."""


@dataclass
class DemoModels:
    """Where each tab's model is (a folder or a Hub id; None: the tab says how to make one), the corpus of the
    words-in-context tab (its texts and a name the page shows), and whether to run the checkpoints' own code."""

    classifier: Optional[str] = None
    qa: Optional[str] = None
    tagger: Optional[str] = None
    encoder: Optional[str] = None
    corpus: list = field(default_factory=list)
    corpus_name: str = ""
    trust_remote_code: bool = False


def figure_image(figure) -> np.ndarray:
    """A matplotlib figure as an RGB image (H, W, 3) of uint8, the figure closed after drawing."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
    plt.close(figure)
    return image


def text_of(value, name: str, required: bool = True) -> Optional[str]:
    """`value` stripped, or DemoInputError naming the field when it is required and empty."""
    text = (value or "").strip()
    if not text:
        if required:
            raise DemoInputError(f"Please type a {name}.")
        return None
    return text


def pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display: images only
    import matplotlib.pyplot as plt

    return plt


class ClassifierDemo:
    """The BCN through `pipeline("text-classification")`: label and scores; the biattention maps from its model."""

    def __init__(self, path: str, trust_remote_code: bool = False):
        from transformers import pipeline

        self.pipe = pipeline("text-classification", model=path, trust_remote_code=trust_remote_code)
        self.pair = bool(getattr(self.pipe.model.config, "bcn_pair_input", False))

    def __call__(self, text: str, text_pair: str = ""):
        """`(label, {label: score}, heat map image)` for a text, or a pair when `text_pair` is given."""
        text = text_of(text, "text")
        text_pair = text_of(text_pair, "second text", required=self.pair)
        inputs = {"text": text, "text_pair": text_pair} if text_pair else text
        try:
            scores = self.pipe(inputs, top_k=None)
        except ValueError as err:  # the model's own checks (e.g. a text without words), worded for the user
            raise DemoInputError(str(err)) from None
        scores = {row["label"]: float(row["score"]) for row in scores}
        label = max(scores, key=scores.get)
        return label, scores, self.heat_map(text, text_pair)

    def heat_map(self, text: str, text_pair: Optional[str]):
        """The biattention maps A_x and A_y (eqs. 9-10) the model returns with `output_attentions=True`."""
        encoded = self.pipe.tokenizer(text, text_pair, return_tensors="pt")
        with torch.no_grad():
            attentions = self.pipe.model(**encoded, output_attentions=True).attentions
        tokens = encoded.tokens()
        sequence = encoded.sequence_ids(0)
        x_tokens = [t for t, s in zip(tokens, sequence) if s == 0]
        y_tokens = [t for t, s in zip(tokens, sequence) if s == 1] or x_tokens
        title = ("A_x (eq. 9): over the first text's words (rows), per word of the second" if text_pair else
                 "A_x (eq. 9), y = x: over the text's words (rows), per word (columns)")
        maps = [(title, attentions[0][0], x_tokens, y_tokens)]
        if text_pair:
            maps.append(("A_y (eq. 10): over the second text's words (rows), per word of the first", attentions[1][0],
                         y_tokens, x_tokens))
        return draw_maps(maps)


def draw_maps(maps: list):
    """One heat map per `(title, matrix (rows, columns), row words, column words)`; each column sums to 1."""
    plt = pyplot()
    size = max(len(m[2]) for m in maps) + max(len(m[3]) for m in maps)
    width, height = min(4 + 0.35 * size, 16) * len(maps) / 1.3, min(4 + 0.15 * size, 16)
    figure, axes = plt.subplots(1, len(maps), figsize=(width, height), squeeze=False)
    for axis, (title, matrix, rows, columns) in zip(axes[0], maps):
        values = matrix[: len(rows), : len(columns)].float().numpy()
        image = axis.imshow(values, cmap="viridis", vmin=0.0, vmax=max(float(values.max()), 1e-6), aspect="auto")
        axis.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=8)
        axis.set_yticks(range(len(rows)), rows, fontsize=8)
        axis.set_title(title, fontsize=9)
        figure.colorbar(image, ax=axis, fraction=0.046)
    figure.suptitle("BCN biattention", fontsize=10)
    return figure_image(figure)


class QuestionAnsweringDemo:
    """The DCN through the question-answering pipeline; the start/end distributions from its model, over the
    pipeline's own window of the context that holds the answer."""

    def __init__(self, path: str, trust_remote_code: bool = False):
        from transformers import pipeline

        task = "question-answering" if trust_remote_code else QA_TASK
        self.pipe = pipeline(task, model=path, trust_remote_code=trust_remote_code)

    def __call__(self, question: str, context: str):
        """`(highlighted context, answer record, distributions image)`."""
        question, context = text_of(question, "question"), text_of(context, "context")
        try:
            answer = self.pipe(question=question, context=context)
        except ValueError as err:
            raise DemoInputError(str(err)) from None
        start, end = int(answer["start"]), int(answer["end"])
        spans = [(context[:start], None), (context[start:end], "answer"), (context[end:], None)]
        record = {"answer": answer["answer"], "score": round(float(answer["score"]), 4), "start": start, "end": end}
        return [(text, label) for text, label in spans if text], record, self.distributions(question, context, start)

    def distributions(self, question: str, context: str, answer_start: int):
        """P(start) and P(end) over the context's words of the window that holds the answer (softmax of the
        model's start and end scores over the context positions)."""
        chosen = None
        for window in self.pipe.preprocess({"question": question, "context": context}):
            spans = window["offsets"].spans
            chosen = (window, spans)
            if any(span is not None and span[0] <= answer_start < span[1] for span in spans):
                break
        window, spans = chosen
        inputs = {key: window[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
        with torch.no_grad():
            output = self.pipe.model(**inputs)
        positions = [i for i, span in enumerate(spans) if span is not None]
        words = [context[spans[i][0]:spans[i][1]] for i in positions]
        start = torch.softmax(output.start_logits[0, positions].float(), dim=-1).numpy()
        end = torch.softmax(output.end_logits[0, positions].float(), dim=-1).numpy()
        plt = pyplot()
        figure, axes = plt.subplots(2, 1, figsize=(min(3 + 0.4 * len(words), 16), 4.5), sharex=True)
        for axis, values, name, colour in ((axes[0], start, "P(start)", "tab:blue"),
                                           (axes[1], end, "P(end)", "tab:orange")):
            axis.bar(range(len(words)), values, color=colour)
            axis.set_ylabel(name)
            axis.set_ylim(0, max(1e-6, float(values.max())) * 1.1)
        axes[1].set_xticks(range(len(words)), words, rotation=60, ha="right", fontsize=8)
        figure.suptitle("DCN start and end distributions over the context", fontsize=10)
        return figure_image(figure)


class TaggerDemo:
    """The tagger through `pipeline("token-classification", aggregation_strategy="simple")`."""

    def __init__(self, path: str, trust_remote_code: bool = False):
        from transformers import pipeline

        self.pipe = pipeline("token-classification", model=path, aggregation_strategy="simple",
                             trust_remote_code=trust_remote_code)

    def __call__(self, text: str):
        """`(highlighted text, entities)`: the text cut at the entities, each entity with its label."""
        text = text_of(text, "text")
        entities = self.pipe(text)
        pieces, position = [], 0
        for entity in entities:
            if entity["start"] > position:
                pieces.append((text[position:entity["start"]], None))
            pieces.append((text[entity["start"]:entity["end"]], entity["entity_group"]))
            position = entity["end"]
        if position < len(text):
            pieces.append((text[position:], None))
        rows = [[e["entity_group"], e["word"], round(float(e["score"]), 4), e["start"], e["end"]] for e in entities]
        return pieces, rows


class CorpusNeighbours:
    """A word's nearest neighbours in context: its CoVe vector (the encoder's top layer at the word, in a sentence)
    against every word occurrence of a corpus, beside its word vector against the vocabulary's. CoVe vectors are
    compared after subtracting the corpus's mean CoVe vector (cosine of the centred vectors): the LSTM's states share a
    large common component, under which every raw cosine is close to 1 and the order says little."""

    def __init__(self, path: str, corpus: list, corpus_name: str, trust_remote_code: bool = False,
                 batch_size: int = 64):
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        self.model = AutoModel.from_pretrained(path, trust_remote_code=trust_remote_code).eval()
        self.corpus = [text for text in corpus if text.strip()]
        self.corpus_name = corpus_name
        self.batch_size = batch_size
        self.index = None  # (centred unit vectors (N, D), [(sentence, start, end)], mean (D,)), on the first question

    def states(self, texts: list) -> tuple:
        """`(word vectors, top CoVe layer, offsets)` of a batch: (B, T, ·) each, and the tokenizer's encoding."""
        encoded = self.tokenizer(texts, padding=True, return_offsets_mapping=True, return_tensors="pt")
        offsets = encoded.pop("offset_mapping")
        with torch.no_grad():
            hidden = self.model(**encoded, output_hidden_states=True).hidden_states
        return hidden[0], hidden[-1], offsets, encoded["attention_mask"]

    def corpus_index(self) -> tuple:
        if self.index is None:
            if not self.corpus:
                raise DemoInputError("The corpus has no texts: start the demo with --corpus FILE.")
            vectors, places = [], []
            for first in range(0, len(self.corpus), self.batch_size):
                texts = self.corpus[first:first + self.batch_size]
                _, top, offsets, mask = self.states(texts)
                for row, text in enumerate(texts):
                    for position in range(int(mask[row].sum())):
                        vectors.append(top[row, position])
                        places.append((first + row, *map(int, offsets[row, position])))
            if not vectors:
                raise DemoInputError("The corpus's texts hold no words: start the demo with --corpus FILE.")
            matrix = torch.stack(vectors).float()
            mean = matrix.mean(dim=0)
            self.index = (torch.nn.functional.normalize(matrix - mean, dim=-1), places, mean)
        return self.index

    def word_in(self, word: str, sentence: str, which: str) -> tuple:
        """`(word vector, CoVe vector)` of the first occurrence of `word` in `sentence` (case ignored)."""
        vectors, top, offsets, mask = self.states([sentence])
        for position in range(int(mask[0].sum())):
            start, end = map(int, offsets[0, position])
            if sentence[start:end].lower() == word.lower():
                return vectors[0, position], top[0, position]
        raise DemoInputError(f"{which} does not have the word {word!r} as a word of its own: {sentence!r}")

    def cove_neighbours(self, vector: torch.Tensor, sentence: str) -> list:
        """The corpus occurrences nearest to `vector`: `[cosine, word, sentence with the word in [brackets]]`
        (the occurrence at the same place of the same sentence left out)."""
        matrix, places, mean = self.corpus_index()
        similarities = matrix @ torch.nn.functional.normalize(vector.float() - mean, dim=-1)
        rows = []
        for i in torch.argsort(similarities, descending=True).tolist():
            number, start, end = places[i]
            text = self.corpus[number]
            if text == sentence and float(similarities[i]) > 1 - 1e-5:
                continue
            rows.append([round(float(similarities[i]), 4), text[start:end],
                         f"{text[:start]}[{text[start:end]}]{text[end:]}"])
            if len(rows) == NEIGHBOURS:
                break
        return rows

    def vector_neighbours(self, word: str, vector: torch.Tensor) -> list:
        """The vocabulary's words whose word vectors are nearest to `vector` (the word itself, the special tokens and
        rows of zeros left out): `[cosine, word]`."""
        if not bool(vector.any()):
            return [[0.0, f"({word!r} has no word vector: the unknown word's zeros)"]]
        table = self.model.get_input_embeddings().weight.detach().float()
        norms = table.norm(dim=-1)
        similarities = (table @ vector.float()) / (norms * vector.float().norm()).clamp_min(1e-12)
        similarities[norms == 0] = -2.0
        similarities[self.tokenizer.all_special_ids] = -2.0
        rows = []
        for i in torch.argsort(similarities, descending=True).tolist():
            token = self.tokenizer.convert_ids_to_tokens(i)
            if similarities[i] <= -2.0:
                break
            if token != word.lower():
                rows.append([round(float(similarities[i]), 4), token])
            if len(rows) == NEIGHBOURS:
                break
        return rows

    def __call__(self, word: str, sentence_a: str, sentence_b: str = ""):
        """`(CoVe neighbours in sentence A, in sentence B (or []), word-vector neighbours)`."""
        word = text_of(word, "word")
        if len(word.split()) != 1:
            raise DemoInputError(f"Please type one word, not {word!r}.")
        sentence_a = text_of(sentence_a, "sentence (A)")
        sentence_b = text_of(sentence_b, "second sentence (B)", required=False)
        vector, cove_a = self.word_in(word, sentence_a, "Sentence A")
        cove_b = self.word_in(word, sentence_b, "Sentence B")[1] if sentence_b else None
        return (self.cove_neighbours(cove_a, sentence_a),
                self.cove_neighbours(cove_b, sentence_b) if cove_b is not None else [],
                self.vector_neighbours(word, vector))


def load_demos(models: DemoModels) -> dict:
    """`{kind: demo}` for each model kind whose model is given (loaded now, so a wrong folder fails at start)."""
    remote = models.trust_remote_code
    demos = {}
    if models.classifier:
        demos["classifier"] = ClassifierDemo(models.classifier, remote)
    if models.qa:
        demos["qa"] = QuestionAnsweringDemo(models.qa, remote)
    if models.tagger:
        demos["tagger"] = TaggerDemo(models.tagger, remote)
    if models.encoder:
        demos["encoder"] = CorpusNeighbours(models.encoder, models.corpus, models.corpus_name, remote)
    return demos


def shown(call):
    """`call` for a Gradio event: DemoInputError (and the pipelines' ValueError/TypeError) as `gr.Error`, a message
    on the page."""
    import gradio as gr

    def run(*args):
        try:
            return call(*args)
        except (ValueError, TypeError) as err:
            raise gr.Error(str(err)) from None

    return run


def missing_tab(kind: str):
    import gradio as gr

    _, name, command = MAKES[kind]
    gr.Markdown(f"No {name} model was given. Make one with {command}, then start the demo with "
                f"`cove-demo {FLAGS[kind]} FOLDER`.", elem_id=f"{kind}-missing")


def classifier_tab(demo: ClassifierDemo):
    import gradio as gr

    gr.Markdown("The BCN's label and scores, and its biattention (eqs. 9-10): for a single text, the text attends "
                "to itself" + (" (this model reads pairs: give both texts)." if demo.pair else "; give a second "
                                                                                            "text for a pair."))
    text = gr.Textbox(label="Text", elem_id="classifier-text", placeholder="The soup was really delicious .")
    pair = gr.Textbox(label="Second text (pair)", elem_id="classifier-pair",
                      placeholder="(a pair model: the hypothesis) Someone enjoyed the meal .")
    button = gr.Button("Classify", elem_id="classifier-submit")
    label = gr.Textbox(label="Label", elem_id="classifier-label", interactive=False)
    scores = gr.Label(label="Scores", elem_id="classifier-scores")
    heat_map = gr.Image(label="Biattention", type="numpy", elem_id="classifier-heatmap", interactive=False)
    button.click(shown(demo), [text, pair], [label, scores, heat_map], api_name="classify")


def qa_tab(demo: QuestionAnsweringDemo):
    import gradio as gr

    question = gr.Textbox(label="Question", elem_id="qa-question", placeholder="Who won the game?")
    context = gr.Textbox(label="Context", lines=4, elem_id="qa-context", placeholder="The Broncos won the game.")
    button = gr.Button("Answer", elem_id="qa-submit")
    highlighted = gr.HighlightedText(label="Answer in its context", elem_id="qa-answer",
                                     color_map={"answer": "orange"})
    record = gr.JSON(label="Answer", elem_id="qa-record")
    plot = gr.Image(label="Start and end distributions", type="numpy", elem_id="qa-distributions", interactive=False)
    button.click(shown(demo), [question, context], [highlighted, record, plot], api_name="answer")


def tagger_tab(demo: TaggerDemo):
    import gradio as gr

    text = gr.Textbox(label="Text", elem_id="tagger-text", placeholder="Paris, France is nice.")
    button = gr.Button("Tag", elem_id="tagger-submit")
    highlighted = gr.HighlightedText(label="Spans", elem_id="tagger-spans")
    table = gr.Dataframe(headers=["label", "words", "score", "start", "end"], label="Entities",
                         elem_id="tagger-entities", interactive=False)
    button.click(shown(demo), [text], [highlighted, table], api_name="tag")


def neighbours_tab(demo: CorpusNeighbours):
    import gradio as gr

    gr.Markdown(f"The word's CoVe vector in each sentence against every word of the corpus **{demo.corpus_name}** "
                f"({len(demo.corpus)} texts), and its word vector against the vocabulary's: the word vector is the "
                "same in both sentences, CoVe's neighbours follow the context.", elem_id="encoder-corpus")
    word = gr.Textbox(label="Word", elem_id="encoder-word", placeholder="bank")
    sentence_a = gr.Textbox(label="Sentence A", elem_id="encoder-sentence-a",
                            placeholder="She sat on the bank of the river .")
    sentence_b = gr.Textbox(label="Sentence B", elem_id="encoder-sentence-b",
                            placeholder="The bank raised its rates .")
    button = gr.Button("Find neighbours", elem_id="encoder-submit")
    cove_a = gr.Dataframe(headers=["cosine", "word", "in its sentence"], label="CoVe, in sentence A",
                          elem_id="encoder-cove-a", interactive=False)
    cove_b = gr.Dataframe(headers=["cosine", "word", "in its sentence"], label="CoVe, in sentence B",
                          elem_id="encoder-cove-b", interactive=False)
    vectors = gr.Dataframe(headers=["cosine", "word"], label="Word vectors (any sentence)",
                           elem_id="encoder-vectors", interactive=False)
    button.click(shown(demo), [word, sentence_a, sentence_b], [cove_a, cove_b, vectors], api_name="neighbours")


TABS = {"classifier": classifier_tab, "qa": qa_tab, "tagger": tagger_tab, "encoder": neighbours_tab}


def build_app(demos: dict, title: str = "CoVe: context vectors learned in translation"):
    """The Gradio app: a tab per model kind in `demos` (`load_demos`), a note naming the command for the others."""
    import gradio as gr

    with gr.Blocks(title=title) as app:
        gr.Markdown(f"# {title}")
        for kind, make_tab in TABS.items():
            with gr.Tab(MAKES[kind][0], id=kind, elem_id=f"tab-{kind}"):
                if kind in demos:
                    make_tab(demos[kind])
                else:
                    missing_tab(kind)
    return app
