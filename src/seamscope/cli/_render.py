"""Decision views → rich trees, one per turn, and the offload summary table."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from rich.tree import Tree

__all__ = ["render_settlements", "render_turn", "usd"]


def usd(value: Any, signed: bool = False) -> str:
    if value is None:
        return "?"
    v = float(value)
    if signed:
        return f"{'+' if v >= 0 else '−'}${abs(v):.4f}"
    return f"${v:.4f}"


def _tokens(value: Any) -> str:
    return "?" if value is None else f"{int(float(value)):,}".replace(",", " ")


def _errors(evaluations: list[dict[str, Any]]) -> str:
    bad = [
        f"'{e['policy']}' raised {e['error_type']}"
        if e.get("policy")
        else f"{e.get('adopter_error')} raised {e['error_type']}"
        for e in evaluations
        if e.get("error_type")
    ]
    return f"  [red](contained: {', '.join(bad)})[/red]" if bad else ""


def _pre(pre: dict[str, Any]) -> str:
    source = pre.get("winner_source")
    model = pre.get("model")
    if source == "policy":
        head = f"policy '{pre.get('policy')}' → [bold]{model}[/bold]"
    else:
        head = f"{source} → [bold]{model}[/bold]"
    return f"[cyan]pre_model[/cyan]   {head}{_errors(pre.get('evaluations', []))}"


def _dispatch(d: dict[str, Any]) -> str:
    emitted, final = d.get("emitted_tool"), d.get("final_tool")
    policy = d.get("policy")
    errors = _errors(d.get("evaluations", []))
    if d.get("palette_gate") == "dropped":
        target = d.get("redirect_to") or "?"
        who = f"policy '{policy}'" if policy else "adopter"
        return (
            f"[cyan]post_model[/cyan]  {emitted} ↛ {target} [yellow]dropped by palette gate[/yellow]"
            f" ({who}: target not routed); {final} dispatched{errors}"
        )
    if emitted != final:
        bits = []
        if policy:
            bits.append(f"policy '{policy}'")
            guard = d.get("guard")
            bits.append("guard ok" if guard == "passed" else f"guard {guard}")
        if d.get("adopter_override"):
            bits.append("adopter override")
        bits.append("palette kept")
        return (
            f"[cyan]post_model[/cyan]  {emitted} → [bold]{final}[/bold] ({', '.join(bits)}){errors}"
        )
    if d.get("adopter_override"):
        return f"[cyan]post_model[/cyan]  {emitted} (adopter changed its arguments){errors}"
    return f"[cyan]post_model[/cyan]  {emitted} as emitted{errors}"


def _gate(g: dict[str, Any]) -> str:
    code = g.get("reason_code")
    size = _tokens(g.get("output_tokens"))
    if code in ("net_positive", "net_not_positive"):
        verdict = "[green]fire[/green]   " if g.get("fire") else "[yellow]no fire[/yellow]"
        terms = (
            f"net {usd(g.get('net_saving_usd'), True)} = {usd(g.get('reprefill_saving_usd'))}"
            f" − {usd(g.get('stub_carry_cost_usd'))} − {usd(g.get('expected_recall_hop_cost_usd'))}"
        )
        p = g.get("recall_probability")
        tail = (
            f"({size} tok, H={g.get('horizon')}, p={float(p or 0):.2f}, {g.get('model')}, "
            f"{g.get('pricing_source')})"
        )
        offload = f" → offload {g['offload_id']}" if g.get("offload_id") else ""
        return f"[cyan]offload_gate[/cyan] {verdict} {terms}\n{tail}{offload}"
    reason = str(g.get("reason") or "")
    detail = reason[reason.find("(") :] if "(" in reason else reason
    return f"[cyan]offload_gate[/cyan] [dim]no fire  {code} {detail}[/dim]"


def _stage_line(stage: dict[str, Any]) -> Text:
    outcome = stage["outcome"]
    style = "green" if outcome == "select" else "dim"
    line = Text()
    line.append(f"{stage['name']:<15}", style="bold")
    line.append(f"{outcome:<8}", style=style)
    line.append(stage["reason"])
    if stage["degraded"]:
        line.append("  [degraded]", style="red")
    if stage["forced_reinstated"]:
        line.append("  [forced tool reinstated]", style="magenta")
    return line


def render_iteration(tree: Tree, it: dict[str, Any], *, tool: str | None = None) -> None:
    node = tree.add(f"[bold]iteration {it['index']}[/bold]")
    sel = it.get("selection")
    if sel:
        head = (
            f"[cyan]select_tools[/cyan]  {len(sel['offered'])} offered → "
            f"{len(sel['selected'])} selected"
        )
        if sel.get("forced_tool"):
            head += f", forced {sel['forced_tool']}"
        branch = node.add(head)
        for stage in sel["stages"]:
            branch.add(_stage_line(stage))
    if it.get("pre_model"):
        node.add(_pre(it["pre_model"]))
    chat = it.get("chat")
    if chat:
        usage = ""
        if chat.get("input_tokens") is not None:
            usage = f"  in {_tokens(chat['input_tokens'])} tok · out {_tokens(chat['output_tokens'])} tok"
        node.add(f"[cyan]chat[/cyan]        {chat.get('model')}{usage}")
    for d in it.get("dispatches", []):
        node.add(_dispatch(d))
    for e in it.get("executed", []):
        error = f" [red]error {e['error_type']}[/red]" if e.get("error_type") else ""
        node.add(f"[cyan]execute_tool[/cyan] {e.get('tool')}{error}")
    for g in it.get("offload_gates", []):
        node.add(_gate(g))
    if tool is not None:
        from seamscope.cli._views import tool_story

        node.add(f"[magenta]{tool}[/magenta]: {tool_story(it, tool)}")


def render_turn(turn: dict[str, Any], *, tool: str | None = None) -> Tree:
    trace = turn["trace_id"]
    label = f"[bold]turn {turn['turn']}[/bold] · conversation {turn.get('conversation_id') or '?'}"
    if turn.get("agent"):
        label += f" · agent {turn['agent']}"
    label += f" · trace {trace[:8]}…"
    tree = Tree(label)
    for it in turn["iterations"]:
        render_iteration(tree, it, tool=tool)
    return tree


def render_settlements(settlements: list[dict[str, Any]]) -> Table:
    table = Table(title="offload economics: predicted vs realized", title_justify="left")
    for col in (
        "offload",
        "model",
        "predicted net",
        "realized net",
        "carried",
        "recalls",
        "cache Δ",
        "outcome",
    ):
        table.add_column(
            col, justify="right" if col not in ("offload", "model", "outcome") else "left"
        )
    for s in settlements:
        outcome = s.get("outcome") or "?"
        style = "green" if outcome == "gain" else "red"
        table.add_row(
            str(s.get("offload_id")),
            str(s.get("model")),
            usd(s.get("predicted_net_saving_usd"), True),
            usd(s.get("realized_net_saving_usd"), True),
            str(s.get("turns_carried")),
            str(s.get("recalls")),
            usd(s.get("cache_delta_usd")),
            f"[{style}]{outcome}[/{style}]",
        )
    return table
