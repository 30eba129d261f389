// lockstep: command-line entry point. Subcommands register themselves (command.h).
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "cli/command.h"
#include "core/error.h"

namespace lockstep::cli {
namespace {
struct Entry {
  std::string name, help;
  Command::Setup setup;
};
std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}
}  // namespace

Command::Command(std::string name, std::string help, Setup setup) {
  registry().push_back({std::move(name), std::move(help), std::move(setup)});
}

}  // namespace lockstep::cli

int main(int argc, char** argv) {
  using namespace lockstep::cli;
  CLI::App app{
      "lockstep: run Hugging Face LLM checkpoints on CPU; speed-ups never change the text."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lockstep 0.1.0");
  std::vector<std::function<int()>> runners;
  std::vector<CLI::App*> subs;
  for (auto& e : registry()) {
    CLI::App* sub = app.add_subcommand(e.name, e.help);
    runners.push_back(e.setup(*sub));
    subs.push_back(sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (size_t i = 0; i < subs.size(); ++i)
      if (subs[i]->parsed()) return runners[i]();
  } catch (const lockstep::Error& e) {
    std::fprintf(stderr, "lockstep: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lockstep: internal error: %s\n", e.what());
    return 2;
  }
  return 1;
}
