"""The entry point of a simulation's own process: ``python -m demandflight._child``.

Reads a pickled job from the file named by its argument, runs one simulation in this process (SimGrid
allows one per process), writes the result JSON where the job says, and reports an
error as one JSON line on standard error.
"""

import base64
import json
import pickle
import sys
import traceback


def _policy_raised(job, tb) -> bool:
    """Whether the exception was raised in the job's Python policy (its decide())."""
    policy = job.get("policy")
    if isinstance(policy, str):
        return False
    module = getattr(type(policy), "__module__", None)
    return any(frame.name in ("decide", "ask_again_at_s", "observe_request", "report") or
               frame.filename == getattr(
        sys.modules.get(module), "__file__", None) for frame in traceback.extract_tb(tb))


def main() -> int:
    with open(sys.argv[1], "rb") as f:
        job = pickle.load(f)
    # The summary is this process's stdout; anything else printed (a policy's print())
    # goes to stderr, which the parent passes on.
    summary_out = sys.stdout
    sys.stdout = sys.stderr
    try:
        from demandflight import _core
        if job.get("stream"):
            summary = _core.simulate_streamed(
                job["path"], job["model"], job["policy"], job["policy_name"], job["seed"],
                job["max_transfers"], job["max_per_origin"], job["network_model"], job["out"],
                job["demands_csv"], job["tasks_csv"])
            write_report(job)
            summary_out.write(summary)
            return 0
        if job.get("path") is not None:
            parsed = _core.load_trace(job["path"])
        else:
            parsed = _core.parse_trace(job["text"], job["name"])
        # With rows_out, the result comes as head_out (no rows) and rows_out (the rows by
        # column), not as one JSON document.
        rows_out = job.get("rows_out", "")
        summary = _core.simulate(parsed, job["model"], job["policy"], job["policy_name"],
                                 job["seed"], job["max_transfers"], job["max_per_origin"],
                                 job["network_model"], "" if rows_out else job["out"],
                                 job["timeline"], job.get("decisions", ""),
                                 job.get("decision_horizon_s", 60.0),
                                 job.get("oracle_bases", []), job.get("resample", "none"),
                                 job.get("head_out", ""), rows_out)
        write_report(job)
        summary_out.write(summary)
        return 0
    except BaseException as e:  # Reported to the parent, which raises it again.
        report_error(job, e)
        return 1


def write_report(job) -> None:
    """A Python policy's own figures (its report()) come back with the result."""
    report = getattr(job["policy"], "report", None)
    if callable(report):
        with open(job["out"] + ".report", "wb") as f:
            pickle.dump(report(), f)


def report_error(job, e: BaseException) -> None:
    """Writes ``e`` as one JSON line on stderr, for the parent to raise again."""
    error = {"type": type(e).__name__, "message": str(e), "traceback": traceback.format_exc()}
    if _policy_raised(job, e.__traceback__):
        error["from_policy"] = True
        try:
            error["pickled"] = base64.b64encode(pickle.dumps(e)).decode()
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            pass
    for attr in ("file", "line", "field"):
        if hasattr(e, attr):
            error[attr] = getattr(e, attr)
    sys.stderr.write("\n" + json.dumps(error) + "\n")


if __name__ == "__main__":
    sys.exit(main())
