"""Orphan policies written in Python change what the simulator does."""

import json

import pytest

import demandflight as dfl


class FinishEverything(dfl.OrphanPolicy):
    """Defined at module level: pickled by reference, imported by the child."""

    name = "finish-everything"

    def decide(self, view):
        return dfl.Decision.COMPLETE


class KeepAsString(dfl.OrphanPolicy):
    name = "keep-as-string"

    def decide(self, view):
        return "keep_partial"


def summary(result):
    s = dict(result.summary)
    return {k: s[k] for k in ("bytes_transferred", "bytes_wasted", "installs", "cache_hits",
                              "outcomes")}


def test_a_python_policy_changes_outcomes_as_the_builtin_with_the_same_rule(scenarios):
    trace = dfl.Trace.load(scenarios / "session_churn.jsonl")
    abort = dfl.simulate(trace, policy="always-abort")
    complete = dfl.simulate(trace, policy="always-complete")
    mine = dfl.simulate(trace, policy=FinishEverything())
    assert mine.policy == "finish-everything"
    assert summary(mine) == summary(complete), "the same decisions as always-complete"
    assert summary(mine) != summary(abort)
    assert mine.summary["bytes_wasted"] > abort.summary["bytes_wasted"]
    keep = dfl.simulate(trace, policy=KeepAsString())
    assert summary(keep) == summary(dfl.simulate(trace, policy="keep-partial"))


def test_a_policy_sees_the_view_and_its_state_stays_in_the_simulations_process(scenarios, tmp_path):
    log = tmp_path / "views.jsonl"

    class HalfDone(dfl.OrphanPolicy):  # A local class: cloudpickle sends it by value.
        name = "half-done"
        uses_key_history = True

        def __init__(self, path):
            self.path = str(path)
            self.requests = 0

        def observe_request(self, key, now_s):
            self.requests += 1

        def decide(self, view):
            with open(self.path, "a") as f:
                f.write(json.dumps({"done": view.bytes_done, "size": view.size_bytes,
                                    "resource": view.key.resource, "demands": view.key_demands,
                                    "requests": self.requests, "first": view.first_decision,
                                    "free": view.free_slots}) + "\n")
            return "complete" if view.bytes_done * 2 > view.size_bytes else "abort"

    policy = HalfDone(log)
    result = dfl.simulate(scenarios / "session_churn.jsonl", policy=policy)
    views = [json.loads(line) for line in log.read_text().splitlines()]
    assert views, "the policy was asked"
    assert all(0 <= v["done"] <= v["size"] for v in views)
    assert all(v["demands"] >= 1 and v["requests"] >= v["demands"] for v in views)
    assert policy.requests == 0, "the parent's instance is untouched"
    completed = sum(1 for v in views if v["first"] and v["done"] * 2 > v["size"])
    aborted_first = sum(1 for v in views if v["first"] and v["done"] * 2 <= v["size"])
    assert completed > 0 and aborted_first > 0, "both answers were given"
    aborted_tasks = (result.tasks["outcome"] == "aborted").sum()
    assert aborted_tasks >= aborted_first


def test_a_policy_that_answers_nonsense_is_a_value_error(scenarios):
    class Nonsense(dfl.OrphanPolicy):
        name = "nonsense"

        def decide(self, view):
            return 42

    with pytest.raises(ValueError, match="must return Decision"):
        dfl.simulate(scenarios / "session_churn.jsonl", policy=Nonsense())


class PolicyBroke(Exception):
    """A policy's own exception type: it must come back as itself."""


def test_a_policys_exception_prints_and_report_come_back_to_the_caller(scenarios, capfd):
    class Counting(dfl.OrphanPolicy):
        name = "counting"

        def __init__(self):
            self.asked = 0

        def decide(self, view):
            self.asked += 1
            print(f"asked about {view.key.resource}")  # Reaches the caller's stderr.
            return "abort"

        def report(self):
            return {"asked": self.asked}

    result = dfl.simulate(scenarios / "session_churn.jsonl", policy=Counting())
    out, err = capfd.readouterr()
    assert result.policy_report["asked"] > 0, "the child's state comes back"
    assert err.count("asked about ") == result.policy_report["asked"]
    assert "asked about" not in result.summary_text and "asked about" not in out

    class Broken(dfl.OrphanPolicy):
        name = "broken"

        def decide(self, view):
            raise PolicyBroke(f"cannot judge {view.key.resource}")

    with pytest.raises(PolicyBroke, match="cannot judge") as e:
        dfl.simulate(scenarios / "session_churn.jsonl", policy=Broken())
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "Raised by the policy in the simulation's process" in notes
    assert "in decide" in notes, notes
    assert dfl.simulate(scenarios / "three_callers.jsonl").policy_report is None


def test_a_python_policy_asks_to_be_asked_again_like_the_builtin_linger(scenarios):
    class Linger(dfl.OrphanPolicy):
        name = "py-linger"

        def __init__(self, delay_s):
            self.delay_s, self.until = delay_s, {}

        def decide(self, view):
            if view.first_decision or view.task not in self.until:
                self.until[view.task] = view.now_s + self.delay_s
            if view.now_s >= self.until[view.task]:
                del self.until[view.task]
                return "abort"
            return "complete"

        def ask_again_at_s(self, view):
            return self.until.get(view.task)

    trace = scenarios / "session_churn.jsonl"
    mine = dfl.simulate(trace, policy=Linger(0.5))
    builtin = dfl.simulate(trace, policy="linger:delay_s=0.5")
    assert mine.demands.drop(columns=[]).equals(builtin.demands)
    assert mine.summary == builtin.summary
    always = dfl.simulate(trace, policy="always-abort")
    assert mine.summary != always.summary, "lingering changed something"

    class Raises(Linger):
        def ask_again_at_s(self, view):
            raise PolicyBroke("no time")

    with pytest.raises(PolicyBroke, match="no time"):
        dfl.simulate(trace, policy=Raises(0.5))


def test_the_oracle_reports_its_search_and_no_builtin_beats_it(scenarios):
    oracle = dfl.simulate(scenarios / "session_churn.jsonl", policy="oracle")
    report = oracle.policy_report
    # A bounded search (sim/oracle.h): runs to the end for its bases, its
    # scout and the changes it verified, not one per decision.
    assert report["decisions"] > 0 and 0 < report["probed"] <= report["decisions"]
    assert report["runs"] < report["decisions"] and report["verified"] <= 32
    assert report["score"] <= report["base_score"]
    assert not oracle.warnings, "its own run scores what its best child did"
    bound = dfl.metrics(oracle.raw)["score"]
    for policy in ("always-abort", "keep-partial", "lookahead"):
        other = dfl.simulate(scenarios / "session_churn.jsonl", policy=policy)
        assert dfl.metrics(other.raw)["score"] >= bound, policy
