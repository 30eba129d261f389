// Subcommand registry: each cli/<name>.cpp registers itself with a static Command object, so
// commands live in their own files and main.cpp never changes when one is added.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace lockstep::cli {

struct Command {
  // setup adds the subcommand's options to `sub` and returns the function that runs it
  // (returning the process exit status).
  using Setup = std::function<std::function<int()>(CLI::App& sub)>;
  Command(std::string name, std::string help, Setup setup);
};

}  // namespace lockstep::cli
