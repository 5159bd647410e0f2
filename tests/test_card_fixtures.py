"""Every checkpoint kind's model card, rendered from fixed inputs, against the text the card writers produced before
they became one (tests/fixtures/cards/<kind>.md, made from tests/fixtures/cards/inputs.json).

The YAML front matter is compared as data (the writer may order or quote keys differently), the Markdown body as
text. `python tests/test_card_fixtures.py --write` renders the fixtures again (only for a deliberate change of the
card text, stated in the commit that makes it).
"""

import json
import sys
from pathlib import Path

import pytest
import yaml

from modeling_cove import CoveConfig
from modeling_cove.training.publishing import cards

FIXTURES = Path(__file__).parent / "fixtures" / "cards"
INPUTS = json.loads((FIXTURES / "inputs.json").read_text(encoding="utf-8"))
KINDS = ("bcn", "dcn", "mt", "encoder", "tagger", "mt_encoder_export", "bilm_encoder_export")


def render(kind: str) -> str:
    """The card of `kind` from its fixed inputs, with today's writer."""
    if kind in INPUTS["cards"]:
        given = INPUTS["cards"][kind]
        return cards.render_card(given["record"], given["config"], given["repo_id"], **given["options"])
    given = INPUTS[kind]
    config = CoveConfig.from_dict(given["config"])
    if kind == "mt_encoder_export":
        card = cards.encoder_export_card("mt", config, given["metrics"], path=given["out_dir"], name=given["name"])
        return str(card)
    return str(cards.encoder_export_card("bilm", config, given["metrics"]))


def split_card(text: str) -> tuple:
    """(the front matter as data, the body as text)."""
    assert text.startswith("---\n"), text[:80]
    metadata, body = text[len("---\n"):].split("\n---\n", 1)
    return yaml.safe_load(metadata), body.strip("\n")


@pytest.mark.parametrize("kind", KINDS)
def test_card_text_is_unchanged(kind):
    metadata, body = split_card(render(kind))
    want_metadata, want_body = split_card((FIXTURES / f"{kind}.md").read_text(encoding="utf-8"))
    assert metadata == want_metadata
    assert body == want_body


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    for name in KINDS:
        (FIXTURES / f"{name}.md").write_text(render(name), encoding="utf-8")
