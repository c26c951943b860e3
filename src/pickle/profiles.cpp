// Opt-in profiles: a library's classes that Python builds without running
// code a file can steer, each with the one form a pickle may use it in.
//
// A class is listed only when building it, as pickle and torch.load build
// it, runs none of its library's code, or (`ProfileClass::note`) only code
// no byte of the file reaches: tests/ecosystem/check_profiles.py shows and
// checks that for every class listed here against the installed library,
// by introspection and by tracing every Python function its building and
// the real files' loading enter (docs/security.md, "Profiles").

#include <algorithm>
#include <iterator>
#include <string>

#include "pickle/unpickler.hpp"
#include "torchport/core/error.hpp"

namespace torchport::pickle {
namespace {

constexpr ProfileUse kObject = ProfileUse::object;
constexpr ProfileUse kMember = ProfileUse::enum_member;

// transformers' Trainer writes `torch.save(self.args)` into every
// checkpoint-N/ as training_args.bin: a TrainingArguments dataclass, an
// AcceleratorConfig inside, its Enum fields (lists of DebugOption and
// FSDPOption when those options are set), and accelerate's PartialState
// (args.distributed_state) with its DistributedType.
constexpr ProfileClass kTrainingArgs[] = {
    {"accelerate.state", "PartialState", kObject,
     "its __getattr__ runs once, for pickle's lookup of __setstate__ on the empty instance "
     "(before any state is stored), and raises AttributeError"},
    {"accelerate.utils.dataclasses", "DistributedType", kMember, ""},
    {"transformers.debug_utils", "DebugOption", kMember, ""},
    {"transformers.trainer_pt_utils", "AcceleratorConfig", kObject, ""},
    {"transformers.trainer_utils", "FSDPOption", kMember, ""},
    {"transformers.trainer_utils", "HubStrategy", kMember, ""},
    {"transformers.trainer_utils", "IntervalStrategy", kMember, ""},
    {"transformers.trainer_utils", "SaveStrategy", kMember, ""},
    {"transformers.trainer_utils", "SchedulerType", kMember, ""},
    {"transformers.training_args", "OptimizerNames", kMember, ""},
    {"transformers.training_args", "TrainingArguments", kObject, ""},
};

constexpr Profile kProfiles[] = {
    {"transformers-training-args",
     "the training_args.bin of transformers' Trainer checkpoints (TrainingArguments, its Enums, "
     "accelerate's PartialState)",
     kTrainingArgs},
};

}  // namespace

std::span<const Profile> profiles() noexcept {
  return kProfiles;
}

const ProfileClass* profile_class(std::span<const std::string> active, std::string_view module,
                                  std::string_view name) noexcept {
  for (const Profile& p : kProfiles) {
    if (std::find(active.begin(), active.end(), p.name) == active.end()) continue;
    for (const ProfileClass& c : p.classes)
      if (c.module == module && c.name == name) return &c;
  }
  return nullptr;
}

void validate_profiles(std::span<const std::string> names) {
  for (const std::string& n : names) {
    if (std::any_of(std::begin(kProfiles), std::end(kProfiles),
                    [&](const Profile& p) { return p.name == n; }))
      continue;
    std::string known;
    for (const Profile& p : kProfiles) known += (known.empty() ? "" : ", ") + std::string(p.name);
    throw Error(ErrorCode::invalid_argument,
                "no profile '" + n + "' (torchport knows: " + known + ")");
  }
}

bool enum_member_name(std::string_view name) noexcept {
  if (name.empty() || name.front() < 'A' || name.front() > 'Z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace torchport::pickle
