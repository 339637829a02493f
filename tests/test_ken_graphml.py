"""Ken's GraphML readers give what ``networkx.read_graphml(force_multigraph=True)`` gives.

Hypothesis writes GraphML files a byte at a time the way real writers differ: characters
escaped as the five entities, as decimal or hexadecimal character references or in CDATA;
whitespace (spaces, tabs, newlines, CR LF) between attributes and between elements; attributes
in either order and either quote; comments and processing instructions between elements; keys
of every type with values that convert or not, key defaults, edge ids, the direction default;
nodes named only by edges, listed twice, listed after the edges; and now and then a file that is
not well-formed. Each file is loaded by Ken (the everyday shape matched by
:mod:`cda.ken.graphml_scan`, the rest parsed a chunk at a time by :mod:`cda.ken.graphml`, what
neither takes by networkx) and by the networkx route of ``tests/test_ken_store.py``: the nodes,
their attributes, the edges in order and the queries' answers must be the same, and a file one
refuses the other refuses with the same message (for a syntax error: line and column).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from unittest import mock
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cda.errors import KenError
from cda.ken import graphml as graphml_reader
from cda.ken.graph import KenGraph
from tests.test_ken_store import assert_same, load_both

NS = "http://graphml.graphdrawing.org/xmlns"


def _chars(common: list[str], rare: str) -> st.SearchStrategy[str]:
    """Characters (and text that looks escaped already, "&lt;" as text is "&amp;lt;" in the
    file); those XML normalises (tab, newline, CR) or that end CDATA ("]") one in ten."""
    return st.integers(0, 9).flatmap(lambda i: st.sampled_from(rare if i == 0 else common))


_COMMON = ["a", "b", " ", "Σ", "&", "<", ">", '"', "'", "&lt;", "&amp;", "&#38;", ";"]
ID_CHARS = _chars([*_COMMON, ":", "é", "1"], "\t\n\r]")
TEXT_CHARS = _chars([*_COMMON, "7"], "\t\n\r]")


def _text(chars: st.SearchStrategy[str], min_size: int = 0, max_size: int = 6) -> st.SearchStrategy[str]:
    return st.lists(chars, min_size=min_size, max_size=max_size).map("".join)


def _ws(draw: st.DrawFn, pretty: bool) -> str:
    return draw(st.sampled_from(["", "\n", "\n  ", "\r\n", "\t", " "])) if pretty else ""


def _sep(draw: st.DrawFn, pretty: bool) -> str:
    return draw(st.sampled_from([" ", "  ", "\n ", "\t", "\r\n "])) if pretty else " "


def _escape_char(draw: st.DrawFn, c: str, quote: str | None, odd: bool) -> str:
    """One character as a writer might put it: itself where XML allows, else an entity, or
    (``odd``) an entity or a character reference either way."""
    choice = draw(st.integers(0, 5)) if odd else 0
    if choice == 2:
        return f"&#{ord(c)};"
    if choice == 3:
        return f"&#x{ord(c):X};"
    if choice == 1 or c in "&<" or c == quote:
        return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"}.get(c, c)
    return c


def _escape(draw: st.DrawFn, text: str, quote: str | None, odd: bool) -> str:
    return "".join(_escape_char(draw, c, quote, odd) for c in text)


def _attr(draw: st.DrawFn, name: str, value: str, odd: bool) -> str:
    quote = draw(st.sampled_from(['"', "'"])) if odd else '"'
    return f"{name}={quote}{_escape(draw, value, quote, odd)}{quote}"


def _mostly(good: st.SearchStrategy[str], bad: list[str]) -> st.SearchStrategy[str]:
    """Values that convert, and one in ten that may not (networkx's error, or its empty string)."""
    return st.integers(0, 9).flatmap(lambda i: st.sampled_from(bad) if i == 0 else good)


KEY_TYPES = {"string": _text(TEXT_CHARS),
             "int": _mostly(st.integers(-5, 99).map(str), [" 7", "x", "", "1_0"]),
             "long": st.integers(0, 10**12).map(str),
             "double": _mostly(st.floats(allow_nan=False, width=32).map(repr), ["1e3", "inf", "-0.0", "y", ""]),
             "float": st.sampled_from(["1.5", "2", " 3.25 "]),
             "boolean": _mostly(st.sampled_from(["true", "False", "1", "0", "TRUE"]), ["yes", ""])}


@st.composite
def graphml_files(draw: st.DrawFn) -> str:
    """A GraphML document (text), mostly in the everyday shape, sometimes odd."""
    odd = draw(st.booleans())  # character references, single quotes, comments, CDATA, …
    pretty = draw(st.booleans())
    keys: list[tuple[str, str, str, str]] = [("d0", "node", "label", "string"), ("d1", "edge", "relation", "string")]
    for i in range(draw(st.integers(0, 3))):
        keys.append((f"k{i}", draw(st.sampled_from(["node", "edge"])), draw(st.sampled_from(["weight", "rank", "label", "kind", "type"])),
                     draw(st.sampled_from(sorted(KEY_TYPES)))))
    if odd and draw(st.integers(0, 5)) == 0:
        keys.append(("kd", "node", "kind", "string"))  # with a default below
    directed = draw(st.booleans())
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n' if draw(st.booleans()) else "",
           f'<graphml xmlns="{NS}"{_sep(draw, pretty)}xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">']
    for key_id, owner, name, kind in keys:
        default = "<default>svc</default></key>" if key_id == "kd" else ""
        out.append(f'{_ws(draw, pretty)}<key id="{key_id}" for="{owner}" attr.name="{name}" attr.type="{kind}"'
                   + (f">{default}" if default else "/>"))
    out.append(f'{_ws(draw, pretty)}<graph id="G" edgedefault="{"directed" if directed else "undirected"}">')
    names = draw(st.lists(_text(ID_CHARS, max_size=4), min_size=1, max_size=6, unique=True))
    items = []
    for name in draw(st.lists(st.sampled_from(names), max_size=8)):
        data = _data(draw, [k for k in keys if k[1] == "node"], pretty, odd)
        head = f"<node{_sep(draw, pretty)}{_attr(draw, 'id', name, odd)}"
        items.append(f"{head}/>" if not data and draw(st.booleans()) else f"{head}>{data}{_ws(draw, pretty)}</node>")
    for _ in range(draw(st.integers(0, 12))):
        source, target = _attr(draw, "source", draw(st.sampled_from(names)), odd), _attr(draw, "target", draw(st.sampled_from(names)), odd)
        attrs = [target, source] if odd and draw(st.booleans()) else [source, target]
        if odd and draw(st.integers(0, 3)) == 0:
            attrs.append(_attr(draw, "id", draw(st.sampled_from(["e1", "e2", "3"])), odd))
        data = _data(draw, [k for k in keys if k[1] == "edge"], pretty, odd)
        head = "<edge" + "".join(_sep(draw, pretty) + a for a in attrs) + _ws(draw, pretty).replace("\r\n", " ")
        items.append(f"{head}/>" if not data and draw(st.booleans()) else f"{head}>{data}{_ws(draw, pretty)}</edge>")
    if draw(st.booleans()):
        items = draw(st.permutations(items))  # edges before nodes, nodes between edges
    for item in items:
        if odd and draw(st.integers(0, 6)) == 0:
            out.append(draw(st.sampled_from(["<!-- a <node id='x'/> -->", "<?pi x?>", "<desc>d</desc>"])))
        out.append(_ws(draw, pretty) + item)
    out.append(f"{_ws(draw, pretty)}</graph>{_ws(draw, pretty)}</graphml>{_ws(draw, pretty)}")
    body = len("".join(out[:-len(items) - 1])) if items else 0
    text = "".join(out)
    if odd and draw(st.integers(0, 8)) == 0:  # not well-formed: a tag, a quote or an entity broken
        at = draw(st.integers(body, len(text) - 1))
        text = text[:at] + draw(st.sampled_from(["<", "&bogus;", "\x01", "</x>", '"'])) + text[at:]
    return text


def _data(draw: st.DrawFn, keys: list[tuple[str, str, str, str]], pretty: bool, odd: bool) -> str:
    out = []
    chosen = draw(st.lists(st.sampled_from(keys), max_size=2)) if keys else []
    if keys and keys[0][0] == "d1" and draw(st.integers(0, 29)):
        chosen.insert(draw(st.integers(0, len(chosen))), keys[0])  # most edges have a relation
    for key_id, _, _, kind in chosen:
        value = draw(_text(TEXT_CHARS, min_size=1) if key_id == "d1" else KEY_TYPES[kind])
        if odd and kind == "string" and "]]>" not in value and draw(st.integers(0, 4)) == 0:
            body = f"<![CDATA[{value}]]>"
        else:
            body = _escape(draw, value, None, odd)
        quote = draw(st.sampled_from(['"', "'"])) if odd else '"'
        close = f"{_ws(draw, pretty)}/>" if not body and draw(st.booleans()) else f">{body}</data>"
        out.append(f"{_ws(draw, pretty)}<data{_sep(draw, pretty)}key={quote}{key_id}{quote}{close}")
    return "".join(out)


def _compare(text: str, chunk: int) -> bool:
    """Ken's reading of ``text`` against networkx's; True when the scanning reader took it."""
    with tempfile.TemporaryDirectory() as folder, mock.patch.object(graphml_reader, "CHUNK", chunk):
        path = Path(folder) / "g.graphml"
        path.write_bytes(text.encode("utf-8"))
        loaded, ref = load_both(path)
        if isinstance(ref, str) or isinstance(loaded, str):
            assert loaded == ref
        else:
            assert isinstance(loaded, KenGraph)
            assert_same(loaded, ref, random.Random(0), rounds=8)
        try:
            return graphml_reader._fill(path, scanned=True) is not None
        except (graphml_reader.Unusual, KenError):
            return False


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=graphml_files(), chunk=st.sampled_from([1 << 22, 64, 7]))
def test_graphml_reads_as_networkx_reads_it(text: str, chunk: int) -> None:
    _compare(text, chunk)


def test_the_scanning_reader_takes_the_everyday_files() -> None:
    """Not vacuous: files of the everyday shape are matched, not parsed (and read right)."""
    taken = []
    for seed in range(60):
        taken.append(_compare(_everyday(random.Random(seed)), 1 << 22))
    assert sum(taken) == len(taken)


def _everyday(rng: random.Random) -> str:
    """A file as networkx (ElementTree) writes one: double quotes, the five entities."""

    def quoteattr(value: str) -> str:
        return '"' + escape(value, {'"': "&quot;"}) + '"'

    names = ["a", "b&c", "<d>", 'e"f', "g'h", "Σ"]
    lines = [f'<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="{NS}">',
             '<key id="d0" for="node" attr.name="label" attr.type="string"/>',
             '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>',
             '<key id="d2" for="edge" attr.name="weight" attr.type="double"/>',
             f'<graph edgedefault="{rng.choice(["directed", "undirected"])}">']
    for name in rng.sample(names, rng.randint(0, len(names))):
        lines.append(rng.choice([f"<node id={quoteattr(name)}/>",
                                 f"<node id={quoteattr(name)}><data key=\"d0\">{escape(rng.choice(names))}</data></node>",
                                 f"<node id={quoteattr(name)}>\n  <data key=\"d0\">{escape(rng.choice(names))}</data>\n</node>"]))
    for _ in range(rng.randint(0, 20)):
        ends = f"source={quoteattr(rng.choice(names))} target={quoteattr(rng.choice(names))}"
        rel = escape(rng.choice(["depends", "r&d", "<x>"]))
        lines.append(rng.choice([f'<edge {ends}><data key="d1">{rel}</data></edge>',
                                 f'<edge {ends}>\n  <data key="d2">1.5</data>\n  <data key="d1">{rel}</data>\n</edge>']))
    return "\n".join(lines + ["</graph>", "</graphml>", ""])


@pytest.mark.parametrize("broken,where", [
    ('<node id="a"><data key="d0">x</node>', "mismatched tag: line 5, column"),
    ('<node id="a&b"/>', "not well-formed (invalid token): line 5, column"),
    ('<node id="a"/><node id="a" id="b"/>', "duplicate attribute: line 5, column"),
])
def test_malformed_xml_names_line_and_column(tmp_path: Path, broken: str, where: str) -> None:
    """A syntax error is networkx's message (what, line and column), found by a streamed parse:
    the same whichever reader met it first."""
    head = (f'<graphml xmlns="{NS}">\n<key id="d0" for="node" attr.name="label" attr.type="string"/>\n'
            '<key id="d1" for="edge" attr.name="relation" attr.type="string"/>\n<graph edgedefault="directed">\n')
    path = tmp_path / "bad.graphml"
    path.write_text(head + '<edge source="a" target="b"><data key="d1">r</data></edge>' * 3 + broken + "\n</graph></graphml>\n",
                    encoding="utf-8")
    loaded, ref = load_both(path)
    assert loaded == ref
    assert isinstance(loaded, str) and where in loaded and "bad.graphml: not GraphML (ParseError: " in loaded


def test_a_syntax_error_early_in_a_large_file_is_found_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file the parsing reader takes (comments: not the everyday shape) broken near its start:
    the error is networkx's, found by one streamed check after two chunks without a cut that
    parses, not after carrying (and re-parsing at every chunk) the rest of the file."""
    head = (f'<graphml xmlns="{NS}">\n<key id="d1" for="edge" attr.name="relation" attr.type="string"/>\n'
            '<graph edgedefault="directed">\n')
    edges = ['<edge source="a" target="b"><!-- c --><data key="d1">r</data></edge>\n'] * 2000
    edges[10] = edges[10].replace("</data>", "</dat>")
    path = tmp_path / "big.graphml"
    path.write_text(head + "".join(edges) + "</graph></graphml>\n", encoding="utf-8")
    monkeypatch.setattr(graphml_reader, "CHUNK", 512)
    parses = []
    real = graphml_reader.fromstring
    monkeypatch.setattr(graphml_reader, "fromstring", lambda text: parses.append(1) or real(text))
    loaded, ref = load_both(path)
    assert loaded == ref and isinstance(loaded, str) and "mismatched tag: line 14, column" in loaded
    assert len(parses) < 30  # a few chunks' cuts, not three a chunk to the file's end (about 800)
