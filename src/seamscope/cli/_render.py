"""Decision views → trees of styled text, and the offload summary table.

A tree is built once as :class:`Node` values (labels are ``(text, style)``
fragments, never markup, so a name holding ``[red]`` prints as itself) and
written one of two ways by :func:`write_tree`: as plain lines with the tree
guides, for a file or a pipe, which costs about what joining the strings
does; or as a rich ``Tree`` for a terminal or a recording console
(``--svg``), where rich wraps long lines under their guides. Both show the
same characters. Text taken from a file has its control characters escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from seamscope.explain import middleware_story, number, tool_story
from seamscope.telemetry import conventions as c

__all__ = [
    "LEGEND",
    "Node",
    "plain_lines",
    "plain_settlements",
    "render_settlements",
    "shadow_lines",
    "span_tree",
    "tool_tree",
    "turn_label_tail",
    "turn_tree",
    "usd",
    "write_settlements",
    "write_tree",
]

Frag = tuple[str, str]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_NAMES = 12  # dropped tools listed on one stage line
_MAX_ATTRIBUTES = 6  # attributes shown per span of a plain span tree
_MAX_DEPTH = 48  # levels of a plain span tree


def _t(value: Any) -> str:
    """Text from a file, safe to print: a string, control characters escaped."""
    text = value if type(value) is str else ("?" if value is None else str(value))
    if not text.isprintable() and _CONTROL.search(text):  # control characters are not
        text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text


@dataclass(slots=True)
class Node:
    """One tree node: a label of ``(text, style)`` fragments and its children."""

    label: list[Frag]
    children: list[Node] = field(default_factory=list)

    def add(self, *label: Frag) -> Node:
        node = Node(list(label))
        self.children.append(node)
        return node


def usd(value: Any, signed: bool = False) -> str:
    v = number(value)
    if v is None:
        return "?"
    return money(v, signed)


def money(value: float | Decimal, signed: bool = False) -> str:
    """USD to 4 decimals; an amount that is not zero but would print as 0.0000 gets
    two significant digits (a tiny loss still reads as one: −$0.000012)."""
    size = -value if value < 0 else value
    if size and size < _TINY:
        digits = min(15, 1 - math.floor(math.log10(size)))
        text = f"${size:.{digits}f}"
    else:
        text = f"${size:.4f}"
    if signed:
        return f"{'+' if value >= 0 else '−'}{text}"
    return text if value >= 0 else f"-{text}"


_TINY = 0.00005  # below this, 4 decimals print 0.0000


def _tokens(value: Any) -> str:
    v = number(value)
    return "?" if v is None else f"{int(v):,}".replace(",", " ")


def _errors(evaluations: list[dict[str, Any]]) -> list[Frag]:
    """Adopter code that raised inside a seam: a dimmed note, not an error (the
    seam caught it and went on: a policy that raised counts as no match)."""
    bad = [
        f"policy '{_t(e['policy'])}' raised {_t(e['error_type'])}, counted as no match"
        if e.get("policy")
        else f"{_t(e.get('adopter_error'))} raised {_t(e['error_type'])}, skipped"
        for e in evaluations
        if e.get("error_type")
    ]
    return [(f"  (note, contained: {'; '.join(bad)})", "dim")] if bad else []


def _pre(pre: dict[str, Any]) -> list[Frag]:
    source = pre.get("winner_source")
    head = f"policy '{_t(pre.get('policy'))}' → " if source == "policy" else f"{_t(source)} → "
    return [
        ("pre_model", "cyan"),
        (f"   {head}", ""),
        (_t(pre.get("model")), "bold"),
        *_errors(pre.get("evaluations", [])),
    ]


def _dispatch(d: dict[str, Any]) -> list[Frag]:
    emitted, final = _t(d.get("emitted_tool")), _t(d.get("final_tool"))
    policy = d.get("policy")
    errors = _errors(d.get("evaluations", []))
    if d.get("structured_output"):
        return [
            ("answer", "cyan"),
            (f"      {emitted} structured output: consumed, no tool run", ""),
        ]
    head: Frag = ("post_model", "cyan")
    if d.get("refused"):
        return [
            head,
            (f"  {emitted} ", ""),
            ("refused by the framework: never ran", "red"),
            *errors,
        ]
    if d.get("palette_gate") == "dropped":
        who = f"policy '{_t(policy)}'" if policy else "adopter"
        return [
            head,
            (f"  {emitted} ↛ {_t(d.get('redirect_to'))} ", ""),
            ("dropped by palette gate", "yellow"),
            (f" ({who}: target not routed); {final} dispatched", ""),
            *errors,
        ]
    if emitted != final:
        bits = []
        if policy:
            bits.append(f"policy '{_t(policy)}'")
            guard = d.get("guard")
            bits.append("guard ok" if guard == "passed" else f"guard {_t(guard)}")
        if d.get("adopter_override"):
            bits.append("adopter override")
        bits.append("palette kept")
        return [
            head,
            (f"  {emitted} → ", ""),
            (final, "bold"),
            (f" ({', '.join(bits)})", ""),
            *errors,
        ]
    if d.get("adopter_override"):
        return [head, (f"  {emitted} (adopter changed its arguments)", ""), *errors]
    return [head, (f"  {emitted} as emitted", ""), *errors]


def _gate(g: dict[str, Any]) -> list[Frag]:
    code = g.get("reason_code")
    if code in ("net_positive", "net_not_positive"):
        verdict = ("fire   ", "green") if g.get("fire") else ("no fire", "yellow")
        terms = f" net {usd(g.get('net_saving_usd'), True)} = {_equation(g)}"
        p = number(g.get("recall_probability"))
        horizon = number(g.get("horizon"))
        tail = (
            f"\n({_tokens(g.get('output_tokens'))} tok, H={'?' if horizon is None else horizon}, "
            f"p={'?' if p is None else f'{p:.2f}'}, {_t(g.get('model'))}, "
            f"{_t(g.get('pricing_source'))})"
        )
        offload = f" → offload {_t(g['offload_id'])}" if g.get("offload_id") else ""
        return [
            ("offload_gate", "cyan"),
            (" ", ""),
            verdict,
            (f"{terms}{tail}{offload}{_gate_extras(g)}", ""),
        ]
    reason = _t(g.get("reason") or "")
    detail = reason[reason.find("(") :] if "(" in reason else reason
    return [("offload_gate", "cyan"), (f" no fire  {_t(code)} {detail}{_gate_extras(g)}", "dim")]


def _gate_extras(g: dict[str, Any]) -> str:
    """The priors file's version, the shadow configuration's verdict and whose
    offload the gate decided (a framework's, opt-in), when recorded."""
    out = ""
    if g.get("mechanism"):
        out += f"\ndecides a {_t(g['mechanism'])} offload (the framework's, opt-in gate)"
    if g.get("priors_version"):
        out += f"\npriors {_t(g['priors_version'])}: {_t(g.get('prior_source') or '?')}"
    shadow = g.get("shadow")
    if shadow:
        agree = "agrees" if bool(shadow.get("fire")) == bool(g.get("fire")) else "disagrees"
        verdict = "fire" if shadow.get("fire") else "no fire"
        out += (
            f"\nshadow {verdict} net {usd(shadow.get('net_saving_usd'), True)} "
            f"({_t(shadow.get('reason_code'))}): {agree}"
        )
    return out


_WORD = re.compile(r"[\w.-]+")


def _unnamed(reason: str, tools: list[str]) -> list[str]:
    """The tools a reason does not name (as a whole word)."""
    if not tools:
        return []
    words = set(_WORD.findall(reason))
    return [t for t in tools if (t not in words if _WORD.fullmatch(t) else t not in reason)]


def _stage(stage: dict[str, Any]) -> list[Frag]:
    outcome = _t(stage.get("outcome"))
    reason = _t(stage.get("reason"))
    frags: list[Frag] = [
        (f"{_t(stage.get('name')):<15}", "bold"),
        (f"{outcome:<8}", "green" if outcome == "select" else "dim"),
        (reason, ""),
    ]
    dropped = stage.get("dropped") or []
    missing = [_t(tool) for tool in _unnamed(reason, dropped)]
    if missing:
        names = ", ".join(missing[:_MAX_NAMES])
        if len(missing) > _MAX_NAMES:
            names += f", … ({len(missing) - _MAX_NAMES} more)"
        also = "also " if len(missing) < len(dropped) else ""
        frags.append((f"  ({also}−{len(missing)}: {names})", ""))
    if stage.get("degraded"):
        frags.append(("  [degraded]", "red"))
    if stage.get("forced_reinstated"):
        frags.append(("  [forced tool reinstated]", "magenta"))
    return frags


def _names(tools: list[str]) -> str:
    names = ", ".join(_t(tool) for tool in tools[:_MAX_NAMES])
    if len(tools) > _MAX_NAMES:
        names += f", … ({len(tools) - _MAX_NAMES} more)"
    return names


def _equation(d: dict[str, Any]) -> str:
    """The gate's formula with its terms named: ``saving $a − stub carry $b − expected recall $c``."""
    return (
        f"saving {usd(d.get('reprefill_saving_usd'))} − stub carry "
        f"{usd(d.get('stub_carry_cost_usd'))} − expected recall "
        f"{usd(d.get('expected_recall_hop_cost_usd'))}"
    )


LEGEND = (
    "legend: → chosen/redirected · ↛ dropped · (−N: …) tools a stage removed · "
    "net = saving − stub carry − expected recall · H turns carried, p recall chance "
    "· words: seamscope explain --glossary"
)


def _terms(d: dict[str, Any]) -> str:
    """The gate's priced terms on a compaction's sizes, as the gate line shows them."""
    p = number(d.get("recall_probability"))
    horizon = number(d.get("horizon"))
    cost = number(d.get("cost_usd"))
    own = f" − {usd(cost)} own call" if cost else ""
    return (
        f"predicted net {usd(d.get('net_saving_usd'), True)} = "
        f"{_equation(d)}{own} (H={'?' if horizon is None else horizon}, "
        f"p={'?' if p is None else f'{p:.2f}'}, {_t(d.get('model'))}, "
        f"{_t(d.get('pricing_source'))})"
    )


def _compaction(d: dict[str, Any], reason: str) -> list[Frag]:
    """A compaction: what it took out and kept, and the gate's formula on those sizes."""
    compaction_id, mechanism = _t(d.get("compaction_id")), _t(d.get("mechanism"))
    head = compaction_id if mechanism in compaction_id else f"{compaction_id} ({mechanism})"
    what = []
    cleared = d.get("tool_call_ids") or []
    if cleared:
        what.append(f"cleared {_names(cleared)}")
    removed = number(d.get("messages_removed")) or 0
    if removed:
        what.append(f"{removed} message{'s' if removed != 1 else ''} removed")
    cost = number(d.get("cost_usd"))
    if cost:
        what.append(f"its call {usd(cost)}")
    line = f"  −{_tokens(d.get('removed_tokens'))} tok, kept {_tokens(d.get('kept_tokens'))} tok"
    if what:
        line += f" ({'; '.join(what)})"
    if reason:
        line += f": {reason}"
    terms = _terms(d) if d.get("pricing_source") else "(unpriced model: no prediction)"
    return [("  compaction ", "green"), (head, "bold"), (f"{line}\n{terms}", "")]


def _decision(d: dict[str, Any]) -> list[Frag]:
    """One framework middleware's decision: its name, what it did, its reason."""
    span = d.get("span")
    frags: list[Frag] = [("middleware", "cyan"), ("  ", ""), (_t(d.get("middleware")), "bold")]
    reason = _t(d.get("reason") or "")
    if span == c.SPAN_STAGE:
        offered, selected = d.get("offered") or [], d.get("selected") or []
        dropped = d.get("dropped") or []
        frags.append((f"  {len(offered)} offered → {len(selected)} selected", ""))
        if dropped:
            frags.append((f" (−{len(dropped)}: {_names(dropped)})", ""))
    elif span == c.SPAN_SEAM_PRE_MODEL:
        frags += [(f"  {_t(d.get('winner_source'))} → ", ""), (_t(d.get("model")), "bold")]
        failed = d.get("failed_models") or []
        if failed:
            errors = d.get("error_types") or []
            shown = [
                f"{_t(m)} {_t(errors[i])}" if i < len(errors) else _t(m)
                for i, m in enumerate(failed[:_MAX_NAMES])
            ]
            frags.append((f" (failed: {', '.join(shown)})", "red"))
    elif span == c.SPAN_DISPATCH:
        call = f" ({_t(d['tool_call_id'])})" if d.get("tool_call_id") else ""
        frags += [("  blocked ", "red"), (f"{_t(d.get('tool'))}{call}", "")]
    elif span == c.SPAN_COMPACTION:
        frags += _compaction(d, reason)
        reason = ""
    else:
        frags.append((f"  {_t(d.get('decision'))}", ""))
    if reason:
        frags.append((f": {reason}", ""))
    if d.get("decision_model"):
        asked = f" · asked {_t(d['decision_model'])}"
        calls = [call for call in d.get("decision_calls") or [] if call.get("input_tokens")]
        if calls:
            tokens_in = sum(number(call["input_tokens"]) or 0 for call in calls)
            tokens_out = sum(number(call.get("output_tokens")) or 0 for call in calls)
            times = f"{len(calls)} calls, " if len(calls) > 1 else ""
            asked += f" ({times}in {_tokens(tokens_in)} tok · out {_tokens(tokens_out)} tok)"
        frags.append((asked, "dim"))
    return frags


def _iteration(parent: Node, it: dict[str, Any], *, tool: str | None) -> None:
    node = parent.add((f"iteration {_t(it.get('index'))}", "bold"))
    skipped = it.get("decisions_skipped")
    if skipped:
        node.add(
            ("decisions skipped", "red"),
            (
                f": {_t(skipped.get('error_type'))} while planning the model call; "
                "no tool selection and no policy for it (the model call ran as the "
                "framework made it)",
                "",
            ),
        )
    sel = it.get("selection")
    if sel:
        head = f"  {len(sel['offered'])} offered → {len(sel['selected'])} selected"
        if sel.get("forced_tool"):
            head += f", forced {_t(sel['forced_tool'])}"
        if sel.get("reused"):
            head += " (reused)"
        branch = node.add(("select_tools", "cyan"), (head, ""))
        for stage in sel["stages"]:
            branch.add(*_stage(stage))
    if it.get("pre_model"):
        node.add(*_pre(it["pre_model"]))
    decisions = it.get("middleware") or []
    blocked = [d for d in decisions if d.get("span") == c.SPAN_DISPATCH]
    for d in decisions:
        if d.get("span") != c.SPAN_DISPATCH:
            node.add(*_decision(d))
    chat = it.get("chat")
    if chat:
        usage = ""
        if chat.get("input_tokens") is not None:
            usage = f"  in {_tokens(chat['input_tokens'])} tok · out {_tokens(chat['output_tokens'])} tok"
        chosen = chat.get("chosen_unavailable")
        unavailable = (
            [(f"  (the PRE seam chose {_t(chosen)}: not callable here)", "yellow")]
            if chosen
            else []
        )
        failed = [(f"  failed: {_t(chat['error_type'])}", "red")] if chat.get("error_type") else []
        node.add(
            ("chat", "cyan"),
            (f"        {_t(chat.get('model'))}{usage}", ""),
            *failed,
            *unavailable,
        )
    for d in it.get("dispatches", []):
        node.add(*_dispatch(d))
    for d in blocked:
        node.add(*_decision(d))
    for e in it.get("executed", []):
        if e.get("error_type") == c.TOOL_CALL_BLOCKED:
            error = [(" blocked by a middleware: never ran", "red")]
        elif e.get("error_type") == c.TOOL_CALL_CANCELLED:
            error = [(" cancelled by the run's end before it answered", "red")]
        else:
            error = [(f" error {_t(e['error_type'])}", "red")] if e.get("error_type") else []
        node.add(("execute_tool", "cyan"), (f" {_t(e.get('tool'))}", ""), *error)
    for g in it.get("offload_gates", []):
        node.add(*_gate(g))
    if tool is not None:
        node.add((_t(tool), "magenta"), (f": {_t(tool_story(it, tool))}", ""))


def turn_label_tail(turn: dict[str, Any]) -> str:
    """A turn's label after ``turn N``: conversation, agent, trace id."""
    text = f" · conversation {_t(turn.get('conversation_id') or '?')}"
    if turn.get("agent"):
        text += f" · agent {_t(turn['agent'])}"
    return f"{text} · trace {turn['trace_id'][:8]}…"


def _turn_label(turn: dict[str, Any]) -> list[Frag]:
    return [(f"turn {turn['turn']}", "bold"), (turn_label_tail(turn), "")]


def turn_tree(turn: dict[str, Any], *, tool: str | None = None) -> Node:
    """A turn's decision tree; with ``tool``, each iteration ends with its story."""
    root = Node(_turn_label(turn))
    for d in turn.get("middleware") or []:
        root.add(*_decision(d))
    for it in turn["iterations"]:
        _iteration(root, it, tool=tool)
    return root


def tool_tree(turn: dict[str, Any], tool: str) -> Node:
    """The answer first: one line per iteration with ``tool``'s story."""
    root = Node(_turn_label(turn))
    before = middleware_story(turn.get("middleware") or [], tool)
    if before:
        root.add(("before the iterations", "bold"), ("  ", ""), (_t(tool), "magenta"),
                 (f": {_t('; '.join(before))}", ""))  # fmt: skip
    for it in turn["iterations"]:
        root.add(
            (f"iteration {_t(it.get('index'))}", "bold"),
            ("  ", ""),
            (_t(tool), "magenta"),
            (f": {_t(tool_story(it, tool))}", ""),
        )
    return root


def _duration(start: int, end: int) -> str:
    if end < start or not start or not end:
        return "?"
    ms = (end - start) / 1e6
    return f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def _attribute_text(key: str, value: Any) -> str:
    if isinstance(value, tuple | list):
        shown = "[" + ", ".join(_t(v) for v in value[:4]) + (", …]" if len(value) > 4 else "]")
    else:
        shown = _t(value)
    if len(shown) > 60:
        shown = shown[:59] + "…"
    return f"{_t(key)}={shown}"


def span_tree(trace_id: str, rows: list[dict[str, Any]]) -> Node:
    """A trace without decisions as its plain span tree (name, duration, status)."""
    services = sorted({r["service"] for r in rows if r["service"]})
    head = f"trace {trace_id} · {len(rows)} span{'s' if len(rows) != 1 else ''}"
    if services:
        head += f" · service {', '.join(_t(s) for s in services[:3])}"
    root = Node([(head, "bold"), (" · no seamscope decisions", "dim")])
    path: list[Node] = [root]
    hidden = 0
    for row in rows:
        depth = row["depth"]
        if depth >= _MAX_DEPTH:
            hidden += 1
            continue
        del path[depth + 1 :]
        label: list[Frag] = [
            (_t(row["name"]), "cyan"),
            (f"  {_duration(row['start_ns'], row['end_ns'])}", ""),
        ]
        if row["status"] == "ERROR":
            label.append(("  ERROR", "red"))
        attrs = list(row["attributes"].items())
        if attrs:
            shown = "  ".join(_attribute_text(k, v) for k, v in attrs[:_MAX_ATTRIBUTES])
            more = f"  (+{len(attrs) - _MAX_ATTRIBUTES})" if len(attrs) > _MAX_ATTRIBUTES else ""
            label.append((f"  {shown}{more}", "dim"))
        path.append(path[depth].add(*label))
    if hidden:
        root.add((f"… {hidden} spans nested deeper than {_MAX_DEPTH} levels not shown", "dim"))
    return root


def plain_lines(node: Node) -> Iterator[str]:
    """The tree as text lines with its guides, without styles."""
    yield from _text(node).split("\n")
    stack = _below(node, "")
    while stack:
        current, prefix, last = stack.pop()
        head, *more = _text(current).split("\n")
        yield f"{prefix}{'└── ' if last else '├── '}{head}"
        inner = prefix + ("    " if last else "│   ")
        for extra in more:
            yield inner + extra
        if current.children:
            stack += _below(current, inner)


def _text(node: Node) -> str:
    return "".join([text for text, _ in node.label])


def _below(node: Node, prefix: str) -> list[tuple[Node, str, bool]]:
    """``node``'s children to visit, the first last (a stack), each with whether it is
    its parent's last child."""
    kids = node.children
    end = len(kids) - 1
    return [(kid, prefix, i == end) for i, kid in enumerate(kids)][::-1]


def _rich(node: Node) -> Tree:
    tree = Tree(Text.assemble(*node.label))
    stack = [(tree, node)]
    while stack:
        target, source = stack.pop()
        for child in source.children:
            stack.append((target.add(Text.assemble(*child.label)), child))
    return tree


def write_tree(console: Console, node: Node) -> None:
    """Print a tree and a blank line: plain lines to a file or pipe, rich otherwise."""
    if console.is_terminal or console.record:
        console.print(_rich(node))
        console.print()
    else:
        console.file.write("\n".join(plain_lines(node)) + "\n\n")


_COLUMNS = (
    ("offload", False),
    ("mechanism", False),
    ("model", False),
    ("predicted net", True),
    ("realized net", True),
    ("carried", True),
    ("recalls", True),
    ("cache Δ", True),
    ("outcome", False),
)
_TITLE = "offload economics: predicted vs realized"


def _settlement_rows(settlements: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            _t(s.get("offload_id")),
            _t(s.get("mechanism")),
            _t(s.get("model")),
            usd(s.get("predicted_net_saving_usd"), True),
            usd(s.get("realized_net_saving_usd"), True),
            _t(s.get("turns_carried")),
            _t(s.get("recalls")),
            usd(s.get("cache_delta_usd")),
            _t(s.get("outcome") or "?"),
        ]
        for s in settlements
    ]


def render_settlements(settlements: list[dict[str, Any]]) -> Table:
    """The offload summary as a rich table (for a terminal or ``--svg``)."""
    table = Table(title=_TITLE, title_justify="left")
    for name, right in _COLUMNS:
        table.add_column(name, justify="right" if right else "left")
    for row in _settlement_rows(settlements):
        outcome = row[-1]
        table.add_row(*row[:-1], Text(outcome, style="green" if outcome == "gain" else "red"))
    return table


def plain_settlements(settlements: list[dict[str, Any]]) -> list[str]:
    """The same table as text lines, drawn as rich draws it, at any length."""
    rows = _settlement_rows(settlements)
    widths = [
        max([cell_len(name), *(cell_len(row[i]) for row in rows)])
        for i, (name, _) in enumerate(_COLUMNS)
    ]

    def line(cells: list[str], edge: str) -> str:
        parts = []
        for text, width, (_, right) in zip(cells, widths, _COLUMNS, strict=True):
            pad = " " * (width - cell_len(text))
            parts.append(f" {pad}{text} " if right else f" {text}{pad} ")
        return edge + edge.join(parts) + edge

    def rule(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * (w + 2) for w in widths) + right

    top = rule("┏", "━", "┳", "┓")
    return [
        _TITLE.ljust(cell_len(top)),
        top,
        line([name for name, _ in _COLUMNS], "┃"),
        rule("┡", "━", "╇", "┩"),
        *(line(row, "│") for row in rows),
        rule("└", "─", "┴", "┘"),
    ]


def shadow_lines(shadows: list[dict[str, Any]]) -> list[str]:
    """One line per shadow settlement: what the conversation realized beside
    what the shadow configuration would have (exact + expected [low, high])."""
    lines = []
    for s in shadows:
        low, high = [*(s.get("shadow_expected_range_usd") or []), None, None][:2]
        lines.append(
            f"shadow {_t(s.get('conversation_id'))}: realized "
            f"{usd(s.get('realized_net_saving_usd'), True)} vs shadow exact "
            f"{usd(s.get('shadow_exact_net_saving_usd'), True)} + expected "
            f"{usd(s.get('shadow_expected_net_saving_usd'), True)} "
            f"[{usd(low, True)}, {usd(high, True)}]"
        )
    return lines


def narrow_settlements(settlements: list[dict[str, Any]]) -> list[Text]:
    """The offload summary two lines an offload, for a terminal too narrow for the
    table (whose columns rich would cut to ``+$0.1…``): every id and amount whole."""
    lines = [Text(_TITLE)]
    for row in _settlement_rows(settlements):
        offload, mechanism, model, predicted, realized, carried, recalls, cache, outcome = row
        head = Text(f"{offload} · {model} · {mechanism} · cache Δ {cache} · ")
        head.append(outcome, style="green" if outcome == "gain" else "red")
        lines.append(head)
        lines.append(
            Text(
                f"  predicted {predicted} → realized {realized} · carried {carried} · "
                f"recalls {recalls}"
            )
        )
    return lines


def write_settlements(console: Console, settlements: list[dict[str, Any]]) -> None:
    """Print the offload summary: plain lines to a file or pipe, rich otherwise (the
    table when the terminal is wide enough for it whole, else two lines an offload)."""
    if console.is_terminal or console.record:
        table = render_settlements(settlements)
        wanted = Measurement.get(console, console.options.update_width(1 << 16), table)
        if wanted.maximum <= console.width:
            console.print(table)
            return
        for line in narrow_settlements(settlements):
            console.print(line, highlight=False)
    else:
        console.file.write("\n".join(plain_settlements(settlements)) + "\n")
