#include "server/tools/tool_family.h"

#include <atomic>
#include <random>

#include "server/tools/gemma4_parser.h"
#include "server/tools/hermes_parser.h"
#include "server/tools/llama3_parser.h"
#include "server/tools/mistral_parser.h"
#include "server/tools/qwen_xml_parser.h"

namespace lockstep::server::tools {

ToolFamily tool_family(std::string_view t) {
  auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|tool_call>")) return ToolFamily::kGemma4;
  if (has("[TOOL_CALLS]")) return has("[ARGS]") ? ToolFamily::kMistralArgs : ToolFamily::kMistralJson;
  if (has("<function=")) return ToolFamily::kQwenXml;
  if (has("<tool_call>")) return ToolFamily::kHermes;
  // Llama 3.x, and Llama 4 (<|header_start|>), whose calls take the same forms.
  if (has("<|python_tag|>") || has("<|start_header_id|>") || has("<|header_start|>")) return ToolFamily::kLlama3;
  return ToolFamily::kHermes;
}

const char* family_name(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes: return "hermes";
    case ToolFamily::kQwenXml: return "qwen3_xml";
    case ToolFamily::kLlama3: return "llama3_json";
    case ToolFamily::kMistralJson: return "mistral_json";
    case ToolFamily::kMistralArgs: return "mistral_args";
    case ToolFamily::kGemma4: return "gemma4";
  }
  return "hermes";
}

std::shared_ptr<const ToolCallParser> make_tool_parser(ToolFamily f, ToolList tools) {
  switch (f) {
    case ToolFamily::kHermes: return std::make_shared<HermesParser>();
    case ToolFamily::kQwenXml: return std::make_shared<QwenXmlParser>(std::move(tools));
    case ToolFamily::kLlama3: return std::make_shared<Llama3Parser>();
    case ToolFamily::kMistralJson:
    case ToolFamily::kMistralArgs: return std::make_shared<MistralParser>();
    case ToolFamily::kGemma4: return std::make_shared<Gemma4Parser>();
  }
  return std::make_shared<HermesParser>();
}

std::vector<std::string> family_markers(ToolFamily f) {
  switch (f) {
    case ToolFamily::kHermes:
    case ToolFamily::kQwenXml: return {"<tool_call>", "</tool_call>"};
    case ToolFamily::kLlama3: return {"<|python_tag|>", "<|python_start|>", "<|python_end|>"};
    case ToolFamily::kMistralJson:
    case ToolFamily::kMistralArgs: return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
    case ToolFamily::kGemma4: return {"<|tool_call>", "<tool_call|>", "<|\"|>"};
  }
  return {};
}

std::vector<int32_t> special_marker_ids(ToolFamily f, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (const auto& m : family_markers(f))
    if (auto id = tok.token_id(m); id && tok.is_special(*id)) ids.push_back(*id);
  return ids;
}

std::string new_tool_call_id(ToolFamily f) {
  // Ids only need to be unique within a conversation; a random salt and a counter make them
  // unique in the process and unlikely to repeat across restarts.
  static const uint64_t salt = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  uint64_t x = salt ^ (++counter * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  if (f == ToolFamily::kMistralJson || f == ToolFamily::kMistralArgs) {
    static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id;
    for (int i = 0; i < 9; ++i, x /= 62) id += kAlnum[x % 62];
    return id;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "call_";
  const uint64_t y = x * 0x94D049BB133111EBull ^ counter.load();
  for (int i = 0; i < 12; ++i) id += kHex[(x >> (4 * i)) & 15];
  for (int i = 0; i < 12; ++i) id += kHex[(y >> (4 * i)) & 15];
  return id;
}

}  // namespace lockstep::server::tools
