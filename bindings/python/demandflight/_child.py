"""The entry point of a simulation's own process: ``python -m demandflight._child``.

Reads a pickled job from standard input, runs one simulation in this process (SimGrid
allows one per process), writes the result JSON where the job says, and reports an
error as one JSON line on standard error.
"""

import json
import pickle
import sys
import traceback


def main() -> int:
    job = pickle.loads(sys.stdin.buffer.read())
    try:
        from demandflight import _core
        if job.get("path") is not None:
            parsed = _core.load_trace(job["path"])
        else:
            parsed = _core.parse_trace(job["text"], job["name"])
        summary = _core.simulate(parsed, job["model"], job["policy"], job["policy_name"],
                                 job["seed"], job["max_transfers"], job["max_per_origin"],
                                 job["network_model"], job["out"], job["timeline"])
        sys.stdout.write(summary)
        return 0
    except BaseException as e:  # Reported to the parent, which raises it again.
        error = {"type": type(e).__name__, "message": str(e),
                 "traceback": traceback.format_exc()}
        for attr in ("file", "line", "field"):
            if hasattr(e, attr):
                error[attr] = getattr(e, attr)
        sys.stderr.write("\n" + json.dumps(error) + "\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
