"""Cedar templates and their links: read a links file, check every link, and link.

A template is a policy with a slot in its scope (``principal == ?principal``, ``resource in
?resource``, ``principal is T in ?principal``): it authorizes nothing until a *link* fills its
slots with entities, which makes an ordinary policy with the link's id. A policy set is read with
its templates (:func:`cda.policy.parse.parse_policies` with ``templates=True``) and a links file in
the Cedar CLI's JSON (``cedar authorize --template-linked FILE``)::

    [{"template_id": "share", "link_id": "alice-share", "args": {"?principal": "User::\\"alice\\""}}]

The forms cedarpy (``new_id``, ``values``) and Cedar's JSON policy set (``templateLinks``:
``templateId``, ``newId``, ``values``) are read too, and a slot's entity may be written
``"User::\\"alice\\""``, ``{"type": …, "id": …}`` or ``{"__entity": {…}}``. A template is named by
its id (``policy0``, … in the file's order, as Cedar numbers them) or, failing that, by its
``@id`` annotation (which must be unambiguous), as cedarpy resolves it.

Every link is checked before anything is analysed, and each mistake names the file and the link:
an unknown template, a link id given twice or taken by a policy, a slot left empty or one the
template does not have, and (with a schema) a slot's entity of a type the slot does not allow
(:func:`allowed_types`). docs/policy.md says what an analysis of the linked set, and of every
possible link of a template, is proved for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cda.errors import DSLError
from cda.policy.schema import Schema
from cda.policy.syntax import Policy, Scope
from cda.policy.values import EntityUID

__all__ = ["Link", "LinkError", "read_links", "link", "allowed_types", "find_template", "links_json", "template_name"]

SLOTS = ("?principal", "?resource")


class LinkError(DSLError):
    """A links file that cannot be applied (the message names the file and the link)."""

    def __init__(self, message: str, file: str) -> None:
        super().__init__(message, filename=file)


@dataclass(frozen=True)
class Link:
    """One template link: the template's id (as resolved), the new policy's id, the slots'
    entities."""

    template_id: str
    link_id: str
    values: tuple[tuple[str, EntityUID], ...]

    def to_json(self, template: str | None = None) -> dict[str, Any]:
        """The link in the Cedar CLI's form (``args``' entities as Cedar text), the template
        named ``template`` when given."""
        return {"template_id": template or self.template_id, "link_id": self.link_id,
                "args": {slot: str(uid) for slot, uid in self.values}}  # fmt: skip


def template_name(templates: Sequence[Policy], template_id: str) -> str:
    """How a links file names the template: its ``@id`` where that names it alone (the Cedar CLI
    takes ``@id`` as the policy id, cedarpy resolves it), else its id."""
    t = find_template(templates, template_id)
    name = t.annotations.get("id") if t is not None else None
    if name and find_template(templates, name) is t:
        return name
    return template_id


def links_json(links: Iterable[Link], templates: Sequence[Policy] = ()) -> list[dict[str, Any]]:
    return [x.to_json(template_name(templates, x.template_id)) for x in links]


def find_template(templates: Sequence[Policy], name: str) -> Policy | None:
    """The template ``name`` names: its id, else its unambiguous ``@id`` annotation."""
    for t in templates:
        if t.id == name:
            return t
    named = [t for t in templates if t.annotations.get("id") == name]
    return named[0] if len(named) == 1 else None


def _first(item: dict[str, Any], keys: tuple[str, ...], what: str, at: str, file: str) -> Any:
    for k in keys:
        if k in item:
            return item[k]
    raise LinkError(f"{at}: no {what} (one of {', '.join(repr(k) for k in keys)})", file)


def _entity(v: Any, at: str, file: str) -> EntityUID:
    from cda.policy.parse import parse_entity_ref

    if isinstance(v, str):
        try:
            return parse_entity_ref(v)
        except DSLError as exc:
            raise LinkError(f'{at}: not an entity (Type::"id"): {v!r} ({exc.message})', file) from None
    if isinstance(v, dict) and "__entity" in v:
        v = v["__entity"]
    if isinstance(v, dict) and set(v) == {"type", "id"} and all(isinstance(x, str) for x in v.values()):
        return EntityUID(v["type"], v["id"])
    raise LinkError(f'{at}: an entity is "Type::\\"id\\"" or {{"type": …, "id": …}}, not {v!r}', file)


def read_links(data: Any, policies: Sequence[Policy], templates: Sequence[Policy], schema: Schema | None,
               where: str) -> list[Link]:  # fmt: skip
    """The links of ``data`` (a links file's JSON, read from ``where``), each checked against
    the templates, the policies' ids and the schema. Raises :class:`LinkError`."""
    if isinstance(data, dict) and "templateLinks" in data:
        data = data["templateLinks"]
    if not isinstance(data, list):
        raise LinkError('a links file is a JSON list of links ({"template_id", "link_id", "args"})', where)
    taken = {p.id for p in policies} | {t.id for t in templates}
    out: list[Link] = []
    for i, item in enumerate(data):
        at = f"link {i}"
        if not isinstance(item, dict):
            raise LinkError(f"{at}: a link is a JSON object, not {type(item).__name__}", where)
        link_id = _first(item, ("link_id", "new_id", "newId"), "link id", at, where)
        if not isinstance(link_id, str) or not link_id:
            raise LinkError(f"{at}: the link id is a non-empty string, not {link_id!r}", where)
        at = f"link {link_id!r}"
        name = _first(item, ("template_id", "templateId"), "template id", at, where)
        if not isinstance(name, str):
            raise LinkError(f"{at}: the template id is a string, not {name!r}", where)
        template = find_template(templates, name)
        if template is None:
            known = ", ".join(sorted({t.id for t in templates} | {t.annotations["id"] for t in templates
                                                                   if "id" in t.annotations})) or "none"  # fmt: skip
            raise LinkError(f"{at}: no template {name!r} in the policies (templates: {known})", where)
        if link_id in taken:
            raise LinkError(
                f"{at}: the link id {link_id!r} is given twice (a policy, a template or a link before has it)", where
            )
        taken.add(link_id)
        args = _first(item, ("args", "values"), "slot values", at, where)
        if not isinstance(args, dict):
            raise LinkError(f'{at}: the slot values are a JSON object {{"?principal": …}}, not {args!r}', where)
        for slot in args:
            if slot not in template.slots:
                raise LinkError(f"{at}: the template {template.id} has no slot {slot!r} (its slots: "
                                f"{', '.join(template.slots)})", where)  # fmt: skip
        values: list[tuple[str, EntityUID]] = []
        for slot in template.slots:
            if slot not in args:
                raise LinkError(f"{at}: the slot {slot} of template {template.id} is not filled", where)
            uid = _entity(args[slot], f"{at}: {slot}", where)
            if schema is not None:
                allowed = allowed_types(template, slot, schema)
                if uid.type not in allowed:
                    raise LinkError(f"{at}: {slot} is {uid}, of a type the slot does not allow in template "
                                    f"{template.id} (allowed: {', '.join(sorted(allowed)) or 'none'})", where)  # fmt: skip
            values.append((slot, uid))
        out.append(Link(template.id, link_id, tuple(values)))
    return out


def link(template: Policy, link_id: str, values: dict[str, EntityUID]) -> Policy:
    """The policy ``template`` becomes with its slots filled by ``values``, named ``link_id``
    (its annotations kept, as Cedar keeps them)."""

    def fill(s: Scope) -> Scope:
        return s if s.slot is None else Scope(s.kind, values[s.slot], s.type)

    return replace(template, id=link_id, principal=fill(template.principal), resource=fill(template.resource))


def _actions_of(template: Policy, schema: Schema) -> list[Any]:
    """The schema's actions the template's action scope covers."""
    a = template.action
    if a.kind == "any":
        return list(schema.actions.values())
    out = []
    for decl in schema.actions.values():
        seen, todo = {decl.uid}, [decl.uid]
        while todo:  # the action and its groups, transitively
            parent = schema.actions.get(todo.pop())
            for g in parent.parents if parent is not None else ():
                if g not in seen:
                    seen.add(g)
                    todo.append(g)
        if (decl.uid in a.entities) if a.kind == "eq" else bool(seen & set(a.entities)):
            out.append(decl)
    return out


def allowed_types(template: Policy, slot: str, schema: Schema) -> set[str]:
    """The entity types a link may put in ``slot``: those a request's principal (resource) can
    have for an action the template covers, for ``==``; with their possible ancestor types (the
    schema's ``memberOf``, transitively) for ``in``; for ``is T in ?slot``, T's."""
    from cda.policy.symstore import ancestor_types

    scope = template.principal if slot == "?principal" else template.resource
    anc = ancestor_types(schema)
    if scope.kind == "is_in":
        assert scope.type is not None
        return {scope.type} | anc.get(scope.type, set())
    actions = _actions_of(template, schema)
    base = {t for d in actions for t in (d.principals if slot == "?principal" else d.resources)}
    if scope.kind == "eq":
        return base
    return base | {x for t in base for x in anc.get(t, set())}
