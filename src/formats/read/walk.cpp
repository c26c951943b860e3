// open()'s walker and the global policy it applies.

#include "formats/read/walk.hpp"

#include "torchport/core/error.hpp"

namespace torchport::formats {

void check_globals(const pickle::Stats& stats, const OpenOptions& options, std::string_view where) {
  for (const auto& g : stats.globals) {
    const std::string name = g.module + "." + g.name;
    if (g.klass == pickle::GlobalClass::dangerous)
      throw Error(ErrorCode::unsafe_global,
                  "the pickle references '" + name +
                      "', which runs code when Python unpickles it (as torch.load without "
                      "weights_only would); torchport never runs it, and refuses the file. "
                      "`torchport scan` lists everything it references",
                  {}, g.first_offset, std::string(where));
    if (g.klass == pickle::GlobalClass::unknown && !options.allow_unknown_globals &&
        !pickle::allow_patterns_match(options.allow, g.module, g.name))
      throw Error(ErrorCode::unsafe_global,
                  "the pickle references '" + name +
                      "', which is not on the allow-list (OpenOptions::allow_unknown_globals is "
                      "false)",
                  {}, g.first_offset, std::string(where));
  }
}

Value LoadWalker::pickle(std::string_view, const ByteReader& start, pickle::Stats& stats,
                         const std::function<Value()>& run) {
  Value v;
  try {
    v = run();
  } catch (const Error&) {
    // A payload often breaks the pickle's grammar after its dangerous global
    // (getattr(__import__('os'), 'system')(...) calls a call's result): the
    // global is what the user must hear about, not the opcode that followed.
    check_globals(stats, options_, start.what());
    throw;
  }
  check_globals(stats, options_, start.what());
  return v;
}

}  // namespace torchport::formats
