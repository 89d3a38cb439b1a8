// ResultRecorder scores the simulator and `demandflight replay` alike, but the
// two report in different orders: the simulator reports an aborted attempt's
// bytes while it handles the AbortTransfer, before the task's TaskEnded; the
// real backend's I/O thread reports them after the engine has ended the task.
// A partial kept by such an abort must be scored the same either way.
#include <gtest/gtest.h>

#include <sstream>

#include "demandflight/format/recorder.h"

namespace dfl::testing {
namespace {

format::Trace two_callers_of_one_artifact() {
  std::istringstream text(
      R"({"format": "demandflight-trace", "version": 1, "name": "kept-partial"})"
      "\n"
      R"({"op": "artifact", "id": "rock", "resource": "props/rock_01.ktx2", "revision": "r7", )"
      R"("target": "pc", "generation": 0, "size": 1000, "origin": "cdn"})"
      "\n"
      R"({"op": "subscribe", "t": 0.0, "demand": "first", "owner": "a", "artifact": "rock", )"
      R"("priority": 1})"
      "\n"
      R"({"op": "cancel", "t": 1.0, "demand": "first"})"
      "\n"
      R"({"op": "subscribe", "t": 5.0, "demand": "second", "owner": "b", "artifact": "rock", )"
      R"("priority": 1})"
      "\n");
  return format::read_trace(text, "kept-partial");
}

// A subscribe that makes task `task`, whose first attempt starts at once,
// resuming after `resume` bytes: what a runtime tells the recorder.
void start_task(format::ResultRecorder& recorder, const format::Trace& trace, double t,
                const format::Record& record, DemandHandle handle, std::uint64_t task,
                std::uint64_t resume) {
  recorder.before_subscribe(t, record);
  recorder.on(t, TaskCreated{TaskId{task}});
  recorder.on(t, TaskPriorityChanged{TaskId{task}, 1, 1});
  recorder.on(t, DemandAttached{handle, TaskId{task}, 1});
  recorder.transfer_started();
  recorder.on(t, StartTransfer{TaskId{task}, TransferId{10 + task}, KeyRef(trace.artifacts[0].key),
                               0, resume, 1000, 1, 0});
  recorder.after_commands(t);
}

// The first caller's task receives 400 bytes, is aborted when the caller
// cancels, and keeps them; the second caller's task resumes after them.
// `late`: the abort's bytes are reported after TaskEnded, as replay does.
format::Result run(const format::Trace& trace, bool late) {
  format::ResultRecorder recorder(trace, "demand", "keep-partial", 1);
  const format::Record& first = trace.records[0];
  const format::Record& second = trace.records[2];
  const DemandHandle a{0, 1};
  const DemandHandle b{0, 2};  // The slot is used again.

  start_task(recorder, trace, 0, first, a, 1, 0);

  recorder.on(1, Deliver{a, DemandOutcome::cancelled, TaskId{1}});
  recorder.on(1, AbortTransfer{TaskId{1}, TransferId{11}, true, 400});
  if (!late) {
    recorder.transfer_bytes(TaskId{1}, 400);
    recorder.attempt_aborted(TaskId{1}, 400);
  }
  recorder.on(1, TaskPriorityChanged{TaskId{1}, std::nullopt, std::nullopt});
  recorder.on(1, TaskEnded{TaskId{1}, TaskOutcome::aborted, 1, 400});
  recorder.after_commands(1);
  if (late) {
    recorder.transfer_bytes(TaskId{1}, 400);
    recorder.attempt_aborted(TaskId{1}, 400);
  }

  start_task(recorder, trace, 5, second, b, 2, 400);
  recorder.transfer_bytes(TaskId{2}, 600);
  recorder.on(6, Deliver{b, DemandOutcome::succeeded, TaskId{2}});
  recorder.on(6, TaskPriorityChanged{TaskId{2}, std::nullopt, std::nullopt});
  recorder.on(6, TaskEnded{TaskId{2}, TaskOutcome::installed, 1, 600});
  recorder.after_commands(6);
  return recorder.finish(6);
}

TEST(ResultRecorder, AKeptPartialIsScoredAlikeWhenTheAbortIsReportedAfterTheTaskEnded) {
  const format::Trace trace = two_callers_of_one_artifact();
  const format::Result in_order = run(trace, false);
  const format::Result late = run(trace, true);
  EXPECT_EQ(in_order.summary.bytes_wasted, 0u) << "the second task resumed the kept 400 bytes";
  EXPECT_EQ(late.summary.bytes_wasted, in_order.summary.bytes_wasted);
  EXPECT_EQ(late.summary.bytes_transferred, 1000u);
  EXPECT_EQ(late.summary.installs, 1u);
}

TEST(ResultRecorder, AnAbortedAttemptThatKeepsNothingIsWastedWhenReportedLate) {
  // The same story without keep_partial: the 400 bytes are wasted, in both orders.
  const format::Trace trace = two_callers_of_one_artifact();
  for (const bool late : {false, true}) {
    format::ResultRecorder recorder(trace, "demand", "always-abort", 1);
    const DemandHandle a{0, 1};
    start_task(recorder, trace, 0, trace.records[0], a, 1, 0);
    recorder.on(1, Deliver{a, DemandOutcome::cancelled, TaskId{1}});
    recorder.on(1, AbortTransfer{TaskId{1}, TransferId{11}, false, 0});
    if (!late) recorder.attempt_aborted(TaskId{1}, 400);
    recorder.on(1, TaskEnded{TaskId{1}, TaskOutcome::aborted, 1, 400});
    recorder.after_commands(1);
    if (late) recorder.attempt_aborted(TaskId{1}, 400);
    EXPECT_EQ(recorder.finish(1).summary.bytes_wasted, 400u) << (late ? "late" : "in order");
  }
}

// The recorder follows demands from the commands alone. A subscribe may fire a
// deadline that had passed and hand the ended demand's slot to the new demand
// in the same call: the old Deliver (an older generation) comes first in the
// batch and still finds its demand; a cache hit's Deliver, with no
// DemandAttached, is the subscribing demand's.
TEST(ResultRecorder, FollowsDemandsThroughASlotTheSameCallHandsOn) {
  const format::Trace trace = two_callers_of_one_artifact();
  format::ResultRecorder recorder(trace, "demand", "always-abort", 1);
  const DemandHandle a{0, 1};
  const DemandHandle b{0, 2};
  start_task(recorder, trace, 0, trace.records[0], a, 1, 0);
  // One call at t = 5: a's deadline fires, then b joins task 1 in a's slot.
  recorder.before_subscribe(5, trace.records[2]);
  recorder.on(5, Deliver{a, DemandOutcome::timed_out, TaskId{1}});
  recorder.on(5, DemandAttached{b, TaskId{1}, 1});
  recorder.on(6, Deliver{b, DemandOutcome::succeeded, TaskId{1}});
  recorder.on(6, TaskPriorityChanged{TaskId{1}, std::nullopt, std::nullopt});
  recorder.on(6, TaskEnded{TaskId{1}, TaskOutcome::installed, 1, 1000});
  recorder.after_commands(6);
  const format::Result result = recorder.finish(6);
  ASSERT_EQ(result.demands.size(), 2u);
  EXPECT_EQ(result.demands[0].outcome, DemandOutcome::timed_out);
  EXPECT_EQ(result.demands[0].t_end, 5);
  EXPECT_EQ(result.demands[1].outcome, DemandOutcome::succeeded);
  EXPECT_EQ(result.demands[1].t_end, 6);

  format::ResultRecorder hits(trace, "demand", "always-abort", 1);
  hits.before_subscribe(0, trace.records[0]);
  hits.on(0, Deliver{a, DemandOutcome::succeeded, TaskId{}});
  EXPECT_EQ(hits.finish(0).summary.cache_hits, 1u);
  format::ResultRecorder stray(trace, "demand", "always-abort", 1);
  EXPECT_THROW(stray.on(0, Deliver{a, DemandOutcome::succeeded, TaskId{}}), std::logic_error);
}

// Priority pollution is the time a task runs above what its active demands
// ask for, as TaskPriorityChanged announces both.
TEST(ResultRecorder, PollutionIsTheEffectivePriorityAboveTheDemandedOne) {
  const format::Trace trace = two_callers_of_one_artifact();
  format::ResultRecorder recorder(trace, "callbacks", "always-abort", 1);
  start_task(recorder, trace, 0, trace.records[0], DemandHandle{0, 1}, 1, 0);
  recorder.on(2, TaskPriorityChanged{TaskId{1}, 1, 0});  // The demand lowered itself.
  recorder.after_commands(2);
  recorder.on(5, TaskPriorityChanged{TaskId{1}, 1, 1});
  recorder.after_commands(5);
  const format::Result result = recorder.finish(9);
  EXPECT_DOUBLE_EQ(result.summary.priority_pollution_s, 3.0);
  // The timeline is the effective priority's: one entry, at the start.
  ASSERT_EQ(result.tasks.size(), 1u);
  EXPECT_EQ(result.tasks[0].priority_timeline.size(), 1u);
}

// A task's orphan decisions: the first answer and one that stopped it; a
// re-ask that kept it completing changes nothing and is not listed. Its
// timeline keeps the orphan level it ran at, but not the change at its end.
TEST(ResultRecorder, ListsTheFirstOrphanDecisionAndTheOneThatStoppedTheTask) {
  const format::Trace trace = two_callers_of_one_artifact();
  format::ResultRecorder recorder(trace, "demand", "yield", 1);
  const DemandHandle a{0, 1};
  start_task(recorder, trace, 0, trace.records[0], a, 1, 0);
  recorder.on(1, Deliver{a, DemandOutcome::cancelled, TaskId{1}});
  recorder.on(1, TaskPriorityChanged{TaskId{1}, std::nullopt, std::nullopt});
  recorder.on(1, OrphanDecided{TaskId{1}, OrphanDecision::complete, true, 100});
  recorder.after_commands(1);
  recorder.on(2, OrphanDecided{TaskId{1}, OrphanDecision::complete, false, 300});
  recorder.on(3, OrphanDecided{TaskId{1}, OrphanDecision::abort, false, 500});
  recorder.on(3, AbortTransfer{TaskId{1}, TransferId{11}, false, 0});
  recorder.attempt_aborted(TaskId{1}, 500);
  recorder.on(3, TaskEnded{TaskId{1}, TaskOutcome::aborted, 1, 500});
  recorder.after_commands(3);

  // The second caller's task: its demand's success ends it.
  const DemandHandle b{0, 2};
  start_task(recorder, trace, 5, trace.records[2], b, 2, 0);
  recorder.on(6, Deliver{b, DemandOutcome::succeeded, TaskId{2}});
  recorder.on(6, TaskPriorityChanged{TaskId{2}, std::nullopt, std::nullopt});
  recorder.on(6, TaskEnded{TaskId{2}, TaskOutcome::installed, 1, 1000});
  recorder.after_commands(6);
  const format::Result result = recorder.finish(6);

  ASSERT_EQ(result.tasks.size(), 2u);
  const format::TaskResult& orphan = result.tasks[0];
  ASSERT_EQ(orphan.orphan_decisions.size(), 2u);
  EXPECT_EQ(orphan.orphan_decisions[0].t, 1);
  EXPECT_EQ(orphan.orphan_decisions[0].decision, OrphanDecision::complete);
  EXPECT_EQ(orphan.orphan_decisions[0].bytes_done, 100u);
  EXPECT_EQ(orphan.orphan_decisions[1].t, 3);
  EXPECT_EQ(orphan.orphan_decisions[1].decision, OrphanDecision::abort);
  EXPECT_EQ(orphan.orphan_decisions[1].bytes_done, 500u);
  EXPECT_EQ(orphan.t_first_start, 0.0);
  using Timeline = std::vector<std::pair<double, std::optional<Priority>>>;
  EXPECT_EQ(orphan.priority_timeline, (Timeline{{0, 1}, {1, std::nullopt}}));
  EXPECT_TRUE(result.tasks[1].orphan_decisions.empty());
  EXPECT_EQ(result.tasks[1].t_first_start, 5.0);
  EXPECT_EQ(result.tasks[1].priority_timeline, (Timeline{{5, 1}}));
}

// When a task's bytes were all in: its last finalize's start, after a body
// that failed verification and was fetched again; never, for a task aborted
// before its transfer completed.
TEST(ResultRecorder, ATaskWasReceivedWhenItsLastFinalizeBegan) {
  const format::Trace trace = two_callers_of_one_artifact();
  format::ResultRecorder recorder(trace, "demand", "always-abort", 1);
  const DemandHandle a{0, 1};
  start_task(recorder, trace, 0, trace.records[0], a, 1, 0);
  const KeyRef key(trace.artifacts[0].key);
  recorder.on(2, StartFinalize{TaskId{1}, FinalizeId{21}, key, 1000});
  recorder.after_commands(2);
  recorder.transfer_started();
  recorder.on(3, StartTransfer{TaskId{1}, TransferId{12}, key, 0, 0, 1000, 2, 0});
  recorder.after_commands(3);
  recorder.on(5, StartFinalize{TaskId{1}, FinalizeId{22}, key, 1000});
  recorder.after_commands(5);
  recorder.on(6, Deliver{a, DemandOutcome::succeeded, TaskId{1}});
  recorder.on(6, TaskPriorityChanged{TaskId{1}, std::nullopt, std::nullopt});
  recorder.on(6, TaskEnded{TaskId{1}, TaskOutcome::installed, 2, 2000});
  recorder.after_commands(6);

  const DemandHandle b{0, 2};
  start_task(recorder, trace, 7, trace.records[2], b, 2, 0);
  recorder.on(8, Deliver{b, DemandOutcome::cancelled, TaskId{2}});
  recorder.on(8, AbortTransfer{TaskId{2}, TransferId{12}, false, 0});
  recorder.attempt_aborted(TaskId{2}, 0);
  recorder.on(8, TaskPriorityChanged{TaskId{2}, std::nullopt, std::nullopt});
  recorder.on(8, TaskEnded{TaskId{2}, TaskOutcome::aborted, 1, 0});
  recorder.after_commands(8);
  const format::Result result = recorder.finish(8);

  ASSERT_EQ(result.tasks.size(), 2u);
  EXPECT_EQ(result.tasks[0].t_first_start, 0.0);
  EXPECT_EQ(result.tasks[0].t_received, 5.0);
  EXPECT_EQ(result.tasks[0].t_end, 6.0);
  EXPECT_EQ(result.tasks[1].t_first_start, 7.0);
  EXPECT_FALSE(result.tasks[1].t_received.has_value());
}

}  // namespace
}  // namespace dfl::testing
