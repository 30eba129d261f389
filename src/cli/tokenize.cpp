// `lockstep tokenize` and `lockstep detokenize`: the tokenizer from the command line, with a JSON
// shape that other checks compare against Hugging Face's library.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::cli {
namespace {

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    const std::string s = item.substr(b, e - b + 1);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || v < 0 || v > INT32_MAX)
      fail("--ids: \"", s, "\" is not a token id (expected non-negative integers, comma separated)");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

struct TokenizeArgs {
  std::string model, prompt, file;
  bool add_special = false, pieces = false, json = false;
};

const Command tokenize_command(
    "tokenize", "Print the token ids of a text (the ids of Hugging Face's tokenizer)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<TokenizeArgs>();
      sub.add_option("-m,--model", a->model, "model directory or directory with tokenizer.json")
          ->required();
      auto* p = sub.add_option("-p,--prompt", a->prompt, "text to tokenize");
      auto* f = sub.add_option("--file", a->file, "file whose bytes are tokenized");
      p->excludes(f);
      f->excludes(p);
      sub.add_flag("--add-special", a->add_special,
                   "apply the post-processor (BOS/EOS), as add_special_tokens=True");
      sub.add_flag("--pieces", a->pieces, "also print each token's vocabulary string");
      sub.add_flag("--json", a->json, "print {\"ids\": [...]} (with --pieces also \"pieces\")");
      return [a, p, f]() -> int {
        if (p->count() == 0 && f->count() == 0) fail("tokenize: give the text with -p or --file");
        std::string text = a->prompt;
        if (f->count()) {
          std::ifstream in(a->file, std::ios::binary);
          if (!in) fail(a->file, ": cannot open");
          std::ostringstream s;
          s << in.rdbuf();
          text = s.str();
        }
        const auto tok = Tokenizer::load(a->model);
        const auto ids = tok->encode(text, a->add_special);
        if (a->json) {
          nlohmann::json out = {{"ids", ids}};
          if (a->pieces) {
            auto& list = out["pieces"] = nlohmann::json::array();
            for (int32_t id : ids) list.push_back(tok->id_to_piece(id));
          }
          std::printf("%s\n", dump(out).c_str());
        } else if (a->pieces) {
          for (int32_t id : ids)
            std::printf("%d\t%s\n", id, dump(nlohmann::json(tok->id_to_piece(id))).c_str());
        } else {
          for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
          std::printf("\n");
        }
        return 0;
      };
    });

struct DetokenizeArgs {
  std::string model, ids;
  bool skip_special = false, json = false;
};

const Command detokenize_command(
    "detokenize", "Print the text of a list of token ids",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<DetokenizeArgs>();
      sub.add_option("-m,--model", a->model, "model directory or directory with tokenizer.json")
          ->required();
      sub.add_option("--ids", a->ids, "comma-separated token ids, e.g. 1,2,3")->required();
      sub.add_flag("--skip-special", a->skip_special, "leave out special tokens");
      sub.add_flag("--json", a->json, "print {\"text\": \"...\"}");
      return [a]() -> int {
        const auto tok = Tokenizer::load(a->model);
        const std::string text = tok->decode(parse_ids(a->ids), a->skip_special);
        if (a->json)
          std::printf("%s\n", dump({{"text", text}}).c_str());
        else
          std::fwrite(text.data(), 1, text.size(), stdout), std::printf("\n");
        return 0;
      };
    });

}  // namespace
}  // namespace lockstep::cli
