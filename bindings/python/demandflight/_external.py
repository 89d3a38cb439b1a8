"""A Python policy's runs in ``demandflight compare``:
``python -m demandflight._external POLICY.pkl sim TRACE --model M --policy NAME --seed S
--out FILE --quiet``.

``compare(..., policies=[MyPolicy()])`` pickles each Python policy and names a small
program that runs this module as the policy's ``--external`` runner: ``demandflight
compare`` then runs it with the arguments it gives ``demandflight sim``, and tabulates its
result with every other (regret, vs_oracle, paired statistics: one table, one code).
"""

import argparse
import pickle
import sys


def main(argv) -> int:
    parser = argparse.ArgumentParser(prog="demandflight._external")
    parser.add_argument("job")
    parser.add_argument("command", choices=["sim"])
    parser.add_argument("trace")
    parser.add_argument("--model", default="demand")
    parser.add_argument("--policy", required=True)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--resample", default="none")
    args = parser.parse_args(argv)
    with open(args.job, "rb") as f:
        job = pickle.load(f)
    sys.stdout = sys.stderr  # The policy's print() goes with the run's messages.
    from demandflight import _child, _core
    try:
        parsed = _core.load_trace(args.trace)
        _core.simulate(parsed, args.model, job["policy"], args.policy, args.seed, None, None,
                       None, args.out, "", resample=args.resample)
        return 0
    except BaseException as e:  # noqa: BLE001 - reported to compare(), which raises it
        _child.report_error(job, e)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
