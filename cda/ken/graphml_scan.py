"""The GraphML body in its everyday shape, matched by a regular expression instead of parsed.

Why: at a million edges an XML parser's callbacks are the cost — ``ElementTree`` builds three
elements an edge (5 s of CPU for the benchmark's file at load 2, before anything is read into a
graph), ``xml.parsers.expat`` with two bare handlers still spends 2 s calling Python — while one
compiled pattern run by ``re`` over each chunk of text finds the same nodes and edges in about
1.5 s, and hands them over as columns (docs/benchmarks.md, "Ken"). The pattern is a
*recogniser*, not a parser: it takes a run of text only when the run is exactly a sequence of
the elements below, each well-formed XML by construction, and anything else — a comment, a
CDATA section, a processing instruction, a character reference, an entity other than the five
predefined ones, another attribute, attributes in another order, single quotes, whitespace
around ``=``, a tab, newline or carriage return in an attribute value or a carriage return in
text (XML normalises them), a character XML forbids, ``]]>``, anything after the graph — makes
:func:`scan` answer False, and the caller reads the file with the parser
(:mod:`cda.ken.graphml`). What it accepts, after the root's and the graph's start tags:

* ``<node id="…"/>`` or ``<node id="…">`` with ``<data key="…">…</data>`` (or ``<data
  key="…"/>``) children and ``</node>``;
* ``<edge source="…" target="…"/>`` or the same with data children and ``</edge>``;
* whitespace between and around them, then ``</graph>``, ``</graphml>`` and whitespace.

Unprefixed names in those elements are in the GraphML namespace only when the root's and the
graph's start tags make it the default one: the caller checks that on a probe document before
calling :func:`scan`. What the elements mean (types, keys, merges, the relation) is the
business of the reader it is given (:class:`cda.ken.graphml._Reader`), the same for both readers.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["scan"]

_WS = r"[ \t\r\n]*"
_S = r"[ \t\r\n]+"
_ENTITY = r"&(?:amp|lt|gt|quot|apos);"
# an attribute value as is: no tab, newline or carriage return (XML turns them into spaces), no
# control character (not XML), no "<", no "&" but the five entities, no closing quote
_PLAIN = r'[^"<&\x00-\x1f\ufffe\uffff]'
_VALUE = rf'"({_PLAIN}*(?:{_ENTITY}{_PLAIN}*)*)"'
_VALUE_NC = rf'"{_PLAIN}*(?:{_ENTITY}{_PLAIN}*)*"'
# character data as is: no carriage return (XML turns CR LF into LF), no control character but
# tab and newline, no "<", no "&" but the five entities ("]]>" is refused chunk by chunk)
_TEXT_CH = r"[^<&\r\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]"
_TEXT = rf"({_TEXT_CH}*(?:{_ENTITY}{_TEXT_CH}*)*)"
_TEXT_NC = rf"{_TEXT_CH}*(?:{_ENTITY}{_TEXT_CH}*)*"
_DATA = rf"<data{_S}key={_VALUE}{_WS}>{_TEXT}</data{_WS}>"  # one data element with text: key, text
_DATA_ANY = rf"<data{_S}key={_VALUE}{_WS}(?:/>|>{_TEXT}</data{_WS}>)"  # key, text ("" for "/>")
_DATAS = rf"((?:{_WS}<data{_S}key={_VALUE_NC}{_WS}(?:/>|>{_TEXT_NC}</data{_WS}>))*){_WS}"

#: one node or edge with the whitespace before it (group 1, all of it: a run of matches is
#: contiguous when these join to the start of the text); the one-letter group of each
#: alternative names it: an edge or a node with one data element (2-6, 7-10), with any data
#: (11-14, 15-17)
ITEMS = re.compile(rf"({_WS}(?:<(e)dge{_S}source={_VALUE}{_S}target={_VALUE}{_WS}>{_WS}{_DATA}{_WS}</edge{_WS}>"
                   rf"|<(n)ode{_S}id={_VALUE}{_WS}>{_WS}{_DATA}{_WS}</node{_WS}>"
                   rf"|<(e)dge{_S}source={_VALUE}{_S}target={_VALUE}{_WS}(?:/>|>{_DATAS}</edge{_WS}>)"
                   rf"|<(n)ode{_S}id={_VALUE}{_WS}(?:/>|>{_DATAS}</node{_WS}>)))")
#: ITEMS' first two alternatives as networkx (ElementTree) and most tools write them, without
#: entities: one space between attributes, none inside tags; tried first (a fifth to a third
#: faster than ITEMS), ITEMS taking over where it stops
_BARE = rf'"({_PLAIN}*)"'
COMPACT = re.compile(rf'({_WS}(?:<(e)dge source={_BARE} target={_BARE}><data key={_BARE}>({_TEXT_CH}*)</data></edge>'
                     rf'|<(n)ode id={_BARE}><data key={_BARE}>({_TEXT_CH}*)</data></node>))')
DATA = re.compile(_DATA_ANY)
END = re.compile(rf"{_WS}</graph{_WS}>{_WS}</graphml{_WS}>{_WS}")
LONGEST = 1 << 20  # characters: a node or an edge longer than that is left to the parser


def _unescape(text: str) -> str:
    """The five predefined entities replaced (``&amp;`` last: ``&amp;lt;`` is ``&lt;``)."""
    return (text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'")
            .replace("&amp;", "&"))


def scan(fh: Any, text: str, reader: Any, chunk: int) -> bool:
    """Read the graph's children from ``text`` (what follows the graph's start tag) and the rest
    of ``fh`` into ``reader``; False, with ``reader`` half filled, as soon as the file is not of
    the shape this module takes (the caller then reads it again with a parser)."""
    while True:
        more = fh.read(chunk)
        text += more
        if "]]>" in text:
            return False
        end = _take(text, reader)
        text = text[end:]
        if not more:
            return END.fullmatch(text) is not None
        if len(text) > max(chunk, LONGEST):  # no whole item that far: not a cut, something else
            return False


def _take(text: str, reader: Any) -> int:
    """The run of whole items at the start of ``text`` into ``reader`` (the nodes as a batch, the
    edges in order); where the run ends (a cut, or something of another shape). The compact
    pattern first, then the general one from where that stops: two passes at most."""
    items, end = _run(COMPACT, text, 0)
    if items:
        _take_items(items, text[:end], reader, compact=True)
    if end < len(text):
        items, at = _run(ITEMS, text, end)
        if items:
            _take_items(items, text[end:at], reader, compact=False)
        end = at
    return end


def _run(pattern: re.Pattern[str], text: str, pos: int) -> tuple[list[tuple[str, ...]], int]:
    """The matches of ``pattern`` that follow one another from ``pos``, and where they end."""
    items = pattern.findall(text, pos)
    run = "".join([t[0] for t in items])
    if text.startswith(run, pos):
        return items, pos + len(run)
    end = pos  # something between two matches: keep the run before it
    for n, t in enumerate(items):
        if not text.startswith(t[0], end):
            del items[n:]
            break
        end += len(t[0])
    return items, end


def _take_items(items: list[tuple[str, ...]], run: str, reader: Any, *, compact: bool) -> None:
    """Items matched one after the other (``run``: their text): by columns when each has one data
    element (the usual file), else one at a time."""
    escaped = not compact and "&" in run
    if compact:  # one data element each: the marker column says which are edges
        columns = list(zip(*items, strict=True))
        n_edges = columns[1].count("e")
        if n_edges == len(items):
            _take_edges(columns, reader, escaped)
            return
        if n_edges == 0:
            _take_nodes(columns, reader, escaped)
            return
    edges = [t for t in items if t[1]]
    nodes = [t for t in items if t[6]]
    if len(edges) + len(nodes) == len(items):
        if nodes:
            _take_nodes(list(zip(*nodes, strict=True)), reader, escaped)
        if edges:
            _take_edges(list(zip(*edges, strict=True)), reader, escaped)
    else:
        _take_one_by_one(items, reader, escaped)


def _plain(column: tuple[str, ...], escaped: bool) -> list[str]:
    """A column of values as they read (entities replaced)."""
    if escaped:
        return [_unescape(x) if "&" in x else x for x in column]
    return list(column)


def _typed(reader: Any, key: str, raw: str) -> tuple[tuple[str, Any], ...]:
    """A data element as (name, value) pairs."""
    typed = reader.keys.get(key)
    if typed is None:
        reader.unknown_key()
    return ((typed[0], raw if typed[1] is str else reader.value(typed[1], raw or None)),)


def _by_data(reader: Any, keys: list[str], raws: list[str], of: Any) -> list[Any]:
    """``of(data)`` of each (key, text) data element, computed once per distinct one, in the
    order of their first appearance (so relations are numbered as edge-by-edge reading numbers
    them); by the text alone when one key is used throughout (the usual file)."""
    if len(set(keys)) == 1:
        table = {raw: of(_typed(reader, keys[0], raw)) for raw in dict.fromkeys(raws)}
        return list(map(table.__getitem__, raws))
    pairs = list(zip(keys, raws, strict=True))
    by_pair = {p: of(_typed(reader, *p)) for p in dict.fromkeys(pairs)}
    return list(map(by_pair.__getitem__, pairs))


def _take_nodes(columns: list[tuple[str, ...]], reader: Any, escaped: bool) -> None:
    """Nodes with one data element each (``columns``: the pattern's groups, transposed)."""
    keys, raws = _plain(columns[8], escaped), _plain(columns[9], escaped)
    typed = reader.keys.get(keys[0])
    if len(set(keys)) == 1 and typed is not None and typed[1] is str:  # a label each, the usual file
        name = typed[0]
        data = [((name, raw),) for raw in raws]
    else:
        data = _by_data(reader, keys, raws, lambda d: d)
    reader.add_node_ids(_plain(columns[7], escaped), data)


def _take_edges(columns: list[tuple[str, ...]], reader: Any, escaped: bool) -> None:
    """Edges with one data element each (``columns``: the pattern's groups, transposed)."""
    sig_get, signature = reader.sigs.get, reader.signature

    def sid(data: tuple[tuple[str, Any], ...]) -> int:
        found = sig_get(data)
        return signature(data, -1) if found is None else found  # type: ignore[no-any-return]

    sids = _by_data(reader, _plain(columns[4], escaped), _plain(columns[5], escaped), sid)
    n = len(sids)
    reader.add_columns(_plain(columns[2], escaped), _plain(columns[3], escaped), [-1] * n, sids)


def _take_one_by_one(items: list[tuple[str, ...]], reader: Any, escaped: bool) -> None:
    """Items of any of the shapes, one at a time (edges in order)."""
    node_ids: list[str] = []
    node_data: list[tuple[tuple[str, Any], ...]] = []
    sources: list[str] = []
    targets: list[str] = []
    sids: list[int] = []
    keys, sig_get, signature, value = reader.keys, reader.sigs.get, reader.signature, reader.value
    for t in items:
        if t[1]:  # an edge with one data element
            source, target, key, raw = t[2], t[3], t[4], t[5]
            if escaped:
                source, target, key, raw = _unescape(source), _unescape(target), _unescape(key), _unescape(raw)
            typed = keys.get(key)
            if typed is None:
                reader.unknown_key()
            pairs: tuple[tuple[str, Any], ...] = ((typed[0], raw if typed[1] is str else value(typed[1], raw or None)),)
        elif t[6]:
            name, key, raw = t[7], t[8], t[9]
            if escaped:
                name, key, raw = _unescape(name), _unescape(key), _unescape(raw)
            typed = keys.get(key)
            if typed is None:
                reader.unknown_key()
            node_ids.append(name)
            node_data.append(((typed[0], raw if typed[1] is str else value(typed[1], raw or None)),))
            continue
        elif t[10]:
            source, target = t[11], t[12]
            if escaped:
                source, target = _unescape(source), _unescape(target)
            pairs = _data(t[13], reader, escaped)
        else:
            node_ids.append(_unescape(t[15]) if escaped else t[15])
            node_data.append(_data(t[16], reader, escaped))
            continue
        sid = sig_get(pairs)
        sources.append(source)
        targets.append(target)
        sids.append(signature(pairs, -1) if sid is None else sid)
    if node_ids:
        reader.add_node_ids(node_ids, node_data)
    if sources:
        reader.add_columns(sources, targets, [-1] * len(sources), sids)


def _data(block: str, reader: Any, escaped: bool) -> tuple[tuple[str, Any], ...]:
    """The (name, value) pairs of an element's data children, later ones winning a name."""
    if not block:
        return ()
    out: dict[str, Any] = {}
    for key, text in DATA.findall(block):
        if escaped:
            key, text = _unescape(key), _unescape(text)
        typed = reader.keys.get(key)
        if typed is None:
            reader.unknown_key()
        out[typed[0]] = reader.value(typed[1], text or None)  # "/>" or "></data>": no text
    return tuple(out.items())
