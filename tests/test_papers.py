"""The CoVe paper's numbers live in one file (the `papers` preset `mccann2017`), and every reader takes them from it:
the model cards, the result tables, the classifier's hyperparameters and the main job's report."""

from instruments import results
from modeling_cove.training.commands import train_classifier as classifier
from modeling_cove.training.common import papers
from modeling_cove.training.publishing import cards
from modeling_cove.training.commands.main_job.report import paper_numbers
from modeling_cove.training.common.presets import CONFIGURATION, load_preset

# docs/paper.md, typed here independently of the file under test
TABLE2_TREC6 = {"Random": 88.9, "GloVe": 94.9, "GloVe+Char": 94.7, "+CoVe-S": 94.7, "+CoVe-M": 95.1, "+CoVe-L": 95.8,
                "+Char+CoVe-L": 95.8}
TABLE2_IMDB_BY_INPUT = {"random": 88.4, "vectors": 91.1, "vectors+cove": 90.6}
MT_BLEU = {"multi30k": 38.5, "iwslt": 25.54, "wmt17": 28.96}


def test_the_file_holds_the_papers_numbers():
    assert papers.table2_row("trec6") == TABLE2_TREC6
    assert papers.table2_by_input("imdb") == TABLE2_IMDB_BY_INPUT
    assert papers.table2_metric("squad") == "f1" and papers.table2_row("squad")["+Char+CoVe-L"] == 79.9
    assert papers.table3_test("sst2") == 90.3 and papers.table3_test("squad") is None
    assert papers.squad_dev() == [("DCN (single model)", {"exact_match": 65.4, "f1": 75.6}),
                                  ("DCN+Char+CoVe", {"exact_match": 71.3, "f1": 79.9})]
    assert {key: papers.mt_bleu(key)["bleu"] for key in papers.mt_datasets()} == MT_BLEU
    assert papers.mt_bleu("multi30k")["test_set"] == "Multi30k test2016 (test_2016_flickr)"
    assert papers.table2_row("conll2003") == {} and papers.mt_bleu("europarl") is None
    assert "Learned in Translation" in papers.citation()


def test_every_reader_takes_them_from_the_file():
    assert classifier.load_hyperparameters("trec6")["paper_table2"] == papers.table2_by_input("trec6")
    run = {"seed": 1, "test_accuracy": 90.0, "test_macro_f1": 89.0, "best_validation_accuracy": 91.0}
    assert results.summarize("imdb", "vectors+cove", [run])["paper_table2_validation"] == 90.6
    report = paper_numbers({"preset_content": {"pretrain": {}}, "preset_file": "embedded",
                            "tasks": [{"task": "trec6", "name": "trec6"}, {"task": "tsv", "name": "mine"}]})
    assert report["mt_bleu"] == 38.5
    assert report["mt_note"] == "Multi30k test2016 (test_2016_flickr), uncased, tokenized"
    assert report["table2"]["trec6"] == {"row": "trec6", "comparable": True, **papers.table2_by_input("trec6")}
    assert report["table2"]["mine"] == {"row": "sst2", "comparable": False, **papers.table2_by_input("sst2")}
    rows = cards.paper_rows("trec6")
    assert [(label, value["accuracy"]) for label, _, value in rows[:7]] == [
        (f"{column} (Table 2)", value) for column, value in TABLE2_TREC6.items()]
    assert cards.paper_rows("multi30k") == [("MT-Small (Multi30k) → CoVe-S", "test2016", {"bleu": 38.5})]


def test_no_other_configuration_types_a_paper_number():
    for path in sorted((CONFIGURATION / "tasks").glob("*.yaml")):
        assert "paper_table2" not in load_preset(path, "tasks"), path
    for path in sorted((CONFIGURATION / "models").glob("cove-*.json")):
        assert "paper" not in load_preset(path, "models"), path


def test_cross_view_training_table1_as_docs_paper_md_states_it():
    # docs/paper.md, "Cross-View Training (Clark et al. 2018): Table 1", typed here again
    assert papers.cvt_table1_row("CVT + multi-task") == {"ner": 92.61, "pos": 97.76, "dep_uas": 96.61,
                                                         "dep_las": 95.02}
    assert papers.cvt_table1_row("CVT + multi-task + large") == {"ccg": 96.1, "ner": 92.61, "fgn": 88.81}
    assert papers.cvt_table1_row("CVT") == {"translation": 29.6}
    assert papers.cvt_table1_row("Supervised") == {}  # not found in any copy read
    assert "paperswithcode.com" in papers.cvt_table1_source("CVT + multi-task", "pos")
    assert papers.cvt_table1_source("Supervised", "chunking") is None
    chunking = papers.cvt_reported("conll2000")
    assert chunking["comparable"] and chunking["table1"] == {} and chunking["metric"] == "f1"
    assert chunking["cvt_readme"]["test_f1_at_least"] == 96.6
    earlier = papers.cvt_numbers()["earlier_version_chunking"]  # the 97.0 RESULTS.md quotes rounds its first figure
    assert (earlier["cvt_multitask_large_f1"], earlier["elmo_multitask_f1"]) == (96.98, 96.83)
    assert "paperswithcode.com/paper/cross-view-training-for-semi-supervised" in earlier["source"]
    ner = papers.cvt_reported("wnut17")
    assert not ner["comparable"] and ner["elmo"]["value"] == 92.22
    assert ner["table1"] == {"CVT + multi-task": 92.61, "CVT + multi-task + large": 92.61}
    assert papers.cvt_reported("ewt_upos")["table1"] == {"CVT + multi-task": 97.76}
    assert papers.cvt_reported("sst2") is None
