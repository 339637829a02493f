"""The GraphML body in its everyday shape, matched by a regular expression instead of parsed.

Why: at a million edges an XML parser's callbacks are the cost — ``ElementTree`` builds three
elements an edge (5 s of CPU for the benchmark's file before anything is read into a graph),
``xml.parsers.expat`` with bare handlers still spends 2 s calling Python five times an edge —
while one compiled pattern run by ``re`` over a chunk of text finds the same nodes and edges in
under a second (docs/benchmarks.md, "Ken"). The pattern is a *recogniser*, not a parser: it
accepts a chunk only when the chunk is exactly a run of the elements below, each of them
well-formed XML by construction, and anything else — a comment, a CDATA section, a processing
instruction, a character reference, an entity other than the five predefined ones, an
attribute other than these or in another order, single quotes, a carriage return or a tab in
text (XML normalises them), a character XML forbids, ``]]>`` in text, anything after the
graph — makes :func:`scan` answer False, and the caller reads the file with the parser
(:mod:`cda.ken.graphml`). What it accepts, after the root's and the graph's start tags:

* ``<node id="…"/>`` or ``<node id="…">`` with ``<data key="…">…</data>`` (or ``<data
  key="…"/>``) children and ``</node>``;
* ``<edge source="…" target="…"/>`` or the same with data children and ``</edge>``;
* whitespace between and around them, then ``</graph>``, ``</graphml>`` and whitespace.

Unprefixed names in those elements are in the GraphML namespace only when the root's and the
graph's start tags make it the default one: the caller checks that on a probe document before
calling :func:`scan`. What the elements mean (types, keys, merges, the relation) is the
:class:`~cda.ken.graphml.GraphMLReader`'s business, the same for both readers.
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
_DATA_ANY = rf"<data{_S}key={_VALUE}{_WS}(?:/>|>{_TEXT}</data{_WS}>)"  # key, text (None: "/>")
_DATAS = rf"((?:{_WS}<data{_S}key={_VALUE_NC}{_WS}(?:/>|>{_TEXT_NC}</data{_WS}>))*){_WS}"

#: one node or edge, after whitespace; the first group of each alternative names it
_ITEM = (rf"{_WS}(?:(<edge){_S}source={_VALUE}{_S}target={_VALUE}{_WS}>{_WS}{_DATA}{_WS}</edge{_WS}>"  # 1-5
         rf"|(<node){_S}id={_VALUE}{_WS}>{_WS}{_DATA}{_WS}</node{_WS}>"  # 6-9
         rf"|(<edge){_S}source={_VALUE}{_S}target={_VALUE}{_WS}(?:/>|>{_DATAS}</edge{_WS}>)"  # 10-13
         rf"|(<node){_S}id={_VALUE}{_WS}(?:/>|>{_DATAS}</node{_WS}>))")  # 14-16
ITEMS = re.compile(_ITEM)
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
    edges in order); where the run ends (a cut, or something of another shape)."""
    node_ids: list[str] = []
    node_data: list[tuple[tuple[str, Any], ...]] = []
    sources: list[str] = []
    targets: list[str] = []
    sids: list[int] = []
    keys, sig_get, signature, value = reader.keys, reader.sigs.get, reader.signature, reader.value
    escaped = "&" in text
    end = 0
    for m in ITEMS.finditer(text):
        if m.start() != end:
            break  # not contiguous: what lies between is of another shape
        end = m.end()
        t = m.groups()
        if t[0]:  # an edge with one data element
            source, target, key, raw = t[1], t[2], t[3], t[4]
            if escaped:
                source, target, key, raw = _unescape(source), _unescape(target), _unescape(key), _unescape(raw)
            typed = keys.get(key)
            if typed is None:
                reader.unknown_key()
            pairs: tuple[tuple[str, Any], ...] = ((typed[0], raw if typed[1] is str else value(typed[1], raw or None)),)
        elif t[5]:
            name, key, raw = t[6], t[7], t[8]
            if escaped:
                name, key, raw = _unescape(name), _unescape(key), _unescape(raw)
            typed = keys.get(key)
            if typed is None:
                reader.unknown_key()
            node_ids.append(name)
            node_data.append(((typed[0], raw if typed[1] is str else value(typed[1], raw or None)),))
            continue
        elif t[9]:
            source, target = t[10], t[11]
            if escaped:
                source, target = _unescape(source), _unescape(target)
            pairs = _data(t[12], reader, escaped)
        else:
            node_ids.append(_unescape(t[14]) if escaped else t[14])
            node_data.append(_data(t[15], reader, escaped))
            continue
        sid = sig_get(pairs)
        sources.append(source)
        targets.append(target)
        sids.append(signature(pairs, -1) if sid is None else sid)
    if node_ids:
        reader.add_node_ids(node_ids, node_data)
    if sources:
        reader.add_columns(sources, targets, [-1] * len(sources), sids)
    return end


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
