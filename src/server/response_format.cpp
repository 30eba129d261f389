#include "server/response_format.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace lockstep::server {

namespace {

using json = nlohmann::ordered_json;

// Unique within the process and unlikely to repeat across restarts: a random salt plus a counter.
std::string next_id() {
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%012llx%08llx", static_cast<unsigned long long>(salt & 0xffffffffffffull),
                static_cast<unsigned long long>(++counter));
  return buf;
}

std::string piece(const Tokenizer* tok, int32_t id) {
  if (!tok) return std::to_string(id);
  const int32_t one[1] = {id};
  return tok->decode(std::span<const int32_t>(one, 1), false);
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Completion) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

json head(const ResponseHeader& h, bool chunk) {
  json j;
  j["id"] = h.id;
  j["object"] = object_name(h.endpoint, chunk);
  j["created"] = h.created;
  j["model"] = h.model;
  return j;
}

}  // namespace

ResponseHeader new_response_header(Endpoint endpoint, const std::string& model) {
  ResponseHeader h;
  h.endpoint = endpoint;
  h.id = (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + next_id();
  h.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
  h.model = model;
  return h;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                int64_t reasoning_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}},
          {"completion_tokens_details", {{"reasoning_tokens", reasoning_tokens}}}};
}

json logprobs_json(Endpoint endpoint, const Tokenizer* tok, std::span<const TokenLogprob> lps,
                   size_t text_offset) {
  if (endpoint == Endpoint::Completion) {
    json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
    for (const auto& lp : lps) {
      const std::string p = piece(tok, lp.token);
      tokens.push_back(p);
      values.push_back(lp.logprob);
      json top = json::object();
      for (const auto& [id, v] : lp.top) top[piece(tok, id)] = v;
      tops.push_back(top);
      offsets.push_back(text_offset);
      text_offset += p.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops},
            {"text_offset", offsets}};
  }
  json content = json::array();
  for (const auto& lp : lps) {
    const std::string p = piece(tok, lp.token);
    json top = json::array();
    for (const auto& [id, v] : lp.top) {
      const std::string q = piece(tok, id);
      top.push_back({{"token", q}, {"logprob", v}, {"bytes", bytes_of(q)}});
    }
    content.push_back({{"token", p}, {"logprob", lp.logprob}, {"bytes", bytes_of(p)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json full_response(const ResponseHeader& h, const std::vector<ChoiceResult>& choices,
                   bool with_logprobs, const Tokenizer* tok, int64_t prompt_tokens, int64_t cached_tokens) {
  json j = head(h, false);
  json list = json::array();
  int64_t completion = 0, reasoning = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    completion += c.tokens;
    reasoning += c.reasoning_tokens;
    json choice;
    choice["index"] = i;
    if (h.endpoint == Endpoint::Completion) {
      choice["text"] = c.text;
    } else {
      // With calls and no text, content is null, as OpenAI sends it.
      const bool no_content = !c.tool_calls.empty() && c.text.empty();
      choice["message"] = {{"role", "assistant"}, {"content", no_content ? json(nullptr) : json(c.text)}};
      if (c.has_reasoning) choice["message"]["reasoning_content"] = c.reasoning;
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const auto& k : c.tool_calls)
          calls.push_back({{"id", k.id},
                           {"type", "function"},
                           {"function", {{"name", k.call.name}, {"arguments", k.call.arguments}}}});
        choice["message"]["tool_calls"] = std::move(calls);
      }
    }
    choice["logprobs"] = with_logprobs ? logprobs_json(h.endpoint, tok, c.logprobs, 0) : json(nullptr);
    choice["finish_reason"] = c.finish_reason;
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(prompt_tokens, completion, cached_tokens, reasoning);
  return j;
}

json stream_chunk(const ResponseHeader& h, int index, const std::string& text,
                  const std::string& reasoning, bool first,
                  const std::string& finish_reason, json logprobs, bool include_usage) {
  json j = head(h, true);
  json choice;
  choice["index"] = index;
  if (h.endpoint == Endpoint::Completion) {
    choice["text"] = text;
  } else {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (first || !text.empty()) delta["content"] = text;
    choice["delta"] = std::move(delta);
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  j["choices"] = json::array({std::move(choice)});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

std::vector<json> tool_call_chunks(const ResponseHeader& h, int index, int call_index, const IdentifiedCall& call,
                                   bool include_usage) {
  auto chunk = [&](json fragment) {
    json j = head(h, true);
    json choice;
    choice["index"] = index;
    choice["delta"] = {{"tool_calls", json::array({std::move(fragment)})}};
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = nullptr;
    j["choices"] = json::array({std::move(choice)});
    if (include_usage) j["usage"] = nullptr;
    return j;
  };
  std::vector<json> out;
  out.push_back(chunk({{"index", call_index},
                       {"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.call.name}, {"arguments", ""}}}}));
  out.push_back(chunk({{"index", call_index}, {"function", {{"arguments", call.call.arguments}}}}));
  return out;
}

json usage_chunk(const ResponseHeader& h, int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                 int64_t reasoning_tokens) {
  json j = head(h, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens);
  return j;
}

std::string to_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + to_text(j) + "\n\n"; }

}  // namespace lockstep::server
