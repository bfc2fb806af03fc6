"""`python -m testkit.chaos --seed N [--scenario NAME ...] [--no-batches]` (`make chaos SEED=n`;
`BATCHES=0`: the schedulers write a record per execution, KADENCE_EXECUTION_BATCHES=false,
instead of in batches as by default).

Runs the short chaos scenarios against the local broker and prints each checker report; exits
1 if any finds a lost, early, phantom or differently-keyed duplicate execution.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from kadence.settings import KadenceSettings
from testkit.scenarios import SHORT, new_run, soak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenario", action="append", choices=sorted(SHORT))
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--soak", action="store_true", help="the 10-minute soak instead")
    parser.add_argument(
        "--batches",
        action=argparse.BooleanOptionalAction,
        default=KadenceSettings().execution_batches,
        help="executions in batches (KADENCE_EXECUTION_BATCHES, on by default; --no-batches: a "
        "record each)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep process logs and topics of passing scenarios too"
    )
    args = parser.parse_args(argv)
    failed = []
    chosen = {"soak": soak} if args.soak else {n: SHORT[n] for n in args.scenario or SHORT}
    for name, scenario in chosen.items():
        root = Path(tempfile.mkdtemp(prefix=f"kadence-chaos-{name}-"))
        run = new_run(name, args.seed, args.bootstrap, root, batches=args.batches).start()
        try:
            report = scenario(run)
        finally:
            run.stop()
        print(f"== {name} (seed {args.seed})\n{report.render()}\n", flush=True)
        if report.ok and not args.keep:
            run.cleanup()
        else:
            if not report.ok:
                failed.append(name)
            print(
                f"kept for inspection: process logs in {root}, topics in {run.settings.namespace}"
            )
    print(f"chaos: {len(failed)} of {len(chosen)} scenarios failed {failed or ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
