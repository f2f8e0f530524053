"""`pybackward ops`: the registered op types, what a program needs that is missing, Paddle coverage."""
from __future__ import annotations

import click

import pybackward

from .common import handle_errors, legacy_only, ops_option


def coverage_totals_line(t: dict) -> str:
    return (f"{t['op_types']} op types: {t['with_maker']} with a grad maker, {t['equal']} equal to Paddle's "
            f"({t['differs']} differ, {t['unchecked']} unchecked), {t['empty']} empty makers, "
            f"{t['none']} without one, {t['sub_block']} sub-block; kernels: {t['kernels']} forward, "
            f"{t['grad_kernels']} of {t['with_maker']} grad; Paddle runs {t['cpu']} on CPU: "
            f"{t['cpu_kernels']} with a forward kernel here, {t['cpu_grad_kernels']} of its "
            f"{t['cpu_with_maker']} differentiable ones forward and backward")


@click.command(short_help='List the registered op types and what each supports.')
@click.option("--missing", "missing", type=click.Path(dir_okay=False),
              help="List the op types PROGRAM uses that pybackward cannot differentiate or run.")
@click.option("--coverage", is_flag=True,
              help="Every op type Paddle 3.3.1 knows: family, grad rule checked against Paddle's "
                   "recorded makers, kernel; then totals.")
@click.option("--records", type=click.Path(file_okay=False),
              help="With --coverage: the grad-maker records (default: testdata/grad_makers of a checkout).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@handle_errors
@ops_option
def ops(missing, coverage, records, as_json):
    """List the registered op types and what each supports (read from the registry)."""
    import json
    from pybackward.ops import registry
    if coverage:
        from pybackward.backward.maker_check import coverage_rows, coverage_totals
        rows = coverage_rows(records)
        totals = coverage_totals(rows)
        if as_json:
            click.echo(json.dumps({"ops": rows, "totals": totals}))
            return
        click.echo(f"{'op type':<44} {'family':<13} {'grad rule':<10} {'kernel':<6} {'grad kernel':<11} "
                   "Paddle CPU")
        for r in rows:
            click.echo(f"{r['type']:<44} {r['family']:<13} {r['grad']:<10} "
                       f"{'yes' if r['kernel'] else 'no':<6} {r['grad_kernel']:<11} "
                       f"{'yes' if r['paddle_cpu'] else 'no'}")
        click.echo(coverage_totals_line(totals))
        return
    if missing:
        prog = legacy_only(pybackward.load(missing), "ops --missing", missing)
        used: dict[str, int] = {}
        for b in prog.blocks:
            for op in b.ops:
                used[op.type] = used.get(op.type, 0) + 1
        rows = []
        for t, n in sorted(used.items()):
            d = registry.find(t)
            problem = ("unknown op type" if d is None else
                       "no kernel" if not d.has_kernel else None)
            if problem:
                rows.append({"type": t, "uses": n, "problem": problem})
        if as_json:
            click.echo(json.dumps(rows))
        elif not rows:
            click.echo(f"every op type in {missing} is supported ({len(used)} types)")
        else:
            for r in rows:
                click.echo(f"{r['type']:<32} x{r['uses']:<4} {r['problem']}")
        if rows:
            raise pybackward.CheckFailedError(f"{len(rows)} op types in {missing} are not supported")
        return
    rows = []
    for t, d in registry.known_ops().items():     # from the op index: no family imported
        kind = d.grad_kind
        grad = None if kind is None else d.grad.type if kind == "spec" else "(maker)"
        rows.append({"type": t, "kernel": d.has_kernel, "grad": grad,
                     "grad_of": d.grad_of, "inputs": list(d.inputs), "outputs": list(d.outputs),
                     "differentiable": list(d.differentiable_inputs or ()),
                     "attrs": list(d.attrs_handled)})
    if as_json:
        click.echo(json.dumps(rows))
        return
    click.echo(f"{'op type':<34} {'kernel':<7} {'grad op':<34} attrs handled")
    for r in rows:
        grad = r["grad"] or ("-" if not r["grad_of"] else f"(grad of {r['grad_of']})")
        click.echo(f"{r['type']:<34} {'yes' if r['kernel'] else 'no':<7} {grad:<34} {', '.join(r['attrs'])}")
    click.echo(f"{len(rows)} op types", err=True)
