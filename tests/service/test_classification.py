from pathlib import Path

import pytest

from service.classification import ClassificationError, ClassificationScheme
from service.codes import normalise_code, syntactic_level

TINY = """\
H\t\tELECTRICITY
H01\t\tELECTRIC ELEMENTS
H01F\t\tMAGNETS; INDUCTANCES; TRANSFORMERS
H01F27/00\t0\tDetails of transformers or inductances, in general
H01F27/02\t1\tCasings
H01F27/04\t2\tLeading of conductors through casings
H01F27/06\t1\tMounting transformers
H01F2027/065\t2\t{Mounting on printed circuit boards}
H01F27/08\t1\tCooling (heat-transfer elements F28F); Ventilating
H01F27/10\t2\tLiquid cooling
H01F27/12\t3\tOil cooling
H01F27/14\t4\tExpansion chambers; Oil conservators
H01F27/16\t3\tWater cooling
H01F38/00\t0\tAdaptations of transformers for special applications
H01F38/02\t1\tAdaptations of transformers or inductances for lamps
G\t\tPHYSICS
"""


@pytest.fixture()
def tiny() -> ClassificationScheme:
    return ClassificationScheme.from_lines(TINY.splitlines())


def test_tiny_tree(tiny: ClassificationScheme) -> None:
    assert len(tiny) == 16
    assert tiny.parent("H01F27/14") == "H01F27/12"
    assert tiny.ancestors("H01F27/14") == ["H01F27/12", "H01F27/10", "H01F27/08", "H01F27/00", "H01F", "H01", "H"]
    assert tiny.parent("H01F27/16") == "H01F27/10"  # back up one dot level
    assert tiny.parent("H01F27/06") == "H01F27/00"
    # a 2000-series subgroup hangs under the latest entry one dot level up, even in another main group
    assert tiny.parent("H01F2027/065") == "H01F27/06"
    assert tiny.truncate("H01F2027/065", "main_group") == "H01F27/00"
    assert tiny.parent("H") is None
    assert tiny.children("H01F27/08") == ["H01F27/10"]
    assert tiny.children("H01F") == ["H01F27/00", "H01F38/00"]
    assert tiny.children("H01F27/14") == []
    assert tiny.title("H01F27/12") == "Oil cooling"
    assert tiny.title("H 01 F 27/12") == "Oil cooling"
    assert tiny.title("H01F99/00") is None
    assert tiny.dot_level("H01F27/14") == 4
    assert tiny.dot_level("H01F27/00") == 0
    assert tiny.dot_level("H01F") is None
    assert tiny.titles_path("H01F27/04") == [
        "ELECTRICITY",
        "ELECTRIC ELEMENTS",
        "MAGNETS; INDUCTANCES; TRANSFORMERS",
        "Details of transformers or inductances, in general",
        "Casings",
        "Leading of conductors through casings",
    ]


def test_contains_and_levels(tiny: ClassificationScheme) -> None:
    assert "H01F27/14" in tiny
    assert "H01F 27/14" in tiny
    assert "h01f" in tiny
    assert "H01F27/99" not in tiny
    assert "nonsense" not in tiny
    assert 42 not in tiny
    assert tiny.level_of("H") == "section"
    assert tiny.level_of("H01") == "class"
    assert tiny.level_of("H01F") == "subclass"
    assert tiny.level_of("H01F27/00") == "main_group"
    assert tiny.level_of("H01F27/14") == "subgroup"
    with pytest.raises(ClassificationError, match="not a classification code"):
        tiny.level_of("transformer")


@pytest.mark.parametrize(
    ("code", "level", "expected"),
    [
        ("H01F27/14", "section", "H"),
        ("H01F27/14", "class", "H01"),
        ("H01F27/14", "subclass", "H01F"),
        ("H01F27/14", "main_group", "H01F27/00"),
        ("H01F27/14", "subgroup", "H01F27/14"),
        ("H01F27/00", "main_group", "H01F27/00"),
        # not in the scheme (an IPC code seen in a corpus): by shape
        ("G06F 17/30", "main_group", "G06F17/00"),
        ("G06F17/30", "subclass", "G06F"),
        ("A61K31/4709", "class", "A61"),
    ],
)
def test_truncate(tiny: ClassificationScheme, code: str, level: str, expected: str) -> None:
    assert tiny.truncate(code, level) == expected


def test_truncate_errors(tiny: ClassificationScheme) -> None:
    with pytest.raises(ClassificationError, match="finer level"):
        tiny.truncate("H01F", "main_group")
    with pytest.raises(ClassificationError, match="unknown level"):
        tiny.truncate("H01F27/14", "group")


def test_unknown_codes_go_up_by_shape(tiny: ClassificationScheme) -> None:
    assert tiny.parent("G06F17/30") == "G06F17/00"
    assert tiny.ancestors("G06F17/30") == ["G06F17/00", "G06F", "G06", "G"]
    assert tiny.ancestors("H01F27/99") == ["H01F27/00", "H01F", "H01", "H"]  # joins the known tree


def test_edges(tiny: ClassificationScheme) -> None:
    edges = list(tiny.edges())
    assert len(edges) == len(tiny) - 2  # every entry but the two sections has a parent
    assert ("H01F27/12", "H01F27/14") in edges
    assert ("H01F", "H01F27/00") in edges
    assert all(p in tiny and c in tiny for p, c in edges)


def test_search(tiny: ClassificationScheme) -> None:
    codes = [m.code for m in tiny.search("H01F27/1", limit=10)]
    assert codes == ["H01F27/10", "H01F27/12", "H01F27/16", "H01F27/14"]  # broader (fewer dots) first
    assert [m.code for m in tiny.search("h01f 27", limit=2)] == ["H01F27/00", "H01F27/02"]
    assert [m.code for m in tiny.search("H", limit=3)] == ["H", "H01", "H01F"]
    words = tiny.search("oil cool")
    assert [m.code for m in words] == ["H01F27/12"]
    assert words[0].title == "Oil cooling" and words[0].level == "subgroup"
    # words inside parenthesised references do not match
    assert tiny.search("heat-transfer") == []
    # equally short titles: broader first
    assert [m.code for m in tiny.search("cooling")] == ["H01F27/08", "H01F27/10", "H01F27/12", "H01F27/16"]
    assert tiny.search("zzz") == []
    assert tiny.search("H01F", limit=0) == []


def test_from_codes() -> None:
    scheme = ClassificationScheme.from_codes(["H01F 27/14", "H01F27/16", "G06F17/30", "B05B"])
    assert scheme.ancestors("H01F27/14") == ["H01F27/00", "H01F", "H01", "H"]
    assert scheme.children("H01F27/00") == ["H01F27/14", "H01F27/16"]
    assert scheme.children("H") == ["H01"]
    assert "G06" in scheme and "B" in scheme
    assert scheme.title("H01F27/14") is None
    assert sorted(scheme.edges()) == sorted(
        [
            ("H", "H01"),
            ("H01", "H01F"),
            ("H01F", "H01F27/00"),
            ("H01F27/00", "H01F27/14"),
            ("H01F27/00", "H01F27/16"),
            ("G", "G06"),
            ("G06", "G06F"),
            ("G06F", "G06F17/00"),
            ("G06F17/00", "G06F17/30"),
            ("B", "B05"),
            ("B05", "B05B"),
        ]
    )
    with pytest.raises(ClassificationError):
        ClassificationScheme.from_codes(["H01F27/14", "not a code"])


@pytest.mark.parametrize(
    "bad",
    [
        "H01F27/00\tX\tbad dot level",
        "H01F27/14\t\tsubgroup without dot level",
        "H01F27/14\t3\tjumps from nothing to dot level 3",
        "H01F27/00\t1\tmain group with a subgroup's dot level",
        "only two\tfields",
        "nonsense\t\tnot a symbol",
    ],
)
def test_bad_lines(bad: str) -> None:
    with pytest.raises(ClassificationError, match="<lines>:"):
        ClassificationScheme.from_lines(["H\t\tELECTRICITY", "H01\t\tELECTRIC", "H01F\t\tMAGNETS", bad])


def test_duplicates_and_empty() -> None:
    with pytest.raises(ClassificationError, match="duplicate"):
        ClassificationScheme.from_lines(["H\t\tELECTRICITY", "H\t\tELECTRICITY"])
    with pytest.raises(ClassificationError, match="no classification entries"):
        ClassificationScheme.from_lines(["", "  "])


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="CPC title list not found"):
        ClassificationScheme.load(tmp_path / "nope.tsv.gz")


def test_load_plain_tsv(tmp_path: Path) -> None:
    path = tmp_path / "titles.tsv"
    path.write_text(TINY, encoding="utf-8")
    assert ClassificationScheme.load(path).parent("H01F27/14") == "H01F27/12"


@pytest.mark.parametrize(
    ("raw", "expected", "level"),
    [
        ("h", "H", "section"),
        ("H 01", "H01", "class"),
        ("H01F", "H01F", "subclass"),
        ("B05B 7/ 00", "B05B7/00", "main_group"),
    ],
)
def test_normalise_code(raw: str, expected: str, level: str) -> None:
    code = normalise_code(raw)
    assert code == expected
    assert syntactic_level(code) == level
    assert normalise_code("H0") is None


# ---------------------------------------------------------------- the real CPC title list


@pytest.fixture(scope="module")
def cpc(cpc_titles: Path) -> ClassificationScheme:
    return ClassificationScheme.load(cpc_titles)


@pytest.mark.realdata
def test_real_size_and_levels(cpc: ClassificationScheme) -> None:
    assert len(cpc) == 260_993
    levels = {}
    for code in cpc:
        levels[syntactic_level(code)] = levels.get(syntactic_level(code), 0) + 1
    assert levels["section"] == 9  # A-H and Y
    assert levels["main_group"] == 9843  # the entries with dot level 0
    # a tree: every entry but the sections has exactly one parent, and that parent is in the scheme
    edges = list(cpc.edges())
    assert len(edges) == len(cpc) - levels["section"]
    assert all(p in cpc for p, _ in edges[:: max(1, len(edges) // 2000)])


@pytest.mark.realdata
def test_real_hierarchy(cpc: ClassificationScheme) -> None:
    anc = cpc.ancestors("H01F27/14")
    assert anc == ["H01F27/12", "H01F27/10", "H01F27/08", "H01F27/00", "H01F", "H01", "H"]
    assert cpc.dot_level("H01F27/14") == 4
    # A01B1/08 (dot level 2) follows A01B1/065 (also 2): its parent is the level-1 entry A01B1/06
    assert cpc.dot_level("A01B1/08") == 2
    assert cpc.parent("A01B1/08") == "A01B1/06"
    assert cpc.parent("A01B1/022") == "A01B1/02"
    assert "A01B1/08" in cpc.children("A01B1/06")
    # CPC 2000-series subgroup under a main group of another number
    assert cpc.parent("H05H2007/127") == "H05H7/12"
    assert cpc.truncate("H05H2007/127", "main_group") == "H05H7/00"
    for level, expected in [("section", "H"), ("class", "H01"), ("subclass", "H01F"), ("main_group", "H01F27/00")]:
        assert cpc.truncate("H01F27/14", level) == expected


@pytest.mark.realdata
def test_real_titles(cpc: ClassificationScheme) -> None:
    assert cpc.title("H") == "ELECTRICITY"
    assert cpc.title("H01F27/00") == "Details of transformers or inductances, in general"
    assert cpc.title("H01F27/12") == "Oil cooling"
    assert cpc.title("A01B1/02") == "Spades; Shovels {(hand-operated dredgers E02F3/02)}"
    assert cpc.title("A01B1/022") == "{Collapsible; extensible; combinations with other tools}"


@pytest.mark.realdata
def test_real_search(cpc: ClassificationScheme) -> None:
    hits = cpc.search("H01F27", limit=50)
    assert len(hits) == 50
    assert all(h.code.startswith("H01F27") for h in hits)
    assert hits[0].code == "H01F27/00"
    words = [h.code for h in cpc.search("oil cooling", limit=200)]
    assert "H01F27/12" in words
