"""The generator of the embedded default data in `examples/`: synthetic English–German pairs and English sentiment
labels, from small hand-written grammars (the lexicons and rules below, described in examples/README.md). They are
synthetic data written by this project, not samples of any corpus.

The TSV files are the data the main job reads (they ship with the package; this generator does not: it is the
repository's record of where they come from). The output is a pure function of the seed (Python's `random.Random`,
no other source of randomness), and `render_all(SEED)` gives the files byte for byte:

    python examples/generator/make_examples.py            # (re)writes examples/en_de/*.tsv, examples/sentiment/*.tsv
    python examples/generator/make_examples.py --check    # exit 1 if the files in examples/ differ from a fresh run

(`scripts/make_examples.py` runs this file.) Files (UTF-8, one example per line, `\\n` line ends, a header line,
fields separated by one TAB):

    examples/en_de/{train,validation,test}.tsv       header `en<TAB>de`
    examples/sentiment/{train,validation,test}.tsv   header `text<TAB>label`, label `negative` or `positive`
"""

import difflib
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

SEED = 2017
DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parents[1]  # examples/, beside this folder
SPLITS = ("train", "validation", "test")
EN_DE_COUNTS = {"train": 4800, "validation": 200, "test": 200}  # 8x the labelled sentiment sentences
REVIEW_SHARE = 0.5  # of the translation pairs: review sentences (the sentiment grammar, unlabelled); the rest scenes
SENTIMENT_COUNTS = {"train": 600, "validation": 100, "test": 200}  # each split exactly half negative, half positive
LABELS = ("negative", "positive")

# ================================================================================================================
# English–German lexicon
# ================================================================================================================


@dataclass(frozen=True)
class Noun:
    en: str  # singular
    en_pl: Optional[str]  # plural; None for mass nouns (used only with "the"/"der-die-das" in the singular)
    gender: str  # "m", "f", "n"
    de: str  # nominative singular
    de_pl: Optional[str]  # nominative plural
    tags: FrozenSet[str]  # what the noun can be: person, animal, thing, food, readable, ...
    adj_class: str  # which adjectives fit: person, animal, thing, work, food, fruit, place
    weak: Optional[str] = None  # weak masculine nouns: accusative/dative singular (der Junge -> den Jungen)

    def german(self, case: str, plural: bool) -> str:
        if plural:
            if self.de_pl is None:
                raise ValueError(f"{self.de} has no plural")
            # dative plural adds -n unless the plural already ends in -n or -s (den Kindern, den Frauen, den Autos)
            if case == "dat" and not self.de_pl.endswith(("n", "s")):
                return self.de_pl + "n"
            return self.de_pl
        if self.weak is not None and case != "nom":
            return self.weak
        return self.de

    def english(self, plural: bool) -> str:
        return self.en_pl if plural else self.en


def _noun(en, en_pl, gender, de, de_pl, tags, adj_class, weak=None) -> Noun:
    return Noun(en, en_pl, gender, de, de_pl, frozenset(tags.split()), adj_class, weak)


NOUNS: List[Noun] = [
    # people
    _noun("man", "men", "m", "Mann", "Männer", "person animate adult", "person"),
    _noun("woman", "women", "f", "Frau", "Frauen", "person animate adult", "person"),
    _noun("boy", "boys", "m", "Junge", "Jungen", "person animate", "person", weak="Jungen"),
    _noun("girl", "girls", "n", "Mädchen", "Mädchen", "person animate", "person"),
    _noun("child", "children", "n", "Kind", "Kinder", "person animate", "person"),
    _noun("doctor", "doctors", "m", "Arzt", "Ärzte", "person animate adult", "person"),
    _noun("cook", "cooks", "m", "Koch", "Köche", "person animate adult", "person"),
    _noun("teacher", "teachers", "m", "Lehrer", "Lehrer", "person animate adult", "person"),
    _noun("student", "students", "m", "Student", "Studenten", "person animate adult", "person", weak="Studenten"),
    _noun("waiter", "waiters", "m", "Kellner", "Kellner", "person animate adult", "person"),
    _noun("friend", "friends", "m", "Freund", "Freunde", "person animate adult", "person"),
    # animals
    _noun("dog", "dogs", "m", "Hund", "Hunde", "animal animate swimmer catcher washable", "animal"),
    _noun("cat", "cats", "f", "Katze", "Katzen", "animal animate catcher", "animal"),
    _noun("bird", "birds", "m", "Vogel", "Vögel", "animal animate singer catchable", "animal"),
    _noun("horse", "horses", "n", "Pferd", "Pferde", "animal animate swimmer washable rideable", "animal"),
    _noun("cow", "cows", "f", "Kuh", "Kühe", "animal animate", "animal"),
    _noun("duck", "ducks", "f", "Ente", "Enten", "animal animate swimmer", "animal"),
    _noun("mouse", "mice", "f", "Maus", "Mäuse", "animal animate catchable", "animal"),
    # things
    _noun("ball", "balls", "m", "Ball", "Bälle", "thing carryable catchable throwable", "thing"),
    _noun("book", "books", "n", "Buch", "Bücher", "thing carryable readable writable work", "work"),
    _noun("letter", "letters", "m", "Brief", "Briefe", "thing readable writable openable", "work"),
    _noun("hat", "hats", "m", "Hut", "Hüte", "thing wearable", "thing"),
    _noun("bag", "bags", "f", "Tasche", "Taschen", "thing carryable openable", "thing"),
    _noun("flower", "flowers", "f", "Blume", "Blumen", "thing paintable carryable", "thing"),
    _noun("picture", "pictures", "n", "Bild", "Bilder", "thing paintable work", "thing"),
    _noun("car", "cars", "n", "Auto", "Autos", "thing washable drivable", "thing"),
    _noun("bicycle", "bicycles", "n", "Fahrrad", "Fahrräder", "thing washable cyclable", "thing"),
    _noun("box", "boxes", "f", "Kiste", "Kisten", "thing carryable openable", "thing"),
    _noun("window", "windows", "n", "Fenster", "Fenster", "openable", "thing"),
    _noun("song", "songs", "n", "Lied", "Lieder", "song writable work", "work"),
    _noun("film", "films", "m", "Film", "Filme", "film work", "work"),
    _noun("story", "stories", "f", "Geschichte", "Geschichten", "readable writable work", "work"),
    # food
    _noun("apple", "apples", "m", "Apfel", "Äpfel", "food", "fruit"),
    _noun("banana", "bananas", "f", "Banane", "Bananen", "food", "fruit"),
    _noun("cake", "cakes", "m", "Kuchen", "Kuchen", "food bakeable", "food"),
    _noun("pizza", "pizzas", "f", "Pizza", "Pizzen", "food bakeable", "food"),
    _noun("egg", "eggs", "n", "Ei", "Eier", "food cookable", "food"),
    _noun("bread", None, "n", "Brot", None, "food bakeable", "food"),
    _noun("soup", None, "f", "Suppe", None, "food cookable", "food"),
]
NOUN = {noun.en: noun for noun in NOUNS}


@dataclass(frozen=True)
class Location:
    en: str
    gender: str
    de: str
    preps: Tuple[Tuple[str, str], ...]  # (German preposition, English preposition), all with the dative here
    water: bool = False  # only swimming happens in water; swimming happens only in water
    built: bool = True  # takes the "place" adjectives (the old church, the big park); not rivers, beaches, ...


def _loc(en, gender, de, preps, water=False, built=True) -> Location:
    pairs = tuple(tuple(p.split("=")) for p in preps.split(","))
    return Location(en, gender, de, pairs, water, built)


LOCATIONS: List[Location] = [
    _loc("park", "m", "Park", "in=in,vor=in front of,hinter=behind,neben=next to"),
    _loc("garden", "m", "Garten", "in=in,vor=in front of,hinter=behind"),
    _loc("house", "n", "Haus", "in=in,vor=in front of,hinter=behind,neben=next to"),
    _loc("kitchen", "f", "Küche", "in=in"),
    _loc("school", "f", "Schule", "in=in,vor=in front of,neben=next to"),
    _loc("city", "f", "Stadt", "in=in", built=False),
    _loc("street", "f", "Straße", "auf=on"),
    _loc("river", "m", "Fluss", "an=by", built=False),
    _loc("lake", "m", "See", "an=by", built=False),
    _loc("beach", "m", "Strand", "an=on", built=False),
    _loc("tree", "m", "Baum", "unter=under,neben=next to", built=False),
    _loc("station", "m", "Bahnhof", "in=in,vor=in front of"),
    _loc("restaurant", "n", "Restaurant", "in=in,vor=in front of"),
    _loc("forest", "m", "Wald", "in=in", built=False),
    _loc("market", "m", "Markt", "auf=at", built=False),
    _loc("bridge", "f", "Brücke", "auf=on,unter=under"),
    _loc("church", "f", "Kirche", "in=in,vor=in front of,neben=next to"),
    _loc("window", "n", "Fenster", "an=at", built=False),
    _loc("lake", "m", "See", "in=in", water=True, built=False),
    _loc("river", "m", "Fluss", "in=in", water=True, built=False),
]


@dataclass(frozen=True)
class Adjective:
    en: str
    de: str  # stem; a stem ending in -e drops the ending's e (müde + er -> müder)
    classes: FrozenSet[str]
    gradable: bool  # can take "very"/"sehr"

    def german(self, ending: str) -> str:
        if self.de.endswith("e") and ending.startswith("e"):
            return self.de + ending[1:]
        return self.de + ending


def _adj(en, de, classes, gradable=True) -> Adjective:
    return Adjective(en, de, frozenset(classes.split()), gradable)


ADJECTIVES: List[Adjective] = [
    _adj("old", "alt", "person animal thing work place"),
    _adj("young", "jung", "person animal"),
    _adj("tired", "müde", "person animal"),
    _adj("happy", "glücklich", "person"),
    _adj("hungry", "hungrig", "person animal"),
    _adj("friendly", "freundlich", "person animal"),
    _adj("big", "groß", "animal thing fruit food place"),
    _adj("small", "klein", "animal thing fruit food place"),
    _adj("black", "schwarz", "animal thing", gradable=False),
    _adj("white", "weiß", "animal thing", gradable=False),
    _adj("red", "rot", "thing", gradable=False),
    _adj("blue", "blau", "thing", gradable=False),
    _adj("green", "grün", "thing fruit", gradable=False),
    _adj("new", "neu", "thing work place", gradable=False),
    _adj("beautiful", "schön", "thing work place"),
    _adj("long", "lang", "work"),
    _adj("funny", "lustig", "work"),
    _adj("exciting", "spannend", "work"),
    _adj("boring", "langweilig", "work"),
    _adj("interesting", "interessant", "work"),
    _adj("good", "gut", "work food"),
    _adj("bad", "schlecht", "work food"),
    _adj("fresh", "frisch", "food fruit"),
    _adj("delicious", "lecker", "food fruit"),
    _adj("cold", "kalt", "food"),
]

AVOID_ADJECTIVES = {"friend": {"friendly"}, "boy": {"young"}}  # "the friendly friend", "ein junger Junge"


@dataclass(frozen=True)
class Verb:
    en_3sg: str  # "reads"
    en_base: str  # "read"
    en_ing: str  # "reading"; English uses it (present progressive) unless the verb is stative
    de_3sg: str
    de_3pl: str
    subject: FrozenSet[str]  # a subject noun must have one of these tags
    object: Optional[FrozenSet[str]]  # None: intransitive; else an object noun must have one of these tags
    case: str = "acc"  # case of the object
    stative: bool = False  # simple present in English (likes, has), else present progressive (is reading)
    place: bool = True  # can take a place PP (not: like, love)
    singular_object: bool = False  # one car, bicycle or horse at a time

    def english(self, plural: bool) -> str:
        if self.stative:
            return self.en_base if plural else self.en_3sg
        return ("are " if plural else "is ") + self.en_ing

    def german(self, plural: bool) -> str:
        return self.de_3pl if plural else self.de_3sg


def _verb(en, de, subject, obj=None, case="acc", stative=False, place=True, singular_object=False) -> Verb:
    en_3sg, en_base, en_ing = en.split("/")
    de_3sg, de_3pl = de.split("/")
    return Verb(en_3sg, en_base, en_ing, de_3sg, de_3pl, frozenset(subject.split()),
                frozenset(obj.split()) if obj else None, case, stative, place, singular_object)


INTRANSITIVE_VERBS: List[Verb] = [
    _verb("sleeps/sleep/sleeping", "schläft/schlafen", "animate"),
    _verb("runs/run/running", "läuft/laufen", "animate"),
    _verb("laughs/laugh/laughing", "lacht/lachen", "person"),
    _verb("sings/sing/singing", "singt/singen", "person singer"),
    _verb("waits/wait/waiting", "wartet/warten", "animate"),
    _verb("plays/play/playing", "spielt/spielen", "person animal"),
    _verb("sits/sit/sitting", "sitzt/sitzen", "animate"),
    _verb("dances/dance/dancing", "tanzt/tanzen", "person"),
    _verb("works/work/working", "arbeitet/arbeiten", "person"),
    _verb("swims/swim/swimming", "schwimmt/schwimmen", "person swimmer"),
    _verb("eats/eat/eating", "isst/essen", "animate"),
    _verb("reads/read/reading", "liest/lesen", "person"),
]
TRANSITIVE_VERBS: List[Verb] = [
    _verb("sees/see/seeing", "sieht/sehen", "animate", "person animal thing food", stative=True),
    _verb("watches/watch/watching", "beobachtet/beobachten", "person", "animate"),
    _verb("watches/watch/watching", "sieht/sehen", "person", "film"),  # "is watching a film" = "sieht einen Film"
    _verb("has/have/having", "hat/haben", "person", "thing animal food", stative=True),
    _verb("buys/buy/buying", "kauft/kaufen", "person", "thing food"),
    _verb("eats/eat/eating", "isst/essen", "animate", "food"),
    _verb("cooks/cook/cooking", "kocht/kochen", "person", "cookable"),
    _verb("bakes/bake/baking", "backt/backen", "person", "bakeable"),
    _verb("reads/read/reading", "liest/lesen", "person", "readable"),
    _verb("writes/write/writing", "schreibt/schreiben", "person", "writable"),
    _verb("sings/sing/singing", "singt/singen", "person", "song"),
    _verb("carries/carry/carrying", "trägt/tragen", "person", "carryable"),
    _verb("wears/wear/wearing", "trägt/tragen", "person", "wearable"),
    _verb("finds/find/finding", "findet/finden", "person animal", "thing", stative=True),
    _verb("likes/like/liking", "mag/mögen", "person", "person animal thing food work", stative=True, place=False),
    _verb("loves/love/loving", "liebt/lieben", "person", "person animal food work", stative=True, place=False),
    _verb("hears/hear/hearing", "hört/hören", "animate", "person animal song", stative=True),
    _verb("paints/paint/painting", "malt/malen", "person", "paintable animal"),
    _verb("visits/visit/visiting", "besucht/besuchen", "person", "person"),
    _verb("helps/help/helping", "hilft/helfen", "person", "person", case="dat"),
    _verb("follows/follow/following", "folgt/folgen", "animate", "animate", case="dat"),
    _verb("opens/open/opening", "öffnet/öffnen", "person", "openable"),
    _verb("feeds/feed/feeding", "füttert/füttern", "person", "animal"),
    _verb("washes/wash/washing", "wäscht/waschen", "person", "washable"),
    _verb("drives/drive/driving", "fährt/fahren", "adult", "drivable", singular_object=True),
    _verb("rides/ride/riding", "fährt/fahren", "person", "cyclable", singular_object=True),
    _verb("rides/ride/riding", "reitet/reiten", "person", "rideable", singular_object=True),
    _verb("throws/throw/throwing", "wirft/werfen", "person", "throwable"),
    _verb("catches/catch/catching", "fängt/fangen", "person catcher", "catchable"),
]

# determiner -> (English singular/plural word, plural?)
DETERMINERS_EN = {"def": "the", "indef": "a", "this": "this", "these": "these", "defpl": "the", "many": "many",
                  "two": "two", "three": "three", "four": "four", "five": "five"}
NUMBERS_DE = {"two": "zwei", "three": "drei", "four": "vier", "five": "fünf"}
PLURAL_DETERMINERS = {"these", "defpl", "many", "two", "three", "four", "five"}

# German articles by (determiner kind, case, gender or "pl")
DEF_ARTICLE = {
    "nom": {"m": "der", "f": "die", "n": "das", "pl": "die"},
    "acc": {"m": "den", "f": "die", "n": "das", "pl": "die"},
    "dat": {"m": "dem", "f": "der", "n": "dem", "pl": "den"},
}
INDEF_ARTICLE = {
    "nom": {"m": "ein", "f": "eine", "n": "ein"},
    "acc": {"m": "einen", "f": "eine", "n": "ein"},
    "dat": {"m": "einem", "f": "einer", "n": "einem"},
}
DIES_ENDING = {  # dieser/diese/dieses: der-word endings
    "nom": {"m": "er", "f": "e", "n": "es", "pl": "e"},
    "acc": {"m": "en", "f": "e", "n": "es", "pl": "e"},
    "dat": {"m": "em", "f": "er", "n": "em", "pl": "en"},
}
# adjective endings: weak after der/dieser (and in every plural with an article), mixed after ein, strong with no
# inflected article (zwei/drei/... and after viele, which itself takes strong endings)
WEAK_ENDING = {
    "nom": {"m": "e", "f": "e", "n": "e", "pl": "en"},
    "acc": {"m": "en", "f": "e", "n": "e", "pl": "en"},
    "dat": {"m": "en", "f": "en", "n": "en", "pl": "en"},
}
MIXED_ENDING = {
    "nom": {"m": "er", "f": "e", "n": "es"},
    "acc": {"m": "en", "f": "e", "n": "es"},
    "dat": {"m": "en", "f": "en", "n": "en"},
}
STRONG_PLURAL_ENDING = {"nom": "e", "acc": "e", "dat": "en"}


def english_article(word_after: str) -> str:
    return "an" if word_after[0] in "aeiou" else "a"


def english_np(noun: Noun, det: str, adj: Optional[Adjective] = None, very: bool = False) -> str:
    plural = det in PLURAL_DETERMINERS
    words = (["very"] if very else []) + ([adj.en] if adj else []) + [noun.english(plural)]
    first = english_article(words[0]) if det == "indef" else DETERMINERS_EN[det]
    return " ".join([first] + words)


def german_np(noun: Noun, det: str, case: str, adj: Optional[Adjective] = None, very: bool = False) -> str:
    """German noun phrase, e.g. ("man", "indef", "acc", old) -> "einen alten Mann"."""
    plural = det in PLURAL_DETERMINERS
    key = "pl" if plural else noun.gender
    if det in ("def", "defpl"):
        article, ending = DEF_ARTICLE[case][key], WEAK_ENDING[case][key]
    elif det in ("this", "these"):
        article, ending = "dies" + DIES_ENDING[case][key], WEAK_ENDING[case][key]
    elif det == "indef":
        article, ending = INDEF_ARTICLE[case][key], MIXED_ENDING[case][key]
    elif det == "many":
        article, ending = "viel" + STRONG_PLURAL_ENDING[case], STRONG_PLURAL_ENDING[case]
    else:  # numbers do not inflect; the adjective takes the strong ending
        article, ending = NUMBERS_DE[det], STRONG_PLURAL_ENDING[case]
    words = [article] + (["sehr"] if very else []) + ([adj.german(ending)] if adj else [])
    return " ".join(words + [noun.german(case, plural)])


def german_pp(prep: str, location: Location, det: str, adj: Optional[Adjective] = None) -> str:
    """Place PP in the dative; in/an + dem contract to im/am ("im großen Park", "am Fluss")."""
    np = german_np(Noun(location.en, None, location.gender, location.de, None, frozenset(), "place"),
                   det, "dat", adj)
    if prep in ("in", "an") and np.startswith("dem "):
        return {"in": "im", "an": "am"}[prep] + np[3:]
    return f"{prep} {np}"


def english_pp(prep: str, location: Location, det: str, adj: Optional[Adjective] = None) -> str:
    words = ([adj.en] if adj else []) + [location.en]
    article = english_article(words[0]) if det == "indef" else "the"
    return " ".join([prep, article] + words)


def capitalize(sentence: str) -> str:
    return sentence[0].upper() + sentence[1:]


# ================================================================================================================
# English–German generator
# ================================================================================================================


class PairGenerator:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.last_nouns: List[str] = []  # the head nouns of the last `coordinated` call

    def choice(self, items):
        return self.rng.choice(list(items))

    def nouns_with(self, tags: FrozenSet[str], exclude: Sequence[str] = ()) -> List[Noun]:
        return [n for n in NOUNS if n.tags & tags and n.en not in exclude]

    def noun_phrase(self, noun: Noun, case: str, allow_plural: bool = True, modifier_p: float = 0.3):
        rng = self.rng
        if noun.en_pl is None:
            det = "def"
        else:
            r = rng.random()
            if r < 0.35:
                det = "def"
            elif r < 0.65:
                det = "indef"
            elif r < 0.7:
                det = "this"
            elif not allow_plural:
                det = self.choice(["def", "indef"])
            elif r < 0.82:
                det = "defpl"
            elif r < 0.95:
                det = self.choice(["two", "three", "four", "five"])
            elif r < 0.98:
                det = "many"
            else:
                det = "these"
        adj, very = None, False
        if rng.random() < modifier_p:
            adj = self.choice(a for a in ADJECTIVES
                              if noun.adj_class in a.classes and a.en not in AVOID_ADJECTIVES.get(noun.en, ()))
            very = adj.gradable and rng.random() < 0.2
        return english_np(noun, det, adj, very), german_np(noun, det, case, adj, very), det in PLURAL_DETERMINERS

    def coordinated(self, tags: FrozenSet[str], case: str, coordinate_p: float, allow_plural: bool = True):
        """One NP, or two different nouns joined by and/und (then plural)."""
        first = self.choice(self.nouns_with(tags))
        en, de, plural = self.noun_phrase(first, case, allow_plural=allow_plural)
        self.last_nouns = [first.en]
        if not allow_plural:
            return en, de, plural
        others = self.nouns_with(tags, exclude=[first.en])
        if others and self.rng.random() < coordinate_p:
            second = self.choice(others)
            en2, de2, _ = self.noun_phrase(second, case, modifier_p=0.15)
            self.last_nouns.append(second.en)
            return f"{en} and {en2}", f"{de} und {de2}", True
        return en, de, plural

    def place(self, water: bool):
        location = self.choice(l for l in LOCATIONS if l.water == water)
        de_prep, en_prep = self.choice(location.preps)
        det = "indef" if self.rng.random() < 0.12 else "def"
        adj = None
        if location.built and self.rng.random() < 0.15:
            adj = self.choice(a for a in ADJECTIVES if "place" in a.classes)
        return english_pp(en_prep, location, det, adj), german_pp(de_prep, location, det, adj)

    def clause(self, simple: bool = False) -> Tuple[str, str]:
        rng = self.rng
        transitive = rng.random() < 0.6
        verb = self.choice(TRANSITIVE_VERBS if transitive else INTRANSITIVE_VERBS)
        subj_en, subj_de, plural = self.coordinated(verb.subject, "nom", 0.0 if simple else 0.1)
        subject_nouns = self.last_nouns
        obj_en = obj_de = None
        if verb.object is not None:
            obj_en, obj_de, _ = self.coordinated(verb.object, verb.case, 0.0 if simple else 0.08,
                                                 allow_plural=not verb.singular_object)
        with_en = with_de = None
        if verb.object is None and not verb.stative and rng.random() < (0.1 if simple else 0.2):
            companion = self.choice(self.nouns_with(frozenset(["animate"]), exclude=subject_nouns))
            en, de, _ = self.noun_phrase(companion, "dat")
            with_en, with_de = f"with {en}", f"mit {de}"
        place_en = place_de = None
        swimming = verb.en_base == "swim"
        if verb.place and rng.random() < (0.3 if simple else 0.55):
            place_en, place_de = self.place(water=swimming)
        time_en = time_de = None
        if not verb.stative and rng.random() < (0.05 if simple else 0.15):
            time_en, time_de = self.choice([("today", "heute"), ("now", "jetzt")])

        verb_en, verb_de = verb.english(plural), verb.german(plural)
        tail_en = [x for x in (obj_en, with_en) if x]
        tail_de = [x for x in (obj_de, with_de) if x]
        front = None
        if not simple and time_en and rng.random() < 0.5:
            front = "time"
        elif not simple and place_en and rng.random() < 0.12:
            front = "place"
        if front == "time":  # "Heute liest der Mann ein Buch im Park." = "Today the man is reading a book in the park."
            en = [time_en, subj_en, verb_en] + tail_en + ([place_en] if place_en else [])
            de = [time_de, verb_de, subj_de] + tail_de + ([place_de] if place_de else [])
        elif front == "place":  # "Im Park schläft der Hund." = "In the park the dog is sleeping."
            en = [place_en, subj_en, verb_en] + tail_en + ([time_en] if time_en else [])
            de = [place_de, verb_de, subj_de] + ([time_de] if time_de else []) + tail_de
        else:  # German: time before objects and places; English: time last
            en = [subj_en, verb_en] + tail_en + ([place_en] if place_en else []) + ([time_en] if time_en else [])
            de = [subj_de, verb_de] + ([time_de] if time_de else []) + tail_de + ([place_de] if place_de else [])
        return " ".join(en), " ".join(de)

    def sentence(self) -> Tuple[str, str]:
        r = self.rng.random()
        if r < 0.8:
            en, de = self.clause()
        else:
            (en1, de1), (en2, de2) = self.clause(simple=True), self.clause(simple=True)
            if r < 0.92:
                en, de = f"{en1} and {en2}", f"{de1} und {de2}"
            else:
                en, de = f"{en1}, but {en2}", f"{de1}, aber {de2}"
        return capitalize(en) + ".", capitalize(de) + "."


def distinct_pairs(make, count: int, seen_en: set, seen_de: set, what: str) -> List[Tuple[str, str]]:
    """`count` pairs from `make()` whose English and German sides are not in `seen_en` / `seen_de` (both updated)."""
    pairs: List[Tuple[str, str]] = []
    attempts = 0
    while len(pairs) < count:
        attempts += 1
        if attempts > 100 * count:
            raise RuntimeError(f"the {what} grammar does not produce enough distinct sentences")
        en, de = make()
        if en in seen_en or de in seen_de:
            continue
        seen_en.add(en)
        seen_de.add(de)
        pairs.append((en, de))
    return pairs


def scene_pairs(seed: int, count: int, seen_en: set, seen_de: set) -> List[Tuple[str, str]]:
    """`count` distinct (English, German) scene sentences (people, animals and things doing things)."""
    generator = PairGenerator(random.Random(f"en_de-{seed}"))
    return distinct_pairs(generator.sentence, count, seen_en, seen_de, "scene")


def review_pairs(seed: int, count: int, seen_en: set, seen_de: set) -> List[Tuple[str, str]]:
    """`count` distinct (English, German) review sentences of the sentiment grammar, without their labels. `seen_en`
    holds every sentiment text, so no labelled sentence is ever translated."""
    rng = random.Random(f"reviews-{seed}")
    generator = SentimentGenerator(rng)
    return distinct_pairs(lambda: generator.sentence_pair(rng.choice(LABELS)), count, seen_en, seen_de, "review")


def generate_en_de(seed: int = SEED, counts: Dict[str, int] = EN_DE_COUNTS,
                   exclude: FrozenSet[str] = frozenset()) -> Dict[str, List[Tuple[str, str]]]:
    """Unique (English, German) pairs per split, half scene sentences and half review sentences (shuffled together):
    no English and no German sentence occurs twice anywhere, and no English sentence is in `exclude` (the sentiment
    texts, `render_all`)."""
    seen_en, seen_de = set(exclude), set()
    total = sum(counts.values())
    reviews = round(REVIEW_SHARE * total)
    scenes = scene_pairs(seed, total - reviews, seen_en, seen_de)
    pool = review_pairs(seed, reviews, seen_en, seen_de)
    rng = random.Random(f"en_de-mix-{seed}")
    out, s, r = {}, 0, 0
    for split in SPLITS:
        n_reviews = round(REVIEW_SHARE * counts[split])
        rows = scenes[s : s + counts[split] - n_reviews] + pool[r : r + n_reviews]
        s, r = s + counts[split] - n_reviews, r + n_reviews
        rng.shuffle(rows)
        out[split] = rows
    return out


# ================================================================================================================
# Sentiment lexicon and generator (English only, same word pool where possible)
# ================================================================================================================


@dataclass(frozen=True)
class Target:
    en: str  # singular noun
    plural: Optional[str]
    domain: str  # work, food, place, people
    context: Tuple[str, ...]  # neutral past-tense events: "we {} the film" -> "watched", "saw"
    gender: str  # of the German noun
    de: str
    de_pl: Optional[str]

    def noun(self) -> Noun:
        """The German noun (for the inflection helpers above)."""
        return Noun(self.en, self.plural, self.gender, self.de, self.de_pl, frozenset(), self.domain)


TARGETS: List[Target] = [
    Target("film", "films", "work", ("watched", "saw"), "m", "Film", "Filme"),
    Target("book", "books", "work", ("read", "bought"), "n", "Buch", "Bücher"),
    Target("story", "stories", "work", ("read", "heard"), "f", "Geschichte", "Geschichten"),
    Target("song", "songs", "work", ("heard", "sang"), "n", "Lied", "Lieder"),
    Target("picture", "pictures", "work", ("saw", "bought"), "n", "Bild", "Bilder"),
    Target("soup", None, "food", ("ate", "cooked"), "f", "Suppe", None),
    Target("bread", None, "food", ("ate", "bought"), "n", "Brot", None),
    Target("cake", "cakes", "food", ("ate", "bought"), "m", "Kuchen", "Kuchen"),
    Target("pizza", "pizzas", "food", ("ate", "ordered"), "f", "Pizza", "Pizzen"),
    Target("apple", "apples", "food", ("ate", "bought"), "m", "Apfel", "Äpfel"),
    Target("food", None, "food", ("ate", "ordered"), "n", "Essen", None),
    Target("restaurant", "restaurants", "place", ("visited", "found"), "n", "Restaurant", "Restaurants"),
    Target("park", "parks", "place", ("visited", "saw"), "m", "Park", "Parks"),
    Target("garden", "gardens", "place", ("visited", "saw"), "m", "Garten", "Gärten"),
    Target("market", "markets", "place", ("visited", "found"), "m", "Markt", "Märkte"),
    Target("waiter", "waiters", "people", ("met", "saw"), "m", "Kellner", "Kellner"),
    Target("cook", "cooks", "people", ("met", "saw"), "m", "Koch", "Köche"),
    Target("teacher", "teachers", "people", ("met", "saw"), "m", "Lehrer", "Lehrer"),
]
# modifiers that never clash with an evaluation ("the new film was boring")
TARGET_MODIFIERS = {"work": ["new", "old"], "food": [], "place": ["new", "old"], "people": ["new"]}
TARGET_PLACES = {"work": [], "food": ["in the restaurant", "at the market"],
                 "place": ["in the city", "by the river", "next to the station", "behind the church"],
                 "people": ["in the restaurant", "in the school"]}

# Words whose polarity depends on what they describe, as their translation does: "funny" is "lustig" (amusing,
# positive) for a film or a waiter but "komisch" (strange, negative) for a soup or a park; "cheap" is "günstig"
# (good value, positive) for food or a place but "billig" (shoddy, negative) for a film or a picture. The English
# word alone does not tell the label; its context does, and translating it needs the same context.
POSITIVE = {
    "work": ["good", "great", "wonderful", "excellent", "interesting", "exciting", "funny", "beautiful"],
    "food": ["good", "great", "wonderful", "excellent", "delicious", "fresh", "tasty", "cheap"],
    "place": ["good", "great", "wonderful", "excellent", "beautiful", "clean", "quiet", "cheap"],
    "people": ["good", "great", "wonderful", "friendly", "helpful", "kind", "polite", "funny"],
}
NEGATIVE = {
    "work": ["bad", "terrible", "awful", "boring", "dull", "silly", "cheap"],
    "food": ["bad", "terrible", "awful", "cold", "stale", "dry", "salty", "funny"],
    "place": ["bad", "terrible", "awful", "dirty", "noisy", "ugly", "funny"],
    "people": ["bad", "terrible", "rude", "unfriendly", "slow", "lazy"],
}
NEUTRAL = {  # only used after "too", which makes them negative
    "work": ["long", "short", "loud", "sad"],
    "food": ["sweet", "big", "small"],
    "place": ["big", "small", "expensive", "busy"],
    "people": ["busy", "young"],
}
CONTEXT_DEPENDENT = {"funny", "cheap"}  # in POSITIVE for some domains and NEGATIVE for others (see above)
EXTREME = {"great", "wonderful", "excellent", "terrible", "awful"}  # no "very"/"not very" before these
INTENSIFIERS = ["very", "really", "so", "quite", "extremely"]
EXTREME_INTENSIFIERS = ["really", "so"]
FLIPPERS = ["not", "never"]  # "not good" / "never boring": flip the adjective's polarity
WEAKENERS = ["not very", "not really"]  # only before positive adjectives: negative
POSITIVE_VERBS = ["liked", "loved", "enjoyed", "would recommend", "really liked"]
NEGATIVE_VERBS = ["hated", "did not like", "did not enjoy", "would not recommend", "really hated"]
EXPERIENCERS = ["I", "we", "my friend", "my friends", "the children", "the students", "the man", "the woman"]
POLARITY = {"negative": -1, "positive": 1}

# --- the German side of the review sentences (the translation pairs' second kind, `generate_en_de`) ---------------
# predicative adjectives do not inflect in German; a word whose translation depends on the domain maps per domain
ADJECTIVES_DE = {
    "good": "gut", "great": "toll", "wonderful": "wunderbar", "excellent": "ausgezeichnet",
    "interesting": "interessant", "exciting": "spannend", "beautiful": "schön", "delicious": "lecker",
    "fresh": "frisch", "tasty": "schmackhaft", "clean": "sauber", "quiet": "ruhig", "friendly": "freundlich",
    "helpful": "hilfsbereit", "kind": "nett", "polite": "höflich", "bad": "schlecht", "terrible": "schrecklich",
    "awful": "furchtbar", "boring": "langweilig", "dull": "öde", "silly": "albern", "cold": "kalt",
    "stale": "altbacken", "dry": "trocken", "salty": "salzig", "dirty": "schmutzig", "noisy": "laut",
    "ugly": "hässlich", "rude": "unhöflich", "unfriendly": "unfreundlich", "slow": "langsam", "lazy": "faul",
    "long": "lang", "short": "kurz", "loud": "laut", "sad": "traurig", "sweet": "süß", "big": "groß",
    "small": "klein", "expensive": "teuer", "young": "jung",
    "funny": {"work": "lustig", "people": "lustig", "food": "komisch", "place": "komisch"},
    "cheap": {"food": "günstig", "place": "günstig", "work": "billig"},
    "busy": {"place": "voll", "people": "beschäftigt"},
}
ADVERBS_DE = {"very": "sehr", "really": "wirklich", "so": "so", "quite": "ziemlich", "extremely": "äußerst",
              "too": "zu", "not": "nicht", "never": "nie"}
MODIFIERS_DE = {"new": "neu", "old": "alt"}  # attributive: weak endings after der/dieser
PLACES_DE = {"in the restaurant": "im Restaurant", "at the market": "auf dem Markt", "in the city": "in der Stadt",
             "by the river": "am Fluss", "next to the station": "neben dem Bahnhof",
             "behind the church": "hinter der Kirche", "in the school": "in der Schule"}
# experiencer -> (German nominative, plural verb?)
EXPERIENCERS_DE = {"I": ("ich", False), "we": ("wir", True), "my friend": ("mein Freund", False),
                   "my friends": ("meine Freunde", True), "the children": ("die Kinder", True),
                   "the students": ("die Studenten", True), "the man": ("der Mann", False),
                   "the woman": ("die Frau", False)}
# English verb phrase -> (German finite verb singular, plural, the words at the clause's end: negation, adverb or
# infinitive). German puts "nicht" and the infinitive last: "we did not like the film" = "wir mochten den Film
# nicht", "I would not recommend it" = "ich würde ... nicht empfehlen"; in a subordinate clause the finite verb
# goes after them ("obwohl wir den Film nicht mochten").
VERBS_DE = {
    "liked": ("mochte", "mochten", ""), "loved": ("liebte", "liebten", ""), "enjoyed": ("genoss", "genossen", ""),
    "would recommend": ("würde", "würden", "empfehlen"), "really liked": ("mochte", "mochten", "wirklich"),
    "hated": ("hasste", "hassten", ""), "did not like": ("mochte", "mochten", "nicht"),
    "did not enjoy": ("genoss", "genossen", "nicht"), "would not recommend": ("würde", "würden", "nicht empfehlen"),
    "really hated": ("hasste", "hassten", "wirklich"),
}
EVENTS_DE = {"watched": ("sah", "sahen"), "saw": ("sah", "sahen"), "read": ("las", "lasen"),
             "bought": ("kaufte", "kauften"), "heard": ("hörte", "hörten"), "sang": ("sang", "sangen"),
             "ate": ("aß", "aßen"), "cooked": ("kochte", "kochten"), "ordered": ("bestellte", "bestellten"),
             "visited": ("besuchte", "besuchten"), "found": ("fand", "fanden")}
EVENT_TAILS_DE = {"yesterday": "gestern", "today": "heute", "with a friend": "mit einem Freund",
                  "in the city": "in der Stadt"}
PRONOUNS_DE = {"m": "er", "f": "sie", "n": "es"}
COPULA_DE = {"is": "ist", "are": "sind", "was": "war", "were": "waren"}


def german_evaluation(evaluation: str, domain: str) -> str:
    """"not very interesting" (work) -> "nicht sehr interessant"; "funny" (food) -> "komisch"."""
    *adverbs, adjective = evaluation.split()
    de = ADJECTIVES_DE[adjective]
    return " ".join([ADVERBS_DE[a] for a in adverbs] + [de[domain] if isinstance(de, dict) else de])


@dataclass(frozen=True)
class Clause:
    """One review clause in both languages. German is kept in parts, for the three word orders a clause takes:
    main ("der Film war gut"), inverted after a fronted subordinate clause ("war der Film gut") and subordinate
    ("der Film gut war")."""

    en: str
    subject: str  # German
    verb: str  # German finite verb
    middle: str  # German: object and adverbs between the finite verb and the end ("" if none)
    end: str  # German: the clause's last words (predicate adjective, "nicht", infinitive; "" if none)

    def main(self) -> str:
        return " ".join(p for p in (self.subject, self.verb, self.middle, self.end) if p)

    def inverted(self) -> str:
        return " ".join(p for p in (self.verb, self.subject, self.middle, self.end) if p)

    def subordinate(self) -> str:
        return " ".join(p for p in (self.subject, self.middle, self.end, self.verb) if p)


class SentimentGenerator:
    """English review sentences with a polarity (the sentiment data), each with its German translation (the review
    half of the translation pairs). The German side consumes no random numbers: the English sentences are the same
    whether or not it is used."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.past = True  # tense of "is/was", chosen once per sentence

    def choice(self, items):
        return self.rng.choice(list(items))

    def target_np(self, target: Target, case: str = "nom", allow_place: bool = True) -> Tuple[str, str, bool]:
        rng = self.rng
        plural = target.plural is not None and rng.random() < 0.25
        det = self.choice(["the", "these"] if plural else ["the", "the", "this"])
        words = [det]
        modifier = None
        if TARGET_MODIFIERS[target.domain] and rng.random() < 0.2:
            modifier = self.choice(TARGET_MODIFIERS[target.domain])
            words.append(modifier)
        words.append(target.plural if plural else target.en)
        place = None
        if allow_place and TARGET_PLACES[target.domain] and rng.random() < 0.2:
            place = self.choice(TARGET_PLACES[target.domain])
            words.append(place)
        kind = {"the": "defpl" if plural else "def", "this": "this", "these": "these"}[det]
        adjective = Adjective(modifier, MODIFIERS_DE[modifier], frozenset(), False) if modifier else None
        de = german_np(target.noun(), kind, case, adjective)
        return " ".join(words), de + (" " + PLACES_DE[place] if place else ""), plural

    def evaluation(self, domain: str, polarity: int) -> str:
        """An adjective phrase with the given polarity (+1/-1), e.g. "not very interesting" (-1)."""
        rng = self.rng
        r = rng.random()
        if polarity < 0 and r < 0.12:
            return "too " + self.choice(NEUTRAL[domain])  # rule 3
        if r < 0.4:  # rule 2: flip an adjective of the opposite polarity
            if polarity < 0 and rng.random() < 0.5:
                return self.choice(WEAKENERS) + " " + self.choice(a for a in POSITIVE[domain] if a not in EXTREME)
            adjectives = NEGATIVE[domain] if polarity > 0 else POSITIVE[domain]
            return self.choice(FLIPPERS) + " " + self.choice(adjectives)
        adjective = self.choice(POSITIVE[domain] if polarity > 0 else NEGATIVE[domain])  # rule 1
        if r < 0.65:  # with an intensifier
            return self.choice(EXTREME_INTENSIFIERS if adjective in EXTREME else INTENSIFIERS) + " " + adjective
        return adjective

    def copula_clause(self, polarity: int, target: Target) -> Clause:
        np_en, np_de, plural = self.target_np(target)
        be = ("were" if plural else "was") if self.past else ("are" if plural else "is")
        evaluation = self.evaluation(target.domain, polarity)
        return Clause(f"{np_en} {be} {evaluation}", np_de, COPULA_DE[be], "",
                      german_evaluation(evaluation, target.domain))

    def verb_clause(self, polarity: int, target: Target) -> Clause:
        np_en, np_de, _ = self.target_np(target, case="acc")
        verb = self.choice(POSITIVE_VERBS if polarity > 0 else NEGATIVE_VERBS)  # rule 4
        experiencer = self.choice(EXPERIENCERS)
        subject, plural = EXPERIENCERS_DE[experiencer]
        singular_de, plural_de, end = VERBS_DE[verb]
        return Clause(f"{experiencer} {verb} {np_en}", subject, plural_de if plural else singular_de, np_de, end)

    def clause(self, polarity: int, target: Target) -> Clause:
        if self.rng.random() < 0.7:
            return self.copula_clause(polarity, target)
        return self.verb_clause(polarity, target)

    def sentence(self, label: str) -> str:
        return self.sentence_pair(label)[0]

    def sentence_pair(self, label: str) -> Tuple[str, str]:
        """An English review sentence with this label, and its German translation."""
        polarity = POLARITY[label]
        self.past = self.rng.random() < 0.6
        first, second = self.rng.sample(TARGETS, 2)  # two clauses talk about two different things
        r = self.rng.random()
        if r < 0.3:
            a = self.clause(polarity, first)
            en, de = a.en, a.main()
        elif r < 0.55:  # rule 5: "A, but B" -- B decides
            a, b = self.clause(-polarity, first), self.clause(polarity, second)
            en, de = f"{a.en}, but {b.en}", f"{a.main()}, aber {b.main()}"
        elif r < 0.65:  # rule 5: "although A, B" -- B decides; German: "obwohl" + verb-final, then verb first
            a, b = self.clause(-polarity, first), self.clause(polarity, second)
            en, de = f"although {a.en}, {b.en}", f"obwohl {a.subordinate()}, {b.inverted()}"
        elif r < 0.8:  # rule 5: "A and B" -- same polarity
            a, b = self.clause(polarity, first), self.clause(polarity, second)
            en, de = f"{a.en} and {b.en}", f"{a.main()} und {b.main()}"
        else:  # rule 6: neutral event, then the evaluation ("it" takes the German noun's gender: er, sie, es)
            target = self.choice(t for t in TARGETS if t.domain != "people")  # "it"/"they" fits no person
            np_en, np_de, plural = self.target_np(target, case="acc", allow_place=False)
            experiencer, event = self.choice(EXPERIENCERS), self.choice(target.context)
            subject, plural_subject = EXPERIENCERS_DE[experiencer]
            en = f"{experiencer} {event} {np_en}"
            de = f"{subject} {EVENTS_DE[event][plural_subject]} {np_de}"
            if self.rng.random() < 0.5:
                tail = self.choice(["yesterday", "today", "with a friend", "in the city"])
                en, de = f"{en} {tail}", f"{de} {EVENT_TAILS_DE[tail]}"
            pronoun = "they were" if plural else "it was"
            evaluation = self.evaluation(target.domain, polarity)
            pronoun_de = "sie waren" if plural else f"{PRONOUNS_DE[target.gender]} war"
            en = f"{en}, and {pronoun} {evaluation}"
            de = f"{de}, und {pronoun_de} {german_evaluation(evaluation, target.domain)}"
        return capitalize(en) + ".", capitalize(de) + "."


def generate_sentiment(seed: int = SEED, counts: Dict[str, int] = SENTIMENT_COUNTS) -> Dict[str, List[Tuple[str, str]]]:
    """Unique (text, label) examples per split, each split exactly half negative and half positive."""
    for split, n in counts.items():
        if n % 2:
            raise ValueError(f"{split}: the count must be even for an exact label balance, got {n}")
    rng = random.Random(f"sentiment-{seed}")
    generator = SentimentGenerator(rng)
    seen = set()
    out = {}
    for split in SPLITS:
        examples = []
        for i in range(counts[split]):
            label = LABELS[i % 2]
            for _ in range(1000):
                text = generator.sentence(label)
                if text not in seen:
                    break
            else:
                raise RuntimeError("the sentiment grammar does not produce enough distinct sentences")
            seen.add(text)
            examples.append((text, label))
        rng.shuffle(examples)
        out[split] = examples
    return out


# ================================================================================================================
# Files
# ================================================================================================================

HEADERS = {"en_de": ("en", "de"), "sentiment": ("text", "label")}


def render_tsv(name: str, rows: Sequence[Tuple[str, str]]) -> str:
    lines = ["\t".join(HEADERS[name])]
    for row in rows:
        for value in row:
            if "\t" in value or "\n" in value or '"' in value:
                raise ValueError(f"a generated field contains a TAB, newline or double quote: {value!r}")
        lines.append("\t".join(row))
    return "\n".join(lines) + "\n"


def render_all(seed: int = SEED) -> Dict[str, str]:
    """Relative path (e.g. "en_de/train.tsv") -> file content."""
    files = {}
    sentiment = generate_sentiment(seed)
    texts = frozenset(text for rows in sentiment.values() for text, _ in rows)
    for name, data in (("en_de", generate_en_de(seed, exclude=texts)), ("sentiment", sentiment)):
        for split in SPLITS:
            files[f"{name}/{split}.tsv"] = render_tsv(name, data[split])
    return files


def read_tsv(path) -> List[Tuple[str, ...]]:
    """Rows of one of the files (header checked and dropped)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines[-1] != "":
        raise ValueError(f"{path}: the file must end with a newline")
    header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:-1]]
    for i, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}:{i}: expected {len(header)} TAB-separated fields, got {len(row)}")
    return [tuple(row) for row in rows]


def compare_files(files: Dict[str, str], output_dir) -> List[str]:
    """The differences between `files` (relative path -> content, `render_all`) and the files in `output_dir`: one
    report per differing or missing file (its first changed lines), empty when every file is identical."""
    reports = []
    for rel, content in files.items():
        path = Path(output_dir) / rel
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == content:
            continue
        report = f"DIFFERS: {path}" + ("" if current is not None else " (missing)")
        if current is not None:
            diff = difflib.unified_diff(current.splitlines(), content.splitlines(), lineterm="", n=0)
            report += "\n" + "\n".join(list(diff)[:12])
        reports.append(report)
    return reports


def write_files(files: Dict[str, str], output_dir) -> List[Path]:
    """Write `files` (relative path -> content) under `output_dir` with `\\n` line ends; the paths written."""
    written = []
    for rel, content in files.items():
        path = Path(output_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8", newline="\n")
        written.append(path)
    return written


# ================================================================================================================
# command line
# ================================================================================================================


def main(argv=None) -> int:
    from modeling_cove.training.common.cli import option, parse_options

    @dataclass
    class Options:
        output_dir: str = option("where the files go", str(DEFAULT_OUTPUT_DIR))
        seed: int = option(f"the seed ({SEED}: the checked-in files)", SEED)
        check: bool = option("compare with the files in --output-dir, write nothing", False)

    args = parse_options(Options, argv, description=__doc__)
    files = render_all(args.seed)
    if args.check:
        reports = compare_files(files, args.output_dir)
        for report in reports:
            print(report)
        print(f"{len(files) - len(reports)}/{len(files)} files identical to a fresh run with seed {args.seed}")
        return 1 if reports else 0
    for path in write_files(files, args.output_dir):
        print(f"wrote {path} ({path.read_text(encoding='utf-8').count(chr(10)) - 1} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
