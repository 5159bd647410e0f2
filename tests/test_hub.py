"""Publishing to the Hub: `modeling_cove.training.publishing.publish` and its command line (`cove-push-to-hub`,
scripts/push_to_hub.py), loading "org/name" as users type it, the upload path.

- The assembled folders (encoder, and every head whose file exists: BCN classifier, DCN question answering with
  its pipeline, MT model with its target tokenizer) are loaded in fresh Python processes: one with the package
  imported, one in which `modeling_cove` cannot be imported (only `trust_remote_code=True`). Both reproduce the
  original models' outputs exactly, from a hand-built offline HF cache (`AutoModel.from_pretrained("org/cove-large")`
  with HF_HUB_OFFLINE=1) and, without the package, from each folder through every Auto class its config advertises.
- A tagger's folder as `save_pretrained` writes it (`CoveForTokenClassification`, with its token-classification
  pipeline) loads and tags without the package, and `pipeline("token-classification", trust_remote_code=True)` runs
  the pipeline it ships; with the package imported, `pipeline("token-classification")` runs ours with no flag. Both
  under every aggregation strategy, one text and a batch with empty texts in it.
- The upload runs against a local HTTP server implementing the Hub endpoints huggingface_hub calls
  (create repo, create branch, validate-yaml, preupload, LFS batch/upload/verify, commit) and recording them.
- Bad input fails with a clear error before any request.
"""

import ast
import base64
import contextlib
import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
import torch
import yaml
from conftest import assert_reproduces, exit_of
from safetensors.torch import load_file

from hf_cache import build_offline_cache, offline_env

from modeling_cove import CoveConfig, CoveModel
from modeling_cove.hub import MANIFEST, PIPELINES, checkpoint_code
from modeling_cove.modeling_cove_bcn import CoveForSequenceClassification
from modeling_cove.modeling_cove_dcn import CoveForQuestionAnswering
from modeling_cove.modeling_cove_mt import CoveForMachineTranslation
from modeling_cove.modeling_cove_tagger import CoveForTokenClassification
from modeling_cove.pipeline_cove import CoveQuestionAnsweringPipeline, CoveTokenClassificationPipeline
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.publishing import publish
from modeling_cove.training.publishing.cards import checkpoint_fingerprint, make_eval_record, write_eval_json
from modeling_cove.training.publishing.publish import PublishError, UploadError

REPO = Path(__file__).resolve().parents[1]


WORDS = "the cat sat on mat . a dog ran good bad movie film was not very where did ?".split()
TARGET_WORDS = "die katze sass auf der matte . ein hund".split()
SENTENCES = ["The cat sat on the mat .", "a very good film", "the zebra was not bad ."]  # "zebra": unknown word
PAIR = ("a dog ran .", "the cat sat .")
QUESTION, CONTEXT = "Where did the cat sit ?", "The cat sat on the mat . A dog ran ."
LABELS = ["negative", "positive"]
TAGS = ["O", "B-NP", "I-NP"]
TAG_TEXT = "The cat sat on the mat, a dog ran."  # capitals and punctuation: `word` must keep them
TAG_BATCH = [TAG_TEXT, "", SENTENCES[2], "  "]  # texts without tokens give [] (batch_size=2 below)
STRATEGIES = ("none", "simple", "first", "average", "max")
BASE_REPO, BCN_REPO, DCN_REPO, MT_REPO = "org/cove-large", "org/cove-bcn-sst2", "org/cove-dcn-squad", "org/cove-mt"
TOKEN = "hf_test_token_123"

PACKAGE = REPO / "modeling_cove"
# what every checkpoint advertises and ships: every class of the manifest (a head can start from any checkpoint);
# a question-answering checkpoint also its pipeline
FULL_AUTO_MAP = {entry.auto_class: entry.reference(name) for name, entry in MANIFEST.items()
                 if "mt_lstm" in entry.encoder_types}  # a CoVe checkpoint; a biLM one also names its LM head
EVERY_CLASS_FILES = set().union(*(entry.files for entry in MANIFEST.values()))
QA_PIPELINE = PIPELINES["question-answering"]
TAGGER_PIPELINE = PIPELINES["token-classification"]
# training-side modules of the package: vocabulary and checkpoint building, data, word vectors, the feature cache
NOT_MODEL_CODE = {"build.py", "data.py", "feature_cache.py", "vectors.py"}


def shipped_code(key: str) -> set:
    """The code files the checkpoint of head `key` ships (from a complete install): a DCN's and a tagger's also
    their pipeline's."""
    pipelines = {"dcn": QA_PIPELINE, "tagger": TAGGER_PIPELINE}
    return EVERY_CLASS_FILES | (set(pipelines[key].files) if key in pipelines else set())



def tiny_config(**overrides) -> CoveConfig:
    """Small sizes for the encoder and for every head, so that any Auto class builds quickly."""
    values = dict(
        vocab_size=len(WORDS) + 4, word_vector_dim=8, hidden_size=4,
        bcn_feedforward_dim=6, bcn_hidden_size=4, bcn_maxout_reductions=[2, 2], bcn_maxout_pool=2,
        dcn_hidden_size=4, dcn_pool_size=2,
        target_vocab_size=len(TARGET_WORDS) + 4, decoder_embedding_dim=6, decoder_hidden_size=8,
    )
    values.update(overrides)
    return CoveConfig(**values)


def tiny_png(path: Path) -> Path:
    """A valid 2x1 grey PNG (stand-in for the training curve)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = zlib.compress(b"\x00\x10\xf0")  # one row: filter byte + 2 grey pixels
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 1, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", raw) + chunk(b"IEND", b""))
    return path


def save_checkpoint(model, tokenizer, folder: Path, record_kwargs: dict, target_tokenizer=None) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if target_tokenizer is not None:
        target_tokenizer.save_pretrained(folder / "target_tokenizer")
    record = make_eval_record(folder, **record_kwargs)
    write_eval_json(folder / "eval_results.json", record)
    return folder


def record_kwargs(key: str) -> dict:
    """Evaluation records as the training scripts write them (numbers made up for the tiny models)."""
    stand_in = {"name": "w2v-lower-300d (stand-in)", "stand_in": True}
    if key in ("base", "mt"):
        return dict(
            task={"type": "translation", "name": "Translation (en-de)"},
            dataset={"key": "multi30k", "name": "Multi30k", "id": "bentrevett/multi30k", "split": "test",
                     "num_examples": 1000},
            metrics=[{"type": "bleu", "value": 31.4159}],
            training={"command": "python scripts/train_mt.py --dataset multi30k", "datasets": ["bentrevett/multi30k"],
                      "encoder": "CoVe-S (tiny test model)", "word_vectors": stand_in},
            metrics_source="BLEU of the translation model this encoder comes from." if key == "base" else None,
        )
    if key == "bcn":
        return dict(
            task={"type": "text-classification", "name": "Sentiment classification"},
            dataset={"key": "sst2", "name": "SST-2", "id": "stanfordnlp/sst2", "split": "validation",
                     "num_examples": 872},
            metrics=[{"type": "accuracy", "value": 87.6543}],
            training={"command": "python scripts/train_classifier.py --task sst2", "datasets": ["stanfordnlp/sst2"],
                      "base_model": BASE_REPO, "word_vectors": stand_in},
            paper_column="+CoVe-S",
        )
    return dict(
        task={"type": "question-answering", "name": "Extractive question answering"},
        dataset={"key": "squad", "name": "SQuAD v1.1", "id": "rajpurkar/squad",
                 "split": "validation (held-out articles of dev)", "num_examples": 1000},
        metrics=[{"type": "exact_match", "value": 40.5}, {"type": "f1", "value": 52.25}],
        training={"command": "python scripts/train_qa.py", "datasets": ["rajpurkar/squad"], "word_vectors": stand_in,
                  "notes": ["Trained on a split of SQuAD dev by article (no train split here)."]},
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Tiny original models (kept in memory), their checkpoints + eval JSONs, and the assembled Hub folders.

    `built["heads"]` lists (key, repo id, Auto class of its own architecture) for every model built."""
    root = tmp_path_factory.mktemp("hub")
    tokenizer = build_cove_tokenizer(WORDS)
    out = {"root": root, "tokenizer": tokenizer, "curve": tiny_png(root / "curve.png"), "heads": []}
    torch.manual_seed(0)
    models = {"base": (CoveModel(tiny_config(vocab_size=len(tokenizer))), BASE_REPO, "AutoModel", None)}
    config = tiny_config(vocab_size=len(tokenizer), num_labels=2, id2label=dict(enumerate(LABELS)),
                         label2id={name: i for i, name in enumerate(LABELS)})
    bcn = CoveForSequenceClassification(config)
    with torch.no_grad():  # non-trivial batch-norm statistics, so that buffers must round-trip too
        for module in bcn.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
    models["bcn"] = (bcn, BCN_REPO, "AutoModelForSequenceClassification", None)
    models["dcn"] = (CoveForQuestionAnswering(tiny_config(vocab_size=len(tokenizer))), DCN_REPO,
                     "AutoModelForQuestionAnswering", None)
    target = build_cove_tokenizer(TARGET_WORDS, add_eos=True)
    out["target_tokenizer"] = target
    models["mt"] = (CoveForMachineTranslation(tiny_config(vocab_size=len(tokenizer),
                                                          target_vocab_size=len(target))),
                    MT_REPO, "AutoModelForSeq2SeqLM", target)
    for key, (model, repo, auto, target) in models.items():
        model.eval()
        out[key] = model
        out[f"{key}_ckpt"] = save_checkpoint(model, tokenizer, root / f"{key}_ckpt", record_kwargs(key), target)
        out[f"{key}_stage"] = publish.assemble(out[f"{key}_ckpt"], out[f"{key}_ckpt"] / "eval_results.json", repo,
                                                   output_dir=root / f"{key}_stage", curve=out["curve"])
        out["heads"].append((key, repo, auto))
    # a tagger's folder as save_pretrained writes it (no Hub staging)
    config = tiny_config(vocab_size=len(tokenizer), num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                         label2id={name: i for i, name in enumerate(TAGS)}, tagger_hidden_size=4,
                         tagger_module_dim=5)
    out["tagger"] = CoveForTokenClassification(config).eval()
    out["tagger"].save_pretrained(root / "tagger_ckpt")
    tokenizer.save_pretrained(root / "tagger_ckpt")
    out["tagger_ckpt"] = root / "tagger_ckpt"
    return out


def original_outputs(built) -> dict:
    """What the in-memory original models compute (the reference for every reload)."""
    tokenizer = built["tokenizer"]
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    inputs = {k: v for k, v in batch.items() if k != "token_type_ids"}
    expected = {"input_ids": batch["input_ids"]}
    with torch.no_grad():
        for key, _, _ in built["heads"]:
            model = built[key]
            encoder = getattr(model, "cove", model)
            expected[f"{key}.encoder"] = encoder(**inputs, output_final_states=False).last_hidden_state
        expected["bcn.logits"] = built["bcn"](**batch).logits
        expected["bcn.pair_logits"] = built["bcn"](**tokenizer(*PAIR, return_tensors="pt")).logits
        qa = built["dcn"](**tokenizer(QUESTION, CONTEXT, return_tensors="pt"))
        expected["dcn.start_logits"], expected["dcn.end_logits"] = qa.start_logits, qa.end_logits
        pipe = CoveQuestionAnsweringPipeline(model=built["dcn"], tokenizer=tokenizer)
        expected["dcn.pipeline"] = pipe(question=QUESTION, context=CONTEXT)
        expected["mt.generated"] = built["mt"].generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=6)
        expected["tagger.logits"] = built["tagger"](**inputs).logits
        pipe = CoveTokenClassificationPipeline(model=built["tagger"], tokenizer=tokenizer)
        expected["tagger.pipeline"] = {
            strategy: [pipe(x, aggregation_strategy=strategy, ignore_labels=[], batch_size=2)
                       for x in (TAG_TEXT, TAG_BATCH)] for strategy in STRATEGIES}
    return expected


# ----------------------------------------------------------------------------------------------------------------
# The assembled folder
# ----------------------------------------------------------------------------------------------------------------


def test_assembled_folder_has_everything_a_hub_repo_needs(built):
    stage = built["base_stage"]
    names = {f.path_in_repo for f in stage.files}
    expected = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "README.md",
                "training_curve.png", "eval_results.json"} | shipped_code("base")
    assert expected <= names
    assert names == {p.relative_to(stage.folder).as_posix() for p in stage.folder.rglob("*") if p.is_file()}
    assert not any(name.endswith((".bin", ".pt", ".pth")) for name in names)
    for f in stage.files:  # listed sizes are the real ones
        assert (stage.folder / f.path_in_repo).stat().st_size == f.size
    # byte-identical weights, tokenizer and code
    for name in ("model.safetensors", "tokenizer.json"):
        assert (stage.folder / name).read_bytes() == (built["base_ckpt"] / name).read_bytes()
    assert {p.name for p in stage.folder.glob("*.py")} == shipped_code("base")  # the manifest's files, no others
    for name in shipped_code("base"):
        assert (stage.folder / name).read_bytes() == (PACKAGE / name).read_bytes()
    config = json.loads((stage.folder / "config.json").read_text())
    assert config["auto_map"] == FULL_AUTO_MAP
    assert config["auto_map"]["AutoModel"] == "modeling_cove.CoveModel"
    for ref in config["auto_map"].values():  # every class the auto_map names ships with its file
        assert (stage.folder / (ref.split(".")[0] + ".py")).is_file()
    assert "custom_pipelines" not in config  # no pipeline of ours for an encoder
    # the staged folder is the same model as the evaluated checkpoint
    assert checkpoint_fingerprint(stage.folder) == checkpoint_fingerprint(built["base_ckpt"])
    assert (stage.folder / "training_curve.png").read_bytes() == built["curve"].read_bytes()


def test_qa_folder_carries_its_pipeline(built):
    config = json.loads((built["dcn_stage"].folder / "config.json").read_text())
    entry = config["custom_pipelines"]["question-answering"]
    assert entry["impl"] == "pipeline_cove.CoveQuestionAnsweringPipeline"
    assert entry["pt"] == ["AutoModelForQuestionAnswering"]
    assert {p.name for p in built["dcn_stage"].folder.glob("*.py")} == shipped_code("dcn")
    assert {"pipeline_cove.py", "squad_preprocessing.py"} <= shipped_code("dcn")
    readme = (built["dcn_stage"].folder / "README.md").read_text()
    assert 'pipeline("question-answering", model="org/cove-dcn-squad", trust_remote_code=True)' in readme


def test_mt_folder_carries_its_target_tokenizer(built):
    folder = built["mt_stage"].folder
    assert (folder / "target_tokenizer" / "tokenizer.json").read_bytes() == \
        (built["mt_ckpt"] / "target_tokenizer" / "tokenizer.json").read_bytes()
    assert 'subfolder="target_tokenizer"' in (folder / "README.md").read_text()


@pytest.mark.parametrize("key", ["bcn", "dcn", "mt"])
def test_verify_staging_loads_each_head(built, key):
    check = publish.verify_staging(built[f"{key}_stage"])
    assert check["auto_class"] == dict((k, auto) for k, _, auto in built["heads"])[key]
    assert check["encoder_output_shape"] == (1, 7, built[key].config.output_size)


def test_dry_run_lists_files_and_touches_no_network(built, tmp_path, capsys, monkeypatch):
    import huggingface_hub

    def no_network(*args, **kwargs):
        raise AssertionError("the dry run must not create an HfApi client")

    monkeypatch.setattr(huggingface_hub, "HfApi", no_network)
    monkeypatch.delenv("HF_TOKEN", raising=False)  # no token needed for a dry run
    ckpt = built["base_ckpt"]
    done = publish.publish(ckpt, ckpt / "eval_results.json", BASE_REPO, revision="v1", dry_run=True,
                           output_dir=tmp_path / "stage", curve=built["curve"])
    printed = capsys.readouterr().out
    assert done.commit_url is None and done.staging.folder == tmp_path / "stage"
    assert "dry run: nothing uploaded" in printed
    assert f"/{BASE_REPO}" in printed and "revision: v1" in printed
    size = (ckpt / "model.safetensors").stat().st_size
    assert re.search(rf"model\.safetensors\s+{size} B|model\.safetensors\s+{size / 1024:.1f} KiB", printed)
    for name in ("README.md", "config.json", "tokenizer.json", "training_curve.png", "modeling_cove.py"):
        assert re.search(rf"^\s+{re.escape(name)}\s+\d", printed, re.M), name
    assert "loads with AutoModel" in printed


# ----------------------------------------------------------------------------------------------------------------
# Loading as users type it, in fresh processes
# ----------------------------------------------------------------------------------------------------------------

LOADER = r'''
import json, sys
spec = json.loads(open(sys.argv[1]).read())
if spec["block_package"]:
    sys.modules["modeling_cove"] = None  # `import modeling_cove` now raises ImportError
    try:
        import modeling_cove  # noqa: F401
        package_importable = True
    except ImportError:
        package_importable = False
else:
    import modeling_cove  # noqa: F401  (registers the Auto classes and the cove-question-answering pipeline)
    package_importable = True
import torch
import transformers
from safetensors.torch import save_file

tensors, info = {}, {"package_importable": package_importable}
for job in spec["jobs"]:
    name, auto = job["name"], job["auto"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(job["source"])
    batch = tokenizer(spec["sentences"], padding=True, return_tensors="pt")
    tensors[name + ".input_ids"] = batch["input_ids"]
    model = getattr(transformers, auto).from_pretrained(job["source"], trust_remote_code=job["trust"]).eval()
    info[name] = {"class": type(model).__name__, "module": type(model).__module__}
    inputs = {k: v for k, v in batch.items() if k != "token_type_ids"}
    with torch.no_grad():
        encoder = getattr(model, model.base_model_prefix, model)
        # explicit: an MT class defaults to output_final_states=True (another LSTM kernel, float rounding)
        tensors[name + ".encoder"] = encoder(**inputs, output_final_states=False).last_hidden_state.contiguous()
        if not job["full"]:
            continue
        if auto == "AutoModelForSequenceClassification":
            tensors[name + ".logits"] = model(**batch).logits.contiguous()
            tensors[name + ".pair_logits"] = model(**tokenizer(*spec["pair"], return_tensors="pt")).logits.contiguous()
        if auto == "AutoModelForQuestionAnswering":
            qa = model(**tokenizer(spec["question"], spec["context"], return_tensors="pt"))
            tensors[name + ".start_logits"] = qa.start_logits.contiguous()
            tensors[name + ".end_logits"] = qa.end_logits.contiguous()
        if auto == "AutoModelForTokenClassification":
            tensors[name + ".logits"] = model(**inputs).logits.contiguous()
        if auto == "AutoModelForSeq2SeqLM":
            ids = model.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=6)
            tensors[name + ".generated"] = ids.contiguous()
            target = transformers.AutoTokenizer.from_pretrained(job["source"], subfolder="target_tokenizer")
            info[name]["target_vocab"] = len(target)
            info[name]["decoded"] = target.batch_decode(ids, skip_special_tokens=True)
for job in spec["pipelines"]:
    pipe = transformers.pipeline(job["task"], model=job["source"], trust_remote_code=job["trust"])
    outputs = [pipe(**x) if job.get("kwargs") else pipe(x, **job.get("call_kwargs", {})) for x in job["inputs"]]
    info[job["name"]] = {"outputs": outputs, "model_module": type(pipe.model).__module__,
                         "pipeline_class": type(pipe).__name__, "pipeline_module": type(pipe).__module__}
save_file(tensors, spec["out"] + ".safetensors")
open(spec["out"] + ".json", "w").write(json.dumps(info, default=float))  # default: numpy scores
'''


def run_loaders(built, specs: list) -> list:
    """Start one fresh interpreter per spec (in parallel) and collect (tensors, info)."""
    script = built["root"] / "loader.py"
    script.write_text(LOADER)
    procs = []
    for spec in specs:
        spec_path = Path(spec["out"] + ".spec.json")
        spec_path.write_text(json.dumps({k: v for k, v in spec.items() if k not in ("env", "cwd")}))
        procs.append(subprocess.Popen([sys.executable, str(script), str(spec_path)], env=spec["env"],
                                      cwd=str(spec["cwd"]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    for proc in procs:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output[-4000:]
    return [(load_file(spec["out"] + ".safetensors"), json.loads(Path(spec["out"] + ".json").read_text()))
            for spec in specs]


@pytest.fixture(scope="module")
def loaded(built):
    """Two fresh processes over the same offline cache: with the package, and without it."""
    root = built["root"]
    hf_home = root / "hf_home"
    for key, repo, _ in built["heads"]:
        # the MT repo: AutoTokenizer(subfolder="target_tokenizer") probes target_tokenizer/config.json, which the Hub
        # answers with 404 and huggingface_hub records as missing; record it here the same way
        missing = ["target_tokenizer/config.json"] if key == "mt" else []
        build_offline_cache(hf_home, repo, built[f"{key}_stage"].folder, missing=missing)
    common = {"sentences": SENTENCES, "pair": list(PAIR), "question": QUESTION, "context": CONTEXT,
              "env": offline_env(hf_home), "cwd": root}  # cwd: the repo is not on sys.path there
    hub_jobs = [{"name": f"hub.{key}", "source": repo, "auto": auto, "full": True}
                for key, repo, auto in built["heads"]]
    pipelines = [{"task": "text-classification", "source": BCN_REPO, "name": "bcn.pipeline",
                  "inputs": [SENTENCES[1], {"text": PAIR[0], "text_pair": PAIR[1]}]}]
    qa_job = {"source": DCN_REPO, "name": "dcn.pipeline", "kwargs": True,
              "inputs": [{"question": QUESTION, "context": CONTEXT}]}
    with_package = {**common, "block_package": False, "out": str(root / "with_package"),
                    "jobs": [{**job, "trust": False} for job in hub_jobs],
                    "pipelines": [{**p, "trust": False} for p in pipelines]
                    + [{**qa_job, "task": "cove-question-answering", "trust": False}]}
    folder_jobs = []
    for key, _, own in built["heads"]:  # each assembled folder, through every Auto class it advertises
        folder = built[f"{key}_stage"].folder
        auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
        folder_jobs += [{"name": f"folder.{key}.{auto}", "source": str(folder), "auto": auto, "full": auto == own,
                         "trust": True} for auto in auto_map if auto != "AutoConfig"]
    # the folder save_pretrained wrote (its code files only, no push_to_hub): the encoder's through every class
    auto_map = json.loads((built["base_ckpt"] / "config.json").read_text())["auto_map"]
    folder_jobs += [{"name": f"ckpt.base.{auto}", "source": str(built["base_ckpt"]), "auto": auto,
                     "full": auto == "AutoModel", "trust": True} for auto in auto_map if auto != "AutoConfig"]
    hub_pipelines = [{**p, "trust": True} for p in pipelines] + [{**qa_job, "task": "question-answering",
                                                                 "trust": True}]
    ckpt_pipelines = [{**qa_job, "task": "question-answering", "trust": True, "source": str(built["dcn_ckpt"]),
                       "name": "dcn.ckpt_pipeline"}]  # and the DCN's question-answering pipeline
    # the tagger's folder: its own class, and its token-classification pipeline
    folder_jobs.append({"name": "ckpt.tagger", "source": str(built["tagger_ckpt"]),
                        "auto": "AutoModelForTokenClassification", "full": True, "trust": True})
    # with trust_remote_code=True here, with none (package)
    tagger_jobs = [{"task": "token-classification", "source": str(built["tagger_ckpt"]),
                    "name": f"tagger.ckpt_pipeline.{strategy}", "inputs": [TAG_TEXT, TAG_BATCH],
                    "call_kwargs": {"aggregation_strategy": strategy, "ignore_labels": [], "batch_size": 2}}
                   for strategy in STRATEGIES]
    ckpt_pipelines += [{**job, "trust": True} for job in tagger_jobs]
    with_package["pipelines"] += [{**job, "trust": None} for job in tagger_jobs]
    without_package = {**common, "block_package": True, "out": str(root / "without_package"),
                       "jobs": [{**job, "trust": True} for job in hub_jobs] + folder_jobs,
                       "pipelines": hub_pipelines + ckpt_pipelines}
    with serve_hub() as server:
        # round trip: upload every assembled folder with the script's upload step, then a fresh process without the
        # package downloads them ONLINE from this server into an empty cache (real 404s, real downloads)
        for key, repo, _ in built["heads"]:
            publish.upload(built[f"{key}_stage"], token=TOKEN, endpoint=server.url)
        uploaded = len(server.calls)
        online_env = offline_env(root / "hf_home_online")
        online_env.update({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": server.url,
                           "HF_HUB_DISABLE_XET": "1", "NO_PROXY": "127.0.0.1"})
        online = {**without_package, "out": str(root / "online"), "env": online_env,
                  "jobs": [{**job, "trust": True} for job in hub_jobs], "pipelines": hub_pipelines}
        results = run_loaders(built, [with_package, without_package, online])
        online_calls = server.calls[uploaded:]
    return {"expected": original_outputs(built), "with": results[0], "without": results[1], "online": results[2],
            "online_calls": online_calls, "online_commits": list(server.commits)}


def test_offline_cache_layout(built, tmp_path):
    snapshot = build_offline_cache(tmp_path, "org/x", built["base_stage"].folder)
    repo_dir = tmp_path / "hub" / "models--org--x"
    commit = (repo_dir / "refs" / "main").read_text()
    assert snapshot == repo_dir / "snapshots" / commit and len(commit) == 40
    weights = built["base_stage"].folder / "model.safetensors"
    assert (snapshot / "model.safetensors").read_bytes() == weights.read_bytes()
    with pytest.raises(ValueError, match="namespace/name"):
        build_offline_cache(tmp_path, "no-namespace", built["base_stage"].folder)
    build_offline_cache(tmp_path, "org/y", built["base_stage"].folder, missing=["sub/config.json"])
    commit = (tmp_path / "hub" / "models--org--y" / "refs" / "main").read_text()
    assert (tmp_path / "hub" / "models--org--y" / ".no_exist" / commit / "sub" / "config.json").is_file()
    with pytest.raises(ValueError, match="cannot also be recorded as missing"):
        build_offline_cache(tmp_path, "org/z", built["base_stage"].folder, missing=["config.json"])


def check_hub_outputs(built, tensors: dict, expected: dict):
    """Every hub-id load reproduces the original model (ids and generated tokens exactly, floats to rounding)."""
    for key, _, _ in built["heads"]:
        assert_reproduces(tensors[f"hub.{key}.input_ids"], expected["input_ids"], key)
        assert_reproduces(tensors[f"hub.{key}.encoder"], expected[f"{key}.encoder"], key)
    assert_reproduces(tensors["hub.bcn.logits"], expected["bcn.logits"], "bcn.logits")
    assert_reproduces(tensors["hub.bcn.pair_logits"], expected["bcn.pair_logits"], "bcn.pair_logits")
    assert_reproduces(tensors["hub.dcn.start_logits"], expected["dcn.start_logits"], "dcn.start_logits")
    assert_reproduces(tensors["hub.dcn.end_logits"], expected["dcn.end_logits"], "dcn.end_logits")
    assert_reproduces(tensors["hub.mt.generated"], expected["mt.generated"], "mt.generated")


def test_hub_id_loads_with_the_package_and_reproduces_outputs(loaded, built):
    tensors, info = loaded["with"]
    assert info["hub.base"] == {"class": "CoveModel", "module": "modeling_cove.modeling_cove"}  # our registered class
    for key, _, _ in built["heads"]:
        assert info[f"hub.{key}"]["module"].startswith("modeling_cove."), key
    check_hub_outputs(built, tensors, loaded["expected"])


def test_hub_id_loads_without_the_package_via_remote_code(loaded, built):
    tensors, info = loaded["without"]
    assert info["package_importable"] is False
    assert info["hub.base"]["class"] == "CoveModel"
    for key, _, _ in built["heads"]:
        assert info[f"hub.{key}"]["module"].startswith("transformers_modules."), key  # the code shipped in the repo
    check_hub_outputs(built, tensors, loaded["expected"])


def test_folder_loads_through_every_advertised_auto_class_without_the_package(loaded, built):
    tensors, info = loaded["without"]
    expected = loaded["expected"]
    checked = 0
    for key, _, own in built["heads"]:
        auto_map = json.loads((built[f"{key}_stage"].folder / "config.json").read_text())["auto_map"]
        assert auto_map == FULL_AUTO_MAP
        for auto, ref in auto_map.items():
            if auto == "AutoConfig":
                continue
            name = f"folder.{key}.{auto}"
            assert info[name]["class"] == ref.split(".")[-1]
            assert info[name]["module"].startswith("transformers_modules.")
            # every class carries the checkpoint's encoder: its output is the original model's
            assert_reproduces(tensors[f"{name}.encoder"], expected[f"{key}.encoder"], name)
            checked += 1
        prefix = f"folder.{key}.{own}"
        for output in ("logits", "pair_logits", "start_logits", "end_logits", "generated"):
            if f"{key}.{output}" in expected:  # and the checkpoint's own class reproduces its head too
                assert_reproduces(tensors[f"{prefix}.{output}"], expected[f"{key}.{output}"], f"{prefix}.{output}")
    assert checked == len(built["heads"]) * (len(FULL_AUTO_MAP) - 1)


def test_saved_checkpoint_loads_every_class_and_the_qa_pipeline_without_the_package(loaded, built):
    """The folders `save_pretrained` writes (not assembled by the push script): a head starts from the encoder's
    folder through each class its config advertises, and the DCN's folder answers through its pipeline, with
    nothing but the code files of the manifest beside the weights."""
    tensors, info = loaded["without"]
    expected = loaded["expected"]
    auto_map = json.loads((built["base_ckpt"] / "config.json").read_text())["auto_map"]
    assert auto_map == FULL_AUTO_MAP
    for auto, ref in auto_map.items():
        if auto != "AutoConfig":
            name = f"ckpt.base.{auto}"
            assert info[name]["class"] == ref.split(".")[-1]
            assert info[name]["module"].startswith("transformers_modules."), name
            assert_reproduces(tensors[f"{name}.encoder"], expected["base.encoder"], name)
    result = info["dcn.ckpt_pipeline"]
    assert result["pipeline_class"] == "CoveQuestionAnsweringPipeline"
    assert result["pipeline_module"].startswith("transformers_modules.")
    (answer,) = result["outputs"]
    reference = expected["dcn.pipeline"]
    assert (answer["answer"], answer["start"], answer["end"]) == (reference["answer"], reference["start"],
                                                                  reference["end"])
    assert answer["score"] == pytest.approx(reference["score"], abs=0, rel=0)


def check_tagger_pipeline_outputs(info: dict, expected: dict):
    """Each strategy's results for TAG_TEXT and TAG_BATCH equal those of the pipeline in this process: words, spans,
    tags and scores (`word` as written: capitals and the comma kept, the comma a word of its own), [] for the texts
    without tokens."""
    for strategy in STRATEGIES:
        outputs = info[f"tagger.ckpt_pipeline.{strategy}"]["outputs"]
        single, batch = expected["tagger.pipeline"][strategy]
        for result, reference in zip([outputs[0], *outputs[1]], [single, *batch]):
            assert [{k: v for k, v in e.items() if k != "score"} for e in result] == \
                [{k: v for k, v in e.items() if k != "score"} for e in reference], strategy
            assert [e["score"] for e in result] == pytest.approx([float(e["score"]) for e in reference], abs=0, rel=0)
        assert outputs[1][1] == [] and outputs[1][3] == []
        for entity in outputs[0]:
            assert entity["word"] == TAG_TEXT[entity["start"]:entity["end"]]
    assert [e["word"] for e in info["tagger.ckpt_pipeline.none"]["outputs"][0]] == \
        ["The", "cat", "sat", "on", "the", "mat", ",", "a", "dog", "ran", "."]


def test_saved_tagger_loads_tags_and_runs_its_pipeline_without_the_package(loaded, built):
    """A tagger's folder (save_pretrained + tokenizer) in a process where `modeling_cove` cannot be imported: the
    model loads as remote code and reproduces the original logits; `pipeline("token-classification",
    trust_remote_code=True)` runs the pipeline class the folder ships, with the results of the pipeline in this
    process under every strategy (`check_tagger_pipeline_outputs`)."""
    tensors, info = loaded["without"]
    expected = loaded["expected"]
    assert info["package_importable"] is False
    assert info["ckpt.tagger"]["class"] == "CoveForTokenClassification"
    assert info["ckpt.tagger"]["module"].startswith("transformers_modules."), info["ckpt.tagger"]
    assert_reproduces(tensors["ckpt.tagger.logits"], expected["tagger.logits"], "tagger.logits")
    assert_reproduces(tensors["ckpt.tagger.encoder"], built["tagger"].cove(
        **{k: v for k, v in built["tokenizer"](SENTENCES, padding=True, return_tensors="pt").items()
           if k != "token_type_ids"}).last_hidden_state.detach(), "tagger.encoder")
    for strategy in STRATEGIES:
        result = info[f"tagger.ckpt_pipeline.{strategy}"]
        assert result["pipeline_class"] == "CoveTokenClassificationPipeline"
        assert result["pipeline_module"].startswith("transformers_modules."), result["pipeline_module"]
        assert result["model_module"].startswith("transformers_modules."), result["model_module"]
    check_tagger_pipeline_outputs(info, expected)


def test_saved_tagger_runs_our_pipeline_without_a_flag_with_the_package(loaded):
    """The same folder (its config records the pipeline in `custom_pipelines`) in a fresh process that imports
    `modeling_cove`: `pipeline("token-classification", model=dir)`, no trust_remote_code, runs the installed
    pipeline over the installed model class, with the same results."""
    _, info = loaded["with"]
    for strategy in STRATEGIES:
        result = info[f"tagger.ckpt_pipeline.{strategy}"]
        assert result["pipeline_module"] == "modeling_cove.pipeline_cove", result
        assert result["pipeline_class"] == "CoveTokenClassificationPipeline"
        assert result["model_module"] == "modeling_cove.modeling_cove_tagger", result
    check_tagger_pipeline_outputs(info, loaded["expected"])


def test_saved_tagger_records_and_ships_its_pipeline(built):
    """A tagger's config names its token-classification pipeline, and its folder ships that pipeline's files
    (pipeline_cove.py brings squad_preprocessing.py, which it imports) beside every class's."""
    folder = built["tagger_ckpt"]
    config = json.loads((folder / "config.json").read_text())
    assert config["custom_pipelines"] == {"token-classification": {
        "impl": "pipeline_cove.CoveTokenClassificationPipeline", "pt": ["AutoModelForTokenClassification"],
        "type": "text"}}
    assert config["auto_map"] == FULL_AUTO_MAP
    shipped = {path.name for path in folder.glob("*.py")}
    assert shipped == shipped_code("tagger") == EVERY_CLASS_FILES | {"pipeline_cove.py", "squad_preprocessing.py"}
    assert not NOT_MODEL_CODE & shipped
    for path in folder.glob("*.py"):
        assert path.read_bytes() == (PACKAGE / path.name).read_bytes()


def test_saved_checkpoints_ship_exactly_the_manifests_files(built):
    """Each checkpoint carries the code of the classes its config names (every class: a head can start from any
    checkpoint), plus its own pipeline's for question answering, and nothing else: no vocabulary, checkpoint-
    building, data or vector utilities (every `.py` of the package used to be copied)."""
    assert all((PACKAGE / name).is_file() for name in NOT_MODEL_CODE)  # they are in the package, and stay out:
    assert not NOT_MODEL_CODE & EVERY_CLASS_FILES and not NOT_MODEL_CODE & set(QA_PIPELINE.files)
    assert {"configuration_cove.py", "modeling_cove.py", "modeling_cove_mt.py", "modeling_cove_bcn.py",
            "modeling_cove_dcn.py", "tokenization_cove.py", "hub.py"} <= EVERY_CLASS_FILES
    for key, _, own in built["heads"]:
        folder = built[f"{key}_ckpt"]
        config = json.loads((folder / "config.json").read_text())
        assert {path.name for path in folder.glob("*.py")} == shipped_code(key), key
        assert config["auto_map"] == FULL_AUTO_MAP
        if key == "dcn":
            assert config["custom_pipelines"] == {"question-answering": {
                "impl": "pipeline_cove.CoveQuestionAnsweringPipeline", "pt": ["AutoModelForQuestionAnswering"],
                "type": "text"}}
        else:
            assert "custom_pipelines" not in config, key
        for path in folder.glob("*.py"):  # the package's files, unchanged
            assert path.read_bytes() == (PACKAGE / path.name).read_bytes()


def test_a_head_built_from_a_qa_checkpoint_does_not_keep_its_pipeline(built, tmp_path):
    """A BCN started from a DCN checkpoint inherits its config, `custom_pipelines` included: saved, it must not
    advertise the question-answering pipeline (nor ship its files), which is not its own."""
    bcn = CoveForSequenceClassification.from_pretrained(built["dcn_ckpt"])
    assert "question-answering" in bcn.config.custom_pipelines  # inherited
    bcn.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert "custom_pipelines" not in config
    assert {path.name for path in tmp_path.glob("*.py")} == shipped_code("bcn")


def test_checkpoint_code_advertises_only_the_classes_whose_files_are_there(tmp_path):
    """Running as remote code, the module folder holds only what the model imported: the config then names only
    those classes, and a pipeline only when its files are there too; an unknown architecture is a clear error."""
    for name in MANIFEST["CoveForQuestionAnswering"].files:
        shutil.copyfile(PACKAGE / name, tmp_path / name)
    code = checkpoint_code("CoveForQuestionAnswering", package_dir=tmp_path)
    assert code.auto_map == {"AutoConfig": "configuration_cove.CoveConfig", "AutoModel": "modeling_cove.CoveModel",
                             "AutoModelForQuestionAnswering": "modeling_cove_dcn.CoveForQuestionAnswering"}
    assert code.custom_pipelines == {}
    assert {path.name for path in code.files} == set(MANIFEST["CoveForQuestionAnswering"].files)
    for name in QA_PIPELINE.files:
        if not (tmp_path / name).exists():
            shutil.copyfile(PACKAGE / name, tmp_path / name)
    code = checkpoint_code("CoveForQuestionAnswering", package_dir=tmp_path)
    assert code.custom_pipelines == {"question-answering": QA_PIPELINE.entry()}
    assert {path.name for path in code.files} == set(QA_PIPELINE.files)
    assert checkpoint_code("CoveModel", package_dir=tmp_path).custom_pipelines == {}  # the DCN's, not others'
    with pytest.raises(ValueError, match="cannot ship the code of CoveForSequenceClassification: "
                                         "modeling_cove_bcn.py"):
        checkpoint_code("CoveForSequenceClassification", package_dir=tmp_path)
    with pytest.raises(ValueError, match="architecture 'BertModel' has no Hub code: expected one of"):
        checkpoint_code("BertModel")
    with pytest.raises(ValueError, match="'CoveConfig' has no Hub code"):
        checkpoint_code("CoveConfig")

    class MyModel(CoveModel):  # a user's subclass saves as the class it extends
        pass

    assert checkpoint_code(MyModel).auto_map == FULL_AUTO_MAP


def test_package_registers_each_class_with_the_auto_class_its_checkpoints_name():
    """`import modeling_cove` and a checkpoint's `auto_map` agree: both read the Auto class of each class from
    `hub.MANIFEST`, and the local pipelines take the model class the checkpoint's entry names (the tagger's also as
    "token-classification" itself)."""
    import transformers
    from transformers.pipelines import PIPELINE_REGISTRY

    import modeling_cove

    for name, entry in MANIFEST.items():
        cls = getattr(modeling_cove, name)
        assert cls.__module__ == f"modeling_cove.{entry.module}"
        if entry.auto_class != "AutoConfig":
            assert getattr(transformers, entry.auto_class)._model_mapping[CoveConfig] is cls, name
    assert transformers.AutoConfig.for_model("cove").__class__ is CoveConfig
    _, task, _ = PIPELINE_REGISTRY.check_task("cove-question-answering")
    assert task["impl"] is CoveQuestionAnsweringPipeline
    assert [cls.__name__ for cls in task["pt"]] == list(QA_PIPELINE.pt)
    assert QA_PIPELINE.impl == f"pipeline_cove.{CoveQuestionAnsweringPipeline.__name__}"
    for name in ("cove-token-classification", "token-classification"):
        _, task, _ = PIPELINE_REGISTRY.check_task(name)
        assert task["impl"] is CoveTokenClassificationPipeline
        assert [cls.__name__ for cls in task["pt"]] == list(TAGGER_PIPELINE.pt)
    assert TAGGER_PIPELINE.impl == f"pipeline_cove.{CoveTokenClassificationPipeline.__name__}"


# ----------------------------------------------------------------------------------------------------------------
# The manifest is the imports: a module that gains a relative import must be added to it
# ----------------------------------------------------------------------------------------------------------------


def relative_imports(path: Path) -> set:
    """The flat modules `path` imports from its own folder (`from .x import y`, `from . import x`), anywhere in the
    file: transformers fetches a function's lazy import as much as one at the top."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            assert node.level == 1, f"{path.name}: the package is flat, {'.' * node.level} reaches outside it"
            names.update([node.module.split(".")[0]] if node.module else [alias.name for alias in node.names])
    return names


def import_closure(file_name: str, package_dir: Path) -> set:
    """`file_name` and every file of `package_dir` it reaches through relative imports."""
    seen, todo = set(), [file_name]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [f"{module}.py" for module in relative_imports(package_dir / name)]
    return seen


def manifest_problems(package_dir: Path) -> list:
    """Where `MANIFEST` / `PIPELINES` disagree with the files in `package_dir`: each class's files must be
    the import closure of its module (a pipeline's: of its module, plus its architecture's files), and cover what
    transformers' remote-code loader fetches (found by its own line matching, which also reads docstrings)."""
    from transformers.dynamic_module_utils import get_relative_import_files

    needs = {name: (f"{entry.module}.py", set(entry.files), set()) for name, entry in MANIFEST.items()}
    needs.update({task: (f"{pipe.impl.split('.')[0]}.py", set(pipe.files), set(MANIFEST[pipe.architecture].files))
                  for task, pipe in PIPELINES.items()})
    problems = []
    for name, (module_file, listed, base) in needs.items():
        closure = import_closure(module_file, package_dir) | base
        fetched = {module_file} | {Path(f).name for f in get_relative_import_files(str(package_dir / module_file))}
        if closure != listed:
            problems.append(f"{name}: its imports reach {sorted(closure)}, hub.py lists {sorted(listed)}")
        if not fetched <= listed:
            problems.append(f"{name}: transformers fetches {sorted(fetched - listed)}, which hub.py does not list")
    return problems


def test_manifest_lists_exactly_the_files_each_class_imports():
    assert manifest_problems(PACKAGE) == []
    for entry in MANIFEST.values():  # a class's own module is its first file's closure root
        assert f"{entry.module}.py" in entry.files


def test_manifest_check_catches_a_new_import(tmp_path):
    """The check above fails when a module gains an import the manifest lacks, also a lazy one in a function
    (as modeling_cove.py's import of build.py for the truncated-weights error was), or loses one."""
    package = tmp_path / "modeling_cove"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "metrics"))
    with open(package / "modeling_cove_bcn.py", "a", encoding="utf-8") as handle:
        handle.write("\n\ndef read_glove(path):\n    from .vectors import read_word_vectors\n\n"
                     "    return read_word_vectors(path)\n")
    problems = manifest_problems(package)
    assert problems and all(problem.startswith("CoveForSequenceClassification:") for problem in problems)
    assert "vectors.py" in problems[0] and "transformers fetches ['vectors.py']" in problems[1]
    shutil.copyfile(PACKAGE / "modeling_cove_bcn.py", package / "modeling_cove_bcn.py")
    source = (package / "modeling_cove_mt.py").read_text(encoding="utf-8")
    (package / "modeling_cove_mt.py").write_text(source.replace("from .modeling_cove import", "from .hub import"),
                                                 encoding="utf-8")
    assert [problem.split(":")[0] for problem in manifest_problems(package)] == ["CoveForMachineTranslation"]


RESAVE = """
import json, sys
sys.modules["modeling_cove"] = None  # as for a user without the package
from transformers import AutoModelForQuestionAnswering
AutoModelForQuestionAnswering.from_pretrained(sys.argv[1], trust_remote_code=True).save_pretrained(sys.argv[2])
"""

LOAD_NAMED = """
import importlib, json, sys
sys.modules["modeling_cove"] = None
import transformers
folder = sys.argv[1]
config = json.load(open(folder + "/config.json"))
for auto in config["auto_map"]:
    if auto != "AutoConfig":
        model = getattr(transformers, auto).from_pretrained(folder, trust_remote_code=True)
        print(auto, type(model).__name__)
for task in config.get("custom_pipelines", {}):
    print(task, type(transformers.pipeline(task, model=folder, trust_remote_code=True)).__name__)
"""


def test_a_model_resaved_without_the_package_names_only_the_code_it_ships(built, tmp_path):
    """Fine-tuning `org/cove-dcn` without the package: the model runs as remote code, and only the files it imported
    are beside it, so saving it again ships only those. Its config must then name only their classes and no
    pipeline whose file is missing (it used to keep every Auto class and the QA pipeline, which then failed to load
    in a fresh process), and everything it names must load there."""
    env, resaved = offline_env(tmp_path / "hf_home"), tmp_path / "resaved"
    for script, args in ((RESAVE, [str(built["dcn_stage"].folder), str(resaved)]), (LOAD_NAMED, [str(resaved)])):
        result = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                                cwd=str(tmp_path), timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((resaved / "config.json").read_text())
    shipped = {path.name for path in resaved.glob("*.py")}
    assert "pipeline_cove.py" not in shipped and "modeling_cove_bcn.py" not in shipped
    # exactly the DCN's files from the manifest: the ones transformers fetched to run it, nothing else
    assert shipped == set(MANIFEST["CoveForQuestionAnswering"].files)
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForQuestionAnswering"}
    assert "custom_pipelines" not in config
    named = [ref for ref in config["auto_map"].values()] + [
        spec["impl"] for spec in (config.get("custom_pipelines") or {}).values()]
    assert all(f"{ref.split('.')[0]}.py" in shipped for ref in named), (named, shipped)
    assert config["auto_map"]["AutoModelForQuestionAnswering"] == "modeling_cove_dcn.CoveForQuestionAnswering"
    loaded_classes = result.stdout.split()
    assert loaded_classes[loaded_classes.index("AutoModelForQuestionAnswering") + 1] == "CoveForQuestionAnswering"


SAVE_AND_PUSH = """
import sys
from modeling_cove import CoveModel
model = CoveModel.from_pretrained(sys.argv[1])
model.save_pretrained(sys.argv[2], push_to_hub=True, repo_id=sys.argv[3], token=sys.argv[4], commit_message="resave")
"""


def test_save_pretrained_with_push_to_hub_uploads_the_code_files(built, hub, tmp_path):
    """`save_pretrained(dir, push_to_hub=True, repo_id=...)`: the upload happens after the code files are copied in,
    so the repo gets what its auto_map names (it used to fail on a `safe_serialization` argument transformers 5 no
    longer takes, and to upload before the code files were there)."""
    env = offline_env(tmp_path / "hf_home")
    env.update({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": hub.url,
                "HF_HUB_DISABLE_XET": "1", "NO_PROXY": "127.0.0.1"})
    folder = tmp_path / "saved"
    result = subprocess.run([sys.executable, "-c", SAVE_AND_PUSH, str(built["base_ckpt"]), str(folder),
                             "org/cove-resaved", TOKEN], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(hub.commits) == 1 and hub.commits[0]["header"]["summary"] == "resave"
    uploaded = set(hub.commits[0]["files"])
    local = {path.name for path in folder.iterdir() if path.is_file()}
    assert {"config.json", "model.safetensors", "modeling_cove.py", "configuration_cove.py"} <= uploaded
    assert shipped_code("base") <= uploaded and local <= uploaded and not NOT_MODEL_CODE & uploaded


def test_round_trip_upload_then_download_online(loaded, built):
    """What push_to_hub uploads is what `from_pretrained("org/name", trust_remote_code=True)` downloads and runs."""
    tensors, info = loaded["online"]
    assert info["package_importable"] is False
    for key, _, _ in built["heads"]:
        assert info[f"hub.{key}"]["module"].startswith("transformers_modules."), key
    check_hub_outputs(built, tensors, loaded["expected"])
    assert len(loaded["online_commits"]) == len(built["heads"])
    calls = loaded["online_calls"]
    known = re.compile(r"/[^/]+/[^/]+/resolve/(main|[0-9a-f]{40})/.+"
                       r"|/api/models/[^/]+/[^/]+(/tree/main(/.+)?|/revision/main)?")
    unknown = [(method, path) for method, path, _ in calls
               if method not in ("GET", "HEAD") or not known.fullmatch(path)]
    assert calls and not unknown  # only downloads, model info and file listings: every request was understood
    downloaded = {re.sub(r".*/resolve/[^/]+/", "", path) for method, path, _ in calls
                  if method == "GET" and "/resolve/" in path}
    assert {"config.json", "model.safetensors", "tokenizer.json", "modeling_cove.py"} <= downloaded
    # the probe answered 404 (EntryNotFound) and the subfolder tokenizer still loaded
    assert any(re.search(r"/cove-mt/resolve/[^/]+/target_tokenizer/config\.json$", path) for _, path, _ in calls)
    assert loaded["online"][1]["hub.mt"]["target_vocab"] == len(built["target_tokenizer"])


def test_text_classification_pipeline_from_hub_id(loaded):
    expected = loaded["expected"]
    for mode in ("with", "without", "online"):
        _, info = loaded[mode]
        single, pair = info["bcn.pipeline"]["outputs"]
        for output, logits in ((single, expected["bcn.logits"][1]), (pair, expected["bcn.pair_logits"][0])):
            probs = torch.softmax(logits, dim=-1)
            result = output[0] if isinstance(output, list) else output
            assert result["label"] == LABELS[int(probs.argmax())]
            assert result["score"] == pytest.approx(float(probs.max()), abs=5e-7, rel=0)
    assert loaded["with"][1]["bcn.pipeline"]["model_module"] == "modeling_cove.modeling_cove_bcn"
    assert loaded["without"][1]["bcn.pipeline"]["model_module"].startswith("transformers_modules.")


def test_question_answering_pipeline_from_hub_id(loaded):
    reference = loaded["expected"]["dcn.pipeline"]
    assert CONTEXT[reference["start"]:reference["end"]] == reference["answer"]
    for mode, task_module in (("with", "modeling_cove.pipeline_cove"), ("without", "transformers_modules."),
                              ("online", "transformers_modules.")):
        result = loaded[mode][1]["dcn.pipeline"]
        assert result["pipeline_class"] == "CoveQuestionAnsweringPipeline"
        assert result["pipeline_module"].startswith(task_module), mode
        (answer,) = result["outputs"]
        assert (answer["answer"], answer["start"], answer["end"]) == (reference["answer"], reference["start"],
                                                                      reference["end"])
        assert answer["score"] == pytest.approx(reference["score"], abs=0, rel=0)


def test_translation_model_and_target_tokenizer_from_hub_id(loaded, built):
    expected_text = built["target_tokenizer"].batch_decode(loaded["expected"]["mt.generated"], skip_special_tokens=True)
    for mode in ("with", "without", "online"):
        info = loaded[mode][1]["hub.mt"]
        assert info["target_vocab"] == len(built["target_tokenizer"])
        assert info["decoded"] == expected_text


# ----------------------------------------------------------------------------------------------------------------
# Upload against a local Hub
# ----------------------------------------------------------------------------------------------------------------


class RecordingHub(ThreadingHTTPServer):
    """The Hub endpoints `HfApi.create_repo / create_branch / upload_folder` use, plus file downloads
    (`/{repo}/resolve/{revision}/{path}`, what `from_pretrained` fetches), backed by dicts, recording calls."""

    daemon_threads = True

    def __init__(self, token: str):
        super().__init__(("127.0.0.1", 0), HubHandler)
        self.token = token
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.calls = []  # (method, path, json body or None)
        self.repos = {}  # repo id -> {"visibility": ..., "branches": {name: {path: bytes}}, "heads": {name: oid}}
        self.lfs = {}  # sha256 -> bytes
        self.commits = []
        self.lock = threading.Lock()

    def resolve(self, repo_id: str, revision: str):
        """(files, commit id) of a branch or of a commit id; (None, None) when unknown."""
        repo = self.repos.get(repo_id)
        if repo is None:
            return None, None
        if revision in repo["heads"]:
            return repo["branches"][revision], repo["heads"][revision]
        if revision in repo["snapshots"]:
            return repo["snapshots"][revision], revision
        return None, None


class HubHandler(BaseHTTPRequestHandler):
    server: RecordingHub

    def log_message(self, *args):
        pass

    def body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def reply(self, status: int, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {self.server.token}":
            self.reply(401, {"error": "Invalid credentials in Authorization header"})
            return False
        return True

    def handle_any(self, method: str):
        raw = self.body()
        path = unquote(self.path.split("?")[0])
        try:
            parsed = json.loads(raw) if raw and "ndjson" not in (self.headers.get("Content-Type") or "") \
                and not path.startswith("/_lfs/") else None
        except ValueError:
            parsed = None
        with self.server.lock:
            self.server.calls.append((method, path, parsed))
        hub = self.server
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(branch|preupload|commit)/(.+)", path)
        if method == "POST" and path == "/api/repos/create":
            if not self.authorized():
                return
            repo_id = f"{parsed['organization']}/{parsed['name']}"
            if repo_id in hub.repos:
                return self.reply(409, {"error": "You already created this model repo", "url": f"{hub.url}/{repo_id}"})
            initial = hashlib.sha1(repo_id.encode()).hexdigest()
            hub.repos[repo_id] = {"visibility": parsed.get("visibility"), "branches": {"main": {}},
                                  "heads": {"main": initial}, "snapshots": {initial: {}}}
            return self.reply(200, {"url": f"{hub.url}/{repo_id}", "name": repo_id})
        if method == "POST" and path == "/api/validate-yaml":
            text = parsed["content"]
            match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
            try:
                meta = yaml.safe_load(match.group(1)) if match else None
                assert isinstance(meta, dict)
            except Exception as err:  # noqa: BLE001
                return self.reply(400, {"errors": [{"message": f"bad YAML metadata: {err}"}]})
            return self.reply(200, {"errors": [], "warnings": []})
        if m and method == "POST":
            repo_id, action, revision = m.groups()
            if not self.authorized():
                return
            if repo_id not in hub.repos:
                return self.reply(404, {"error": "Repository not found"})
            branches = hub.repos[repo_id]["branches"]
            if action == "branch":
                if revision in branches:
                    return self.reply(409, {"error": "Reference already exists"})
                branches[revision] = dict(branches["main"])
                hub.repos[repo_id]["heads"][revision] = hub.repos[repo_id]["heads"]["main"]
                return self.reply(200, {})
            if revision not in branches:
                return self.reply(404, {"error": f"Invalid rev id: {revision}"})
            if action == "preupload":
                files = [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith((".safetensors", ".png"))
                          or f["size"] > 10_000_000 else "regular", "shouldIgnore": False} for f in parsed["files"]]
                return self.reply(200, {"files": files})
            # commit: ndjson, header first
            lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
            header, files = lines[0], {}
            for line in lines[1:]:
                value = line["value"]
                if line["key"] == "file":
                    files[value["path"]] = base64.b64decode(value["content"])
                elif line["key"] == "lfsFile":
                    if value["oid"] not in hub.lfs:
                        return self.reply(422, {"error": f"LFS object {value['oid']} was never uploaded"})
                    files[value["path"]] = hub.lfs[value["oid"]]
                else:
                    return self.reply(400, {"error": f"unexpected operation {line['key']}"})
            branches[revision].update(files)
            oid = hashlib.sha1(raw).hexdigest()
            hub.repos[repo_id]["heads"][revision] = oid
            hub.repos[repo_id]["snapshots"][oid] = dict(branches[revision])
            hub.commits.append({"repo": repo_id, "revision": revision, "header": header["value"], "lines": lines,
                                "files": files})
            return self.reply(200, {"commitUrl": f"{hub.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                                    "success": True})
        m = re.fullmatch(r"/([^/]+/[^/]+)\.git/info/lfs/objects/batch", path)
        if m and method == "POST":
            if not self.authorized():
                return
            objects = []
            for obj in parsed["objects"]:
                entry = {"oid": obj["oid"], "size": obj["size"]}
                if obj["oid"] not in hub.lfs:
                    entry["actions"] = {"upload": {"href": f"{hub.url}/_lfs/{obj['oid']}"},
                                        "verify": {"href": f"{hub.url}/_lfs_verify"}}
                objects.append(entry)
            return self.reply(200, {"transfer": "basic", "objects": objects})
        if method == "PUT" and path.startswith("/_lfs/"):
            oid = path.rsplit("/", 1)[1]
            if hashlib.sha256(raw).hexdigest() != oid:
                return self.reply(400, {"error": "sha256 mismatch"})
            hub.lfs[oid] = raw
            return self.reply(200, {})
        if method == "POST" and path == "/_lfs_verify":
            return self.reply(200 if parsed["oid"] in hub.lfs else 404, {})
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            return self.serve_file(method, *m.groups())
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+?)(?:/revision/([^/]+)|/tree/([^/]+)(?:/(.+))?)?", path)
        if m and method == "GET":  # model_info / list_repo_tree, which transformers' tokenizer loading asks for
            repo_id, revision = m.group(1), m.group(2) or m.group(3) or "main"
            files, head = hub.resolve(repo_id, revision)
            if head is None:
                return self.reply(404, {"error": "Repository or revision not found"})
            repo = hub.repos[repo_id]
            if m.group(3) is None:
                return self.reply(200, {"id": repo_id, "sha": head,
                                        "private": repo["visibility"] == "private", "tags": [],
                                        "siblings": [{"rfilename": name} for name in sorted(files)]})
            prefix = f"{m.group(4)}/" if m.group(4) else ""
            files = {name: data for name, data in files.items() if name.startswith(prefix)}
            if not files:  # the Hub answers 404 for a folder that does not exist
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            folders = sorted({name.rsplit("/", 1)[0] for name in files if "/" in name[len(prefix):]})
            return self.reply(200, [{"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest()}
                                    for f in folders]
                              + [{"type": "file", "path": name, "size": len(data),
                                  "oid": hashlib.sha1(data).hexdigest()} for name, data in sorted(files.items())])
        return self.reply(404, {"error": f"no route {method} {path}"})

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_GET(self):
        self.handle_any("GET")

    def do_HEAD(self):
        self.handle_any("HEAD")

    def serve_file(self, method: str, repo_id: str, revision: str, file_path: str):
        """A file of a branch, with the headers huggingface_hub's download reads (X-Repo-Commit, ETag, size);
        404s carry the X-Error-Code the client maps to RepositoryNotFound / RevisionNotFound / EntryNotFound."""
        files, head = self.server.resolve(repo_id, revision)
        repo = self.server.repos.get(repo_id)
        data = files.get(file_path) if head else None
        if data is None:
            code = "RepoNotFound" if repo is None else "RevisionNotFound" if head is None else "EntryNotFound"
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            if head:
                self.send_header("X-Repo-Commit", head)
            body = json.dumps({"error": code}).encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if method == "GET":
                self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", head)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(data)


@contextlib.contextmanager
def serve_hub():
    """A RecordingHub on 127.0.0.1 with this process's huggingface_hub allowed to reach it (legacy LFS protocol)."""
    from huggingface_hub import constants

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(constants, "HF_HUB_OFFLINE", False)  # the tests set it; this server is local
        mp.setattr(constants, "HF_HUB_DISABLE_XET", True)  # legacy LFS protocol (what this server speaks)
        mp.setenv("NO_PROXY", "127.0.0.1")
        server = RecordingHub(TOKEN)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()


@pytest.fixture
def hub():
    with serve_hub() as server:
        yield server


def test_upload_sends_every_file_and_the_commit_message(built, hub, tmp_path, capsys):
    ckpt = built["base_ckpt"]
    stage_dir = tmp_path / "stage"
    done = publish.publish(ckpt, ckpt / "eval_results.json", BASE_REPO, curve=built["curve"], private=True,
                           revision="v1", commit_message="CoVe tiny: first upload", token=TOKEN, endpoint=hub.url,
                           output_dir=stage_dir)
    printed = capsys.readouterr()
    assert done.commit_url and stage_dir.is_dir()  # a given staging folder is kept
    routes = [(method, path) for method, path, _ in hub.calls]
    # order: create repo, create branch, (validate README), preupload, LFS, commit
    assert routes[0] == ("POST", "/api/repos/create")
    assert hub.calls[0][2] == {"name": "cove-large", "organization": "org", "type": "model", "visibility": "private"}
    assert routes[1] == ("POST", f"/api/models/{BASE_REPO}/branch/v1")
    assert ("POST", "/api/validate-yaml") in routes
    assert ("POST", f"/api/models/{BASE_REPO}/preupload/v1") in routes
    assert routes[-1] == ("POST", f"/api/models/{BASE_REPO}/commit/v1")
    assert not [r for r in routes if r[1].startswith("/api/") and r[0] == "GET"]  # nothing unexpected was asked
    assert len(hub.commits) == 1
    commit = hub.commits[0]
    assert commit["header"]["summary"] == "CoVe tiny: first upload"
    assert commit["revision"] == "v1"
    staged = {p.relative_to(stage_dir).as_posix(): p.read_bytes() for p in stage_dir.rglob("*") if p.is_file()}
    assert set(commit["files"]) == set(staged)  # every staged file, nothing else
    for name, data in staged.items():
        assert commit["files"][name] == data, name  # byte-identical on the "Hub"
    # weights and curve went through LFS with their sha256 (the fingerprint the eval JSON records)
    lfs_lines = {line["value"]["path"]: line["value"] for line in commit["lines"] if line["key"] == "lfsFile"}
    assert set(lfs_lines) == {"model.safetensors", "training_curve.png"}
    record = json.loads(staged["eval_results.json"])
    assert lfs_lines["model.safetensors"]["oid"] == record["model"]["weights_sha256"]
    assert hub.repos[BASE_REPO]["visibility"] == "private"
    readme_checks = [body for method, path, body in hub.calls if path == "/api/validate-yaml"]
    assert readme_checks and readme_checks[0]["content"] == staged["README.md"].decode()
    assert "uploaded to" in printed.out


def test_second_upload_to_main_reuses_the_repo(built, hub, tmp_path):
    ckpt = built["base_ckpt"]
    for _ in range(2):  # the second time create_repo answers 409 -> exist_ok
        staging = publish.publish(ckpt, ckpt / "eval_results.json", BASE_REPO, token=TOKEN, endpoint=hub.url).staging
        assert not staging.folder.exists()  # a temporary staging folder goes after the upload
    routes = [(method, path) for method, path, _ in hub.calls]
    assert routes.count(("POST", "/api/repos/create")) == 2
    assert not any("/branch/" in path for _, path in routes)  # main needs no branch
    # no --private: no visibility sent, the namespace's default applies
    assert hub.calls[0][2] == {"name": "cove-large", "organization": "org", "type": "model"}
    assert len(hub.commits) == 2 and hub.commits[1]["revision"] == "main"
    assert hub.commits[0]["header"]["summary"].startswith("Upload CoveModel (Multi30k test: BLEU 31.42)")
    # the second time, the LFS store already holds the weights: not sent again
    puts = [path for method, path, _ in hub.calls if method == "PUT"]
    assert len(puts) == 1  # the weights, once (no curve given here)
    assert set(hub.repos[BASE_REPO]["branches"]["main"]) >= {"model.safetensors", "README.md", "config.json"}


def test_wrong_token_is_reported_by_the_hub(built, hub):
    ckpt = built["base_ckpt"]
    with pytest.raises(UploadError) as err:
        publish.publish(ckpt, ckpt / "eval_results.json", BASE_REPO, token="hf_wrong", endpoint=hub.url)
    assert "the Hub refused the upload" in str(err.value) and "401" in str(err.value)
    assert "the assembled folder is kept in" in str(err.value)
    paths = [path for _, path, _ in hub.calls]
    assert paths[0] == "/api/repos/create"  # (create_repo then asks whether the repo exists: 404 here)
    assert not any("/preupload/" in path or "/commit/" in path or "lfs" in path for path in paths)
    assert not hub.commits and not hub.repos


@pytest.mark.slow
def test_command_line_dry_run_bad_input_and_refused_upload(built, hub, tmp_path, capsys):
    """scripts/push_to_hub.py as a user runs it: exit 0 (dry run, offline, in its own process); its main(argv), in this
    process against the local Hub: 2 (bad input), 1 (the Hub refuses)."""
    from modeling_cove.training.commands import push_to_hub

    ckpt = built["base_ckpt"]
    offline = offline_env(tmp_path / "hf_home")  # a dry run needs no network
    offline.pop("HF_TOKEN", None)
    common = [str(ckpt), "--eval-json", str(ckpt / "eval_results.json")]
    dry = subprocess.run([sys.executable, str(REPO / "scripts" / "push_to_hub.py"), *common, "--repo-id", BASE_REPO,
                          "--dry-run", "--output-dir", str(tmp_path / "stage")], capture_output=True, text=True,
                         env=offline, cwd=tmp_path, timeout=300)
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing uploaded" in dry.stdout and (tmp_path / "stage" / "README.md").is_file()
    status, err = exit_of(push_to_hub.main, [*common, "--repo-id", "org/co--ve", "--token", TOKEN, "--endpoint",
                                             hub.url], capsys)
    assert status == 2 and err.startswith("error: malformed repo id 'org/co--ve'")
    status, err = exit_of(push_to_hub.main, [*common, "--repo-id", BASE_REPO, "--token", "hf_wrong", "--endpoint",
                                             hub.url], capsys)
    assert status == 1 and "error: the Hub refused the upload" in err
    assert not hub.commits


# ----------------------------------------------------------------------------------------------------------------
# Bad input: clear errors, no request
# ----------------------------------------------------------------------------------------------------------------


def run_bad(hub, checkpoint_dir, eval_json, repo_id=BASE_REPO, **kwargs) -> str:
    with pytest.raises(PublishError) as err:
        publish.publish(checkpoint_dir, eval_json, repo_id, token=TOKEN, endpoint=hub.url, **kwargs)
    assert not isinstance(err.value, UploadError)
    assert hub.calls == []  # nothing reached the Hub
    return str(err.value)


def copy_checkpoint(built, tmp_path, drop=()) -> Path:
    import shutil

    target = tmp_path / "ckpt"
    shutil.copytree(built["base_ckpt"], target)
    for name in drop:
        (target / name).unlink()
    return target


def test_missing_weights(built, hub, tmp_path):
    ckpt = copy_checkpoint(built, tmp_path, drop=["model.safetensors"])
    err = run_bad(hub, ckpt, ckpt / "eval_results.json")
    assert "no weights" in err and "model.safetensors" in err


def test_pickled_weights_are_refused(built, hub, tmp_path):
    ckpt = copy_checkpoint(built, tmp_path, drop=["model.safetensors"])
    torch.save(built["base"].state_dict(), ckpt / "pytorch_model.bin")
    err = run_bad(hub, ckpt, ckpt / "eval_results.json")
    assert "pickled weights" in err and "pytorch_model.bin" in err and "safetensors" in err


def test_pickle_beside_safetensors_is_left_out(built, tmp_path):
    ckpt = copy_checkpoint(built, tmp_path)
    torch.save(built["base"].state_dict(), ckpt / "pytorch_model.bin")
    stage = publish.assemble(ckpt, ckpt / "eval_results.json", BASE_REPO, output_dir=tmp_path / "stage")
    assert not (stage.folder / "pytorch_model.bin").exists()
    assert ("pytorch_model.bin", "pickled weights are never published") in stage.skipped


def test_checkpoint_without_tokenizer(built, hub, tmp_path):
    ckpt = copy_checkpoint(built, tmp_path, drop=["tokenizer.json"])
    err = run_bad(hub, ckpt, ckpt / "eval_results.json")
    assert "no tokenizer" in err and "tokenizer.json" in err and "save_pretrained" in err


def test_evaluation_json_of_another_model(built, hub, tmp_path):
    torch.manual_seed(123)
    other = CoveModel(tiny_config(vocab_size=len(built["tokenizer"]))).eval()  # same config, other weights
    other_dir = save_checkpoint(other, built["tokenizer"], tmp_path / "other", record_kwargs("base"))
    ckpt = built["base_ckpt"]
    err = run_bad(hub, ckpt, other_dir / "eval_results.json")
    assert "describes another model" in err and "weights sha256" in err and "config sha256" not in err
    # a head's JSON for the encoder: architecture and config differ too
    err = run_bad(hub, ckpt, built["bcn_ckpt"] / "eval_results.json")
    assert "architecture 'CoveForSequenceClassification' != checkpoint's 'CoveModel'" in err


def test_malformed_evaluation_json(built, hub, tmp_path):
    ckpt = built["base_ckpt"]
    record = json.loads((ckpt / "eval_results.json").read_text())
    record["metrics"] = [{"type": "bleu", "value": 3141.59}]
    del record["training"]["command"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(record))
    err = run_bad(hub, ckpt, bad)
    assert "training.command is required" in err and "percent" in err


@pytest.mark.parametrize("repo_id", ["cove-large", "org/cove large", "org//cove", "a/b/c", "org/-cove", "org/cove.git",
                                     "org/co--ve", "org/" + "x" * 97, ""])
def test_malformed_repo_id(built, hub, repo_id):
    ckpt = built["base_ckpt"]
    err = run_bad(hub, ckpt, ckpt / "eval_results.json", repo_id)
    assert "malformed repo id" in err


def test_no_token(built, hub, monkeypatch, tmp_path):
    from huggingface_hub import constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))  # no stored login either
    ckpt = built["base_ckpt"]
    with pytest.raises(PublishError, match="no Hugging Face token.*HF_TOKEN"):
        publish.publish(ckpt, ckpt / "eval_results.json", BASE_REPO, endpoint=hub.url)
    assert hub.calls == []


def test_non_empty_output_dir_and_bad_curve(built, hub, tmp_path):
    ckpt = built["base_ckpt"]
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x.txt").write_text("x")
    err = run_bad(hub, ckpt, ckpt / "eval_results.json", output_dir=tmp_path / "busy")
    assert "not empty" in err
    fake = tmp_path / "curve.png"
    fake.write_text("not a png")
    err = run_bad(hub, ckpt, ckpt / "eval_results.json", curve=fake)
    assert "not a PNG" in err


def test_tokenizer_of_another_vocabulary(built, hub, tmp_path):
    ckpt = copy_checkpoint(built, tmp_path)
    build_cove_tokenizer(WORDS[:5]).save_pretrained(ckpt)  # weights and eval JSON still match, the tokenizer not
    err = run_bad(hub, ckpt, ckpt / "eval_results.json")
    assert f"the tokenizer has 9 tokens but the model's vocab_size is {len(WORDS) + 4}" in err


# ----------------------------------------------------------------------------------------------------------------
# The tokenizer through AutoTokenizer without the package
# ----------------------------------------------------------------------------------------------------------------
# Why `AutoTokenizer.from_pretrained(ckpt)` alone prompts "[y/N]" without the package: transformers reads config.json
# with AutoConfig first, for every folder; its auto_map names configuration_cove.CoveConfig (remote code, needed for
# AutoModel with trust_remote_code=True) and "cove" is not a model type transformers knows unless `modeling_cove` is
# imported (it registers it). No content of tokenizer_config.json changes that. The tokenizer itself is the stock
# class: these are the ways that load it with no prompt, no warning and no tokenizer code from the checkpoint.
TOKENIZER_LOADER = r'''
import json, sys
mode, source = sys.argv[1], sys.argv[2]
if mode == "package":
    import modeling_cove  # noqa: F401  (registers the "cove" model type)
else:
    sys.modules["modeling_cove"] = None  # `import modeling_cove` now raises ImportError
import transformers
if mode == "fast":
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(source)
else:
    tokenizer = transformers.AutoTokenizer.from_pretrained(source, **({"trust_remote_code": True} if mode == "trust"
                                                                      else {}))
print("RESULT " + json.dumps({
    "class": type(tokenizer).__name__, "module": type(tokenizer).__module__,
    "ids": tokenizer(sys.argv[3:], padding=True)["input_ids"],
    "model_max_length": tokenizer.model_max_length,
    "remote_modules": sorted(name for name in sys.modules if name.startswith("transformers_modules")),
}))
'''


def load_tokenizer_in_fresh_process(mode: str, source: str, hf_home: Path, cwd: Path) -> tuple:
    """(result dict, full output) of TOKENIZER_LOADER in a fresh interpreter, offline, stdin closed (a prompt would
    print its question and read EOF)."""
    script = cwd / "tokenizer_loader.py"
    script.write_text(TOKENIZER_LOADER)
    env = offline_env(hf_home)
    env["PYTHONPATH"] = str(REPO) if mode == "package" else ""
    proc = subprocess.run([sys.executable, str(script), mode, source, *SENTENCES], env=env, cwd=str(cwd),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):]), proc.stdout


@pytest.mark.parametrize("mode", ["trust", "fast", "package"])
def test_tokenizer_loads_without_prompt_warning_or_tokenizer_code(built, tmp_path, mode):
    """From the Hub id (offline cache) and from the checkpoint folder: the stock transformers class, the original
    ids, the saved model_max_length; no "[y/N]" question, no "model of type `cove`" warning. "trust":
    AutoTokenizer(trust_remote_code=True) without the package runs only the config's code, "fast":
    PreTrainedTokenizerFast.from_pretrained runs none, "package": AutoTokenizer with `modeling_cove` imported needs
    no flag."""
    hf_home = tmp_path / "hf_home"
    build_offline_cache(hf_home, BASE_REPO, built["base_stage"].folder)
    tokenizer = built["tokenizer"]
    expected = tokenizer(SENTENCES, padding=True)["input_ids"]
    for source in (BASE_REPO, str(built["base_ckpt"])):
        result, output = load_tokenizer_in_fresh_process(mode, source, hf_home, tmp_path)
        assert "[y/N]" not in output and "custom code" not in output, output
        assert "model of type" not in output, output
        assert result["module"].startswith("transformers.") and result["class"] in ("TokenizersBackend",
                                                                                      "PreTrainedTokenizerFast")
        assert result["ids"] == expected and result["model_max_length"] == tokenizer.model_max_length
        if mode == "fast":
            assert result["remote_modules"] == []  # no code from the checkpoint at all
        if mode == "trust":  # only the configuration file (AutoConfig), never a tokenizer or model module
            files = {name.rsplit(".", 1)[-1] for name in result["remote_modules"]}
            assert "configuration_cove" in files and not files & {"tokenization_cove", "modeling_cove"}, files


# ----------------------------------------------------------------------------------------------------------------
# A truncated or corrupt weights file: the error names the file and the fix
# ----------------------------------------------------------------------------------------------------------------
def truncate(path: Path, size: int) -> Path:
    with open(path, "r+b") as handle:
        handle.truncate(size)
    return path


def read_error(weights: Path) -> Exception:
    """What safetensors raises when transformers opens `weights` (names no file)."""
    from safetensors import SafetensorError, safe_open

    with pytest.raises(SafetensorError) as error:
        with safe_open(str(weights), framework="pt"):
            pass
    return error.value


def test_safetensors_file_problem_reads_the_layout(built, tmp_path):
    from modeling_cove.hub import safetensors_file_problem

    weights = built["base_ckpt"] / "model.safetensors"
    assert safetensors_file_problem(weights) is None
    size = weights.stat().st_size
    header_length = int.from_bytes(weights.read_bytes()[:8], "little")
    cases = {
        size // 2: f"it has {size // 2} bytes but its header describes {size} (the end is missing)",
        8 + header_length // 2: f"header length field says {header_length} bytes of metadata",
        5: "it has 5 bytes, fewer than the 8-byte header length field",
    }
    for cut, reason in cases.items():
        copy = tmp_path / f"cut{cut}.safetensors"
        copy.write_bytes(weights.read_bytes()[:cut])
        assert reason in safetensors_file_problem(copy)
    longer = tmp_path / "longer.safetensors"
    longer.write_bytes(weights.read_bytes() + b"\0")
    assert "extra bytes" in safetensors_file_problem(longer)
    page = tmp_path / "page.safetensors"  # e.g. an HTML error page saved under the weights' name
    page.write_bytes((20).to_bytes(8, "little") + b"<html>not found</htm")
    assert "not valid JSON" in safetensors_file_problem(page)


def test_truncated_weights_error_names_the_file_and_the_fix(built, tmp_path):
    from modeling_cove.hub import raise_for_unreadable_weights

    folder = tmp_path / "ckpt"
    shutil.copytree(built["base_ckpt"], folder)
    weights = folder / "model.safetensors"
    size = weights.stat().st_size
    truncate(weights, size // 2)
    error = read_error(weights)
    assert "incomplete metadata" in str(error) and str(weights) not in str(error)  # what users saw: no file named
    with pytest.raises(OSError) as wrapped:
        raise_for_unreadable_weights(error, str(folder))
    message = str(wrapped.value)
    assert f"{weights} ({size // 2} bytes): it has {size // 2} bytes but its header describes {size}" in message
    assert "interrupted or truncated" in message and "copy or download it again" in message
    assert "incomplete metadata" in message and wrapped.value.__cause__ is error
    # CovePreTrainedModel.from_pretrained raises exactly this error
    with pytest.raises(OSError) as loading:
        CoveModel.from_pretrained(folder)
    assert str(loading.value) == message.replace(str(error), str(loading.value.__cause__))


def test_truncated_weights_in_the_hub_cache_name_the_cached_file(built, tmp_path):
    """A Hub id (the download was cut off): the error names the file in the cache and force_download=True."""
    from modeling_cove.hub import raise_for_unreadable_weights

    snapshot = build_offline_cache(tmp_path / "hf_home", BASE_REPO, built["base_stage"].folder)
    truncate(snapshot / "model.safetensors", 100)
    error = read_error(snapshot / "model.safetensors")
    with pytest.raises(OSError) as wrapped:
        raise_for_unreadable_weights(error, BASE_REPO, cache_dir=tmp_path / "hf_home" / "hub")
    message = str(wrapped.value)
    assert f"{snapshot / 'model.safetensors'} (100 bytes)" in message
    assert f"from_pretrained('{BASE_REPO}', force_download=True)" in message


def test_unreadable_weights_without_a_broken_file_still_names_the_checkpoint(built, tmp_path):
    from modeling_cove.hub import raise_for_unreadable_weights

    folder = tmp_path / "ckpt"
    shutil.copytree(built["base_ckpt"], folder)
    cause = ValueError("some other read failure")
    with pytest.raises(OSError, match=f"cannot load the weights of {re.escape(str(folder))} in .*some other read"):
        raise_for_unreadable_weights(cause, str(folder))
    with pytest.raises(OSError, match="cannot load the weights of org/absent: some other read failure.*force_down"):
        raise_for_unreadable_weights(cause, "org/absent", cache_dir=tmp_path / "empty")


# ----------------------------------------------------------------------------------------------------------------
# The pages' Python blocks as a user runs them
# ----------------------------------------------------------------------------------------------------------------

TAGGER_REPO = "org/cove-tagger"
# after a page's block: what its comments promise, printed as JSON
USAGE_CHECKS = """
import json
print("SHOWN " + json.dumps({
    "hidden": list(out.last_hidden_state.shape), "layers": len(enc(**batch, output_hidden_states=True).hidden_states),
    "ids": list(batch["input_ids"].shape), "vectors": [list(v.shape) for v in enc.encode(["a dog ran .", "a"], tok)],
    "tokens": [len(tok(text)["input_ids"]) for text in ("a dog ran .", "a")], "bf16": str(vectors[0].dtype),
    "final": enc(**batch, output_final_states=True).final_hidden_state is not None,
    "features": len(pipeline("feature-extraction", model="org/cove-large")("The cat sat .")[0]),
    "single": clf("A gripping , beautifully shot film ."), "pair": clf({"text": "a dog ran .", "text_pair": "a"}),
    "qa": sorted(qa(question="Who won?", context="The Broncos won the game.")),
    "ner": ner(["Paris, France is nice.", ""], batch_size=2)}, default=str))
"""
TAGGING_CHECKS = """
import json
local = pipeline("token-classification", model="runs/tag/c2k/best", aggregation_strategy="simple")
every = dict(ignore_labels=[])  # a random tiny tagger may tag all "O", which the default leaves out
print("SHOWN " + json.dumps({"one": local("Paris, France is nice.", **every),
                             "batch": local(["Paris, France is nice.", ""], batch_size=2, **every),
                             "split": local(["Paris,", "don't"], is_split_into_words=True, **every),
                             "remote": type(tagger).__name__, "remote_one": tagger("Paris, France is nice.", **every),
                             "folder_one": pipeline("token-classification", model="runs/tag/c2k/best")(
                                 "Paris, France is nice.", **every)}, default=str))
"""


def run_page_block(page: str, built, tmp_path, checks: str) -> dict:
    """The one Python block of docs/<page>, word for word and then `checks`, in a fresh process with the package
    installed: its Hub ids (org/cove-large, -bcn-sst2, -dcn-squad, -tagger) served from an offline cache of this
    module's tiny models, its local path runs/tag/c2k/best the tiny tagger's folder. What `checks` printed."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / page).read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 1, f"{page}: one python block expected, found {len(blocks)}"
    hf_home = tmp_path / "hf_home"
    for repo, key in ((BASE_REPO, "base"), (BCN_REPO, "bcn"), (DCN_REPO, "dcn")):
        build_offline_cache(hf_home, repo, built[f"{key}_stage"].folder)
    build_offline_cache(hf_home, TAGGER_REPO, built["tagger_ckpt"])
    shutil.copytree(built["tagger_ckpt"], tmp_path / "runs" / "tag" / "c2k" / "best")
    script = tmp_path / "page.py"
    script.write_text(blocks[0] + checks, encoding="utf-8")
    env = {**offline_env(hf_home), "OMP_NUM_THREADS": "1"}  # one core, as the test workers beside it
    run = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.split("SHOWN ", 1)[1])


def test_usage_page_runs_as_written(built, tmp_path):
    """docs/usage.md's block, then what its comments promise: (B, T, D) states, three hidden states, one tensor a
    text from `encode`, bf16 under autocast, final states on request, a label for a text and for a pair, the
    answer's fields, [] for an empty text."""
    shown = run_page_block("usage.md", built, tmp_path, USAGE_CHECKS)
    config = built["base"].config
    assert shown["hidden"][:2] == shown["ids"] and shown["layers"] == 3 and shown["final"]
    assert shown["vectors"][0][1] == shown["hidden"][2] and [v[0] for v in shown["vectors"]] == shown["tokens"]
    assert shown["bf16"] == "torch.bfloat16" and shown["features"] == shown["hidden"][1]
    assert shown["hidden"][2] in (2 * config.hidden_size, config.word_vector_dim + 2 * config.hidden_size)
    # a text gives a list of one label, a pair (a dict) the label itself, as transformers' pipeline gives for BERT
    assert len(shown["single"]) == 1 and shown["single"][0]["label"] in LABELS and shown["pair"]["label"] in LABELS
    assert shown["qa"] == ["answer", "end", "score", "start"]
    assert len(shown["ner"]) == 2 and shown["ner"][1] == []


def test_tagging_page_runs_as_written(built, tmp_path):
    """docs/tagging.md's block (a saved tagger's folder, then a Hub id), then what its comments promise: entities
    with their word and character span in the text, [] for a text without tokens, pre-split words."""
    shown = run_page_block("tagging.md", built, tmp_path, TAGGING_CHECKS)
    text = "Paris, France is nice."
    assert shown["one"] and all(text[e["start"]:e["end"]] == e["word"] and e["entity_group"] in ("NP", "O")
                                for e in shown["one"])
    assert shown["batch"][0] == shown["one"] and shown["batch"][1] == []
    # pre-split words: one result a sentence (transformers' own pipeline wraps a single sentence so too), its groups
    # covering the words in order
    assert len(shown["split"]) == 1 and "".join(e["word"] for e in shown["split"][0]).replace(" ", "") == "Paris,don't"
    # the Hub id (the same tiny tagger, from the cache) tags as the folder does
    assert shown["remote"] == "CoveTokenClassificationPipeline" and shown["remote_one"] == shown["folder_one"]
