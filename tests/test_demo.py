"""cove-demo (modeling_cove/training/demo/app.py, training/commands/demo.py) and its Space (`cove-push-to-hub --space`):
tiny models of every kind (the BCN, DCN and tagger helpers of the pipeline tests, a tiny encoder), the app started
once on 127.0.0.1 for this module, every endpoint called with `gradio_client` and checked against the models run
here, and the page driven in headless Chromium (selenium): a text typed and submitted, the label and the heat map
read off the page, one screenshot per tab under the test's temporary folder. Without Chromium and its driver the
browser test skips, saying so; under COVE_REQUIRE_BROWSER=1 (CI, .ci/run) it fails instead."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from modeling_cove import CoveConfig, CoveModel
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.commands import demo as demo_command
from modeling_cove.training.demo import space
from modeling_cove.training.demo.app import NEIGHBOURS, DemoModels, build_app, load_demos
from modeling_cove.training.demo.corpus import main_job_corpus
from test_qa_pipeline import CONTEXT, save_tiny_qa
from test_text_classification_pipeline import logits_of, save_classifier
from test_token_classification_pipeline import WORDS as TAGGER_WORDS
from test_token_classification_pipeline import tiny_tagger

pytestmark = pytest.mark.usefixtures("single_thread")

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
CORPUS = ["the cat sat on the mat .", "a man plays far away .", "the dog ran on the mat .", "someone plays the cat ."]
TEXT = "The cat sat on the mat ."
QUESTION = "Where did the cat sit?"
TAGGED = "Paris, France is nice."
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def save_tiny_encoder(path):
    tokenizer = build_cove_tokenizer(sorted({word for text in CORPUS for word in text.split()}))
    torch.manual_seed(0)
    CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A main-job run folder holding a tiny BCN and encoder where cove-main puts them, a tiny DCN and tagger, and a
    corpus file."""
    root = tmp_path_factory.mktemp("demo")
    run = root / "run"
    save_classifier(run / "publish" / "sentiment" / "hub")
    save_tiny_encoder(run / "pretrain" / "encoder")
    save_tiny_qa(root / "dcn")
    tokenizer = build_cove_tokenizer(TAGGER_WORDS)
    tiny_tagger(tokenizer).save_pretrained(root / "tagger")
    tokenizer.save_pretrained(root / "tagger")
    (root / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def models(folders):
    """The command line's models: the run folder's defaults, --qa, --tagger and --corpus."""
    args = demo_command.parse_options(demo_command.DemoArguments, [
        "--run-dir", str(folders / "run"), "--qa", str(folders / "dcn"), "--tagger", str(folders / "tagger"),
        "--corpus", str(folders / "corpus.txt")])
    return demo_command.demo_models(args)


@pytest.fixture(scope="module")
def served(models):
    """The app, launched once for the module on 127.0.0.1; yields its URL and the loaded demos."""
    demos = load_demos(models)
    app = build_app(demos)
    app.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        yield app.local_url, demos
    finally:
        app.close()


def test_the_command_finds_the_run_folders_models_and_reads_the_corpus_flag(folders, models):
    assert models.classifier == str(folders / "run" / "publish" / "sentiment" / "hub")
    assert models.encoder == str(folders / "run" / "pretrain" / "encoder")
    assert models.qa == str(folders / "dcn") and models.tagger == str(folders / "tagger")
    assert models.corpus == CORPUS and models.corpus_name == str(folders / "corpus.txt")


def test_the_default_corpus_is_the_main_jobs_texts(tmp_path):
    texts, name = main_job_corpus(tmp_path)  # no run.json: the shipped embedded preset, as cove-main runs it
    assert name.startswith("the main job's texts (preset embedded:") and "examples/sentiment (text)" in name
    from modeling_cove.training.common.presets import load_preset, preset_path
    from modeling_cove.training.data.texts import read_texts

    preset = load_preset("embedded", "main")
    expected = [text for folder, column in preset["vocab"]["texts"] for split in ("train", "validation", "test")
                for text in read_texts(preset_path(preset["path"], folder) / f"{split}.tsv", column)]
    assert texts == expected and len(texts) > 100


def test_help_works_without_gradio_and_the_app_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "gradio", None)  # import gradio raises ImportError
    with pytest.raises(SystemExit) as done:
        demo_command.main(["--help"])
    assert done.value.code == 0 and "modeling-cove[demo]" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        demo_command.main(["--run-dir", str(tmp_path)])
    assert done.value.code == 2 and 'pip install "modeling-cove[demo]"' in capsys.readouterr().err


def test_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        demo_command.main(["--run-dir", str(tmp_path), "--qa", str(tmp_path / "nothing")])
    assert done.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_a_tab_without_a_model_names_the_command_that_makes_one():
    app = build_app({})  # not launched: its components only
    notes = {block.elem_id: block.value for block in app.blocks.values()
             if (getattr(block, "elem_id", None) or "").endswith("-missing")}
    assert "`cove-train-qa`" in notes["qa-missing"] and "cove-demo --qa FOLDER" in notes["qa-missing"]
    assert "`cove-train-tagger`" in notes["tagger-missing"]
    assert "cove-train-classifier" in notes["classifier-missing"] and "cove-main" in notes["encoder-missing"]


# ----------------------------------------------------------------------------------------------------------------
# every endpoint through gradio_client, against the models run here
# ----------------------------------------------------------------------------------------------------------------


def cosine_neighbours(query: np.ndarray, rows: list) -> list:
    """`rows` [(vector, what)] ordered by cosine with `query`, highest first: [(cosine, what)]."""
    scored = [(float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))), what) for v, what in rows]
    return sorted(scored, key=lambda item: -item[0])


def reference_neighbours(encoder_dir, word: str, sentence: str) -> tuple:
    """CoVe neighbours (each corpus sentence run alone; vectors centred on the corpus's mean) and word-vector neighbours
    of `word` in `sentence`."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(encoder_dir), AutoModel.from_pretrained(encoder_dir).eval()

    def states(text):
        encoded = tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded, output_hidden_states=True).hidden_states
        return encoded.tokens(), hidden[0][0].numpy(), hidden[-1][0].numpy()

    tokens, vectors, top = states(sentence)
    at = tokens.index(word)
    occurrences, every = [], []
    for text in CORPUS:
        corpus_tokens, _, corpus_top = states(text)
        every += list(corpus_top)
        occurrences += [(top_j, (token, text)) for token, top_j in zip(corpus_tokens, corpus_top)
                        if not (text == sentence and token == word)]
    mean = np.mean(every, axis=0)
    occurrences = [(v - mean, what) for v, what in occurrences]
    table = model.get_input_embeddings().weight.detach().numpy()
    words = [(table[i], tokenizer.convert_ids_to_tokens(i)) for i in range(len(table))
             if i not in tokenizer.all_special_ids and table[i].any() and tokenizer.convert_ids_to_tokens(i) != word]
    return (cosine_neighbours(top[at] - mean, occurrences)[:NEIGHBOURS],
            cosine_neighbours(vectors[at], words)[:NEIGHBOURS])


def test_every_endpoint_through_gradio_client(served, folders):
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    from PIL import Image

    url, demos = served
    client = Client(url, verbose=False)
    label, scores, heat_map = client.predict(TEXT, "", api_name="/classify")
    logits = logits_of(demos["classifier"].pipe, TEXT)
    probabilities = torch.softmax(logits, dim=-1)
    id2label = demos["classifier"].pipe.model.config.id2label
    assert label == id2label[int(logits.argmax())]
    assert {c["label"]: c["confidence"] for c in scores["confidences"]} == pytest.approx(
        {id2label[i]: float(p) for i, p in enumerate(probabilities)}, abs=1e-6)
    assert np.asarray(Image.open(heat_map)).min() < 128  # drawn, not blank
    pair = "a man plays ."
    pair_label, _, pair_map = client.predict(TEXT, pair, api_name="/classify")  # a pair: A_x and A_y side by side
    assert pair_label == id2label[int(logits_of(demos["classifier"].pipe, TEXT, pair).argmax())]
    assert Image.open(pair_map).size[0] > 1.5 * Image.open(heat_map).size[0]

    highlighted, record, distributions = client.predict(QUESTION, CONTEXT, api_name="/answer")
    answer = demos["qa"].pipe(question=QUESTION, context=CONTEXT)
    assert record["answer"] == answer["answer"] == CONTEXT[record["start"]:record["end"]]
    pieces = [(item["token"], item["class_or_confidence"]) for item in highlighted]
    assert "".join(t for t, _ in pieces) == CONTEXT and [t for t, c in pieces if c == "answer"] == [answer["answer"]]
    assert Image.open(distributions).size[0] > 100

    spans, entities = client.predict(TAGGED, api_name="/tag")
    expected = demos["tagger"].pipe(TAGGED)
    assert "".join(item["token"] for item in spans) == TAGGED
    assert [(row[1], row[0]) for row in entities["data"]] == [(e["word"], e["entity_group"]) for e in expected]

    cove_a, cove_b, vectors = client.predict("cat", "the cat sat on the mat .", "someone plays the cat .",
                                             api_name="/neighbours")
    encoder_dir = folders / "run" / "pretrain" / "encoder"
    for table, sentence in ((cove_a, "the cat sat on the mat ."), (cove_b, "someone plays the cat .")):
        cove, _ = reference_neighbours(encoder_dir, "cat", sentence)
        assert [row[1] for row in table["data"]] == [what[0] for _, what in cove]
        assert [row[0] for row in table["data"]] == pytest.approx([c for c, _ in cove], abs=2e-4)
    _, words = reference_neighbours(encoder_dir, "cat", "the cat sat on the mat .")
    assert [row[1] for row in vectors["data"]] == [w for _, w in words]

    with pytest.raises(AppError, match="Please type a text"):
        client.predict("  ", "", api_name="/classify")
    with pytest.raises(AppError, match="does not have the word 'dog'"):
        client.predict("dog", "the cat sat .", "", api_name="/neighbours")


# ----------------------------------------------------------------------------------------------------------------
# the page in headless Chromium
# ----------------------------------------------------------------------------------------------------------------


def chromium_driver():
    """A headless Chromium WebDriver (Debian's chromium and chromium-driver), or a skip saying what is missing (a
    failure under COVE_REQUIRE_BROWSER=1)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        reason = f"no browser for the demo's browser test: {missing} missing (apt-get install chromium chromium-driver)"
        if os.environ.get("COVE_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " and COVE_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1600"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.mark.parametrize("required", ["", "1"])
def test_a_missing_browser_skips_or_fails_under_cove_require_browser(monkeypatch, required):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("COVE_REQUIRE_BROWSER", required)
    expected = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(expected, match="no browser for the demo's browser test"):
        chromium_driver()


def fill(driver, element_id: str, text: str):
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.CSS_SELECTOR, f"#{element_id} textarea, #{element_id} input")
    box.clear()
    box.send_keys(text)


def open_tab(driver, wait, title: str):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen

    wait.until(seen.element_to_be_clickable((By.XPATH, f"//button[@role='tab'][contains(., '{title}')]"))).click()


def test_the_page_in_a_browser(served, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    url, demos = served
    driver = chromium_driver()
    try:
        wait = WebDriverWait(driver, 30)
        driver.get(url)
        wait.until(seen.element_to_be_clickable((By.ID, "classifier-submit")))
        fill(driver, "classifier-text", TEXT)
        driver.find_element(By.ID, "classifier-submit").click()
        expected = demos["classifier"](TEXT, "")[0]
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#classifier-label textarea").get_attribute("value"))
        assert driver.find_element(By.CSS_SELECTOR, "#classifier-label textarea").get_attribute("value") == expected
        heat_map = wait.until(seen.visibility_of_element_located((By.CSS_SELECTOR, "#classifier-heatmap img")))
        wait.until(lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", heat_map))
        driver.save_screenshot(str(tmp_path / "tab-classifier.png"))

        open_tab(driver, wait, "Question answering")
        fill(driver, "qa-question", QUESTION)
        fill(driver, "qa-context", CONTEXT)
        driver.find_element(By.ID, "qa-submit").click()
        answer = demos["qa"].pipe(question=QUESTION, context=CONTEXT)["answer"]
        wait.until(seen.text_to_be_present_in_element((By.ID, "qa-answer"), answer.split()[0]))
        wait.until(seen.visibility_of_element_located((By.CSS_SELECTOR, "#qa-distributions img")))
        driver.save_screenshot(str(tmp_path / "tab-qa.png"))

        open_tab(driver, wait, "Tagger")
        fill(driver, "tagger-text", TAGGED)
        driver.find_element(By.ID, "tagger-submit").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "tagger-spans"), "France"))
        driver.save_screenshot(str(tmp_path / "tab-tagger.png"))

        open_tab(driver, wait, "Words in context")
        fill(driver, "encoder-word", "cat")
        fill(driver, "encoder-sentence-a", "the cat sat on the mat .")
        fill(driver, "encoder-sentence-b", "someone plays the cat .")
        driver.find_element(By.ID, "encoder-submit").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "encoder-cove-b"), "["))
        assert "corpus.txt" in driver.find_element(By.ID, "encoder-corpus").text  # the page names the corpus
        driver.save_screenshot(str(tmp_path / "tab-encoder.png"))

        fill(driver, "encoder-word", "dog")
        driver.find_element(By.ID, "encoder-submit").click()  # bad input: a message on the page, no traceback
        wait.until(seen.text_to_be_present_in_element((By.TAG_NAME, "body"), "does not have the word 'dog'"))
        assert "Traceback" not in driver.find_element(By.TAG_NAME, "body").text
    finally:
        driver.quit()
    print(f"screenshots: {sorted(p.name for p in tmp_path.glob('tab-*.png'))} in {tmp_path}")
    assert len(list(tmp_path.glob("tab-*.png"))) == 4


# ----------------------------------------------------------------------------------------------------------------
# the Space
# ----------------------------------------------------------------------------------------------------------------


def test_the_space_folder_holds_the_demo_module_as_it_is(tmp_path, folders):
    from huggingface_hub import SpaceCard

    from modeling_cove.training.commands.push_to_hub import main as push_to_hub
    from modeling_cove.training.demo import app

    assert push_to_hub(["--space", "--repo-id", "org/cove-demo", "--space-classifier", "org/cove-bcn",
                        "--space-encoder", "org/cove-encoder", "--space-corpus", str(folders / "corpus.txt"),
                        "--output-dir", str(tmp_path / "space")]) == 0
    written = (tmp_path / "space" / "app.py").read_text(encoding="utf-8")
    module, block = written.split(space.SPACE_BLOCK)
    assert module.rstrip() == open(app.__file__, encoding="utf-8").read().rstrip()
    assert "classifier='org/cove-bcn'" in block and "trust_remote_code=True" in block and "qa=" not in block
    card = SpaceCard.load(tmp_path / "space" / "README.md")
    assert card.data.sdk == "gradio" and card.data.app_file == "app.py"
    assert card.data.models == ["org/cove-bcn", "org/cove-encoder"]
    assert (tmp_path / "space" / "corpus.txt").read_text(encoding="utf-8").splitlines() == CORPUS
    requirements = (tmp_path / "space" / "requirements.txt").read_text().split()
    assert f"transformers=={__import__('transformers').__version__}" in requirements


@pytest.mark.slow
def test_the_space_app_runs_without_the_package(served, folders, tmp_path):
    """The Space's app.py in a fresh interpreter that cannot import modeling_cove (`python -I -S`, only the
    site-packages folders added, as tests/test_qa_pipeline.py does): the models (local folders standing for Hub ids)
    load with their own code, the app builds, and every tab answers as the app served here does."""
    import json
    import site
    import textwrap

    _, demos = served
    ids = {"classifier": folders / "run" / "publish" / "sentiment" / "hub", "qa": folders / "dcn",
           "tagger": folders / "tagger", "encoder": folders / "run" / "pretrain" / "encoder"}
    (tmp_path / "app.py").write_text(space.space_app_source({k: str(v) for k, v in ids.items()}, "four sentences"))
    paths = [p for p in site.getsitepackages() if os.path.isdir(p)]
    code = textwrap.dedent(f"""
        import importlib.util, json, sys
        sys.path.extend({paths!r})
        assert importlib.util.find_spec("modeling_cove") is None, "modeling_cove must not be importable here"
        spec = importlib.util.spec_from_file_location("space_app", "app.py")
        app = sys.modules["space_app"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)
        app.SPACE_MODELS.corpus = {CORPUS!r}
        demos = app.load_demos(app.SPACE_MODELS)
        app.build_app(demos)
        assert not any(m == "modeling_cove" or m.startswith("modeling_cove.") for m in sys.modules)
        print("RESULT" + json.dumps({{
            "classes": sorted(type(d.pipe if hasattr(d, "pipe") else d.model).__module__ for d in demos.values()),
            "classify": demos["classifier"]({TEXT!r}, "")[:2],
            "answer": demos["qa"]({QUESTION!r}, {CONTEXT!r})[1],
            "tag": demos["tagger"]({TAGGED!r})[1],
            "neighbours": demos["encoder"]("cat", {CORPUS[0]!r}, {CORPUS[3]!r})}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1",
               GRADIO_ANALYTICS_ENABLED="False")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert any(name.startswith("transformers_modules.") for name in result["classes"])  # the checkpoints' code
    label, scores = result["classify"]
    expected_label, expected_scores, _ = demos["classifier"](TEXT, "")
    assert label == expected_label and scores == pytest.approx(expected_scores, abs=1e-6)
    assert result["answer"] == demos["qa"](QUESTION, CONTEXT)[1]
    assert [row[:2] for row in result["tag"]] == [row[:2] for row in demos["tagger"](TAGGED)[1]]
    expected = demos["encoder"]("cat", CORPUS[0], CORPUS[3])
    for table, reference in zip(result["neighbours"], expected):
        assert [row[1:] for row in table] == [row[1:] for row in reference]
        assert [row[0] for row in table] == pytest.approx([row[0] for row in reference], abs=2e-4)
