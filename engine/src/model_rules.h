// The three models' differences, in one place. The engine asks these rules
// and never compares SchedulerConfig::model itself (docs/design.md §4).
//
//                                    demand   callbacks   independent
// tasks shared by equal keys          yes      yes         no
// key identity                        full     resource    full
// task priority                       max of   max ever    max of
//                                     active   seen        active
// cancel / end_owner                  own      whole task  own
//                                     demand   (refused    demand
//                                              finalizing)
// owner generations, deadlines        yes      no          yes
#pragma once

#include "demandflight/engine/config.h"

namespace dfl::detail {

struct ModelRules {
  explicit constexpr ModelRules(Model model)
      : shares_tasks(model != Model::independent),
        keys_by_resource(model == Model::callbacks),
        priority_never_falls(model == Model::callbacks),
        cancel_ends_whole_task(model == Model::callbacks),
        knows_owners_and_deadlines(model != Model::callbacks) {}

  // Equal keys share one live task (the independent model makes one per demand).
  bool shares_tasks;
  // A key is known by its resource name alone (the legacy callbacks scheduler).
  bool keys_by_resource;
  // A task runs at the highest priority it ever saw, not at the max of its
  // active demands.
  bool priority_never_falls;
  // A cancel (and an owner's end, a cancel of each of its requests) ends the
  // demand's whole task, and is refused while the task finalizes.
  bool cancel_ends_whole_task;
  // Owner generations and deadlines exist.
  bool knows_owners_and_deadlines;
};

}  // namespace dfl::detail
