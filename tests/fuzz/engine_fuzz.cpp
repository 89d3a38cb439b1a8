// libFuzzer target: engine operation sequences decoded from bytes. The bytes
// drive the randomized model-based test's Sequence (tests/engine/
// model_based_test.cpp) in place of its RNG, so every invariant it checks is
// checked here: one live task per key, effective priority = max of active
// demands, exactly one terminal per demand and never success after the end,
// slots and queue order, no preemption, kept partials, quiescence. The engine's
// own invariant check (DFL_CHECK_INVARIANTS) runs after every call as well.
#define DFL_MODEL_SEQUENCE_ONLY
#include "../engine/model_based_test.cpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const dfl::Model model = data[0] % 3 == 0   ? dfl::Model::demand
                           : data[0] % 3 == 1 ? dfl::Model::callbacks
                                              : dfl::Model::independent;
  dfl::Sequence sequence(dfl::Entropy(data + 1, size - 1), model);
  try {
    sequence.run();
  } catch (const dfl::Violation& v) {
    std::fprintf(stderr, "engine_fuzz: %s\nlast operations:\n", v.what());
    const auto& log = sequence.log();
    for (std::size_t i = log.size() > 40 ? log.size() - 40 : 0; i < log.size(); ++i)
      std::fprintf(stderr, "  %s\n", log[i].c_str());
    std::abort();
  }
  return 0;
}
