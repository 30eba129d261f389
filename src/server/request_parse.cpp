#include "server/request_parse.h"

#include <algorithm>
#include <limits>

#include "constraints/reasoning_prefix.h"
#include "decode/speculative/drafters.h"
#include "server/api_error.h"
#include "server/reasoning_budget.h"
#include "server/structured_output.h"
#include "server/tool_request.h"
#include "server/tools/call_grammar.h"
#include "server/constraint_cache.h"
#include "core/error.h"

namespace lockstep::server {

namespace {

constexpr int64_t kMaxN = 16;
constexpr int kMaxLogprobs = 20;

// Fields we cannot honour: refusing them beats silently returning something else.
void reject_unsupported(const Body& body, Endpoint ep) {
  if (ep == Endpoint::Completion) {
    if (get_bool(body, "echo").value_or(false))
      bad_field("echo", "echo is not supported", "unsupported_parameter");
    if (get_int(body, "best_of", 1, kMaxN).value_or(1) > 1)
      bad_field("best_of", "best_of > 1 is not supported; use n", "unsupported_parameter");
    if (get_string(body, "suffix").value_or("") != "")
      bad_field("suffix", "suffix is not supported", "unsupported_parameter");
  }
}

// logit_bias: {"<token id>": bias in [-100, 100]} -> ascending (id, bias) pairs.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const Body& body, const ServingContext& ctx) {
  std::vector<std::pair<int32_t, float>> out;
  if (!has(body, "logit_bias")) return out;
  const Body& lb = body.at("logit_bias");
  if (!lb.is_object()) bad_field("logit_bias", "expected an object of token id -> bias, got " + json_kind(lb), "invalid_type");
  for (auto it = lb.begin(); it != lb.end(); ++it) {
    const std::string& key = it.key();
    const std::string field = "logit_bias." + key;
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos || used != key.size() || id < 0 ||
        id >= ctx.vocab_size)
      bad_field(field, "keys are token ids in [0, " + std::to_string(ctx.vocab_size) + ")", "invalid_value");
    if (!it.value().is_number())
      bad_field(field, "expected a number, got " + json_kind(it.value()), "invalid_type");
    const double bias = it.value().get<double>();
    if (!(bias >= -100 && bias <= 100))
      bad_field(field, "must be in [-100, 100], got " + it.value().dump(), "out_of_range");
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      bad_field("logit_bias", "token id " + std::to_string(out[i].first) + " appears twice", "invalid_value");
  return out;
}

std::vector<int32_t> check_ids(const Body& list, const ServingContext& ctx) {
  // Before a vector of up to 32 M ids is built from a 64 MiB body.
  if (static_cast<int64_t>(list.size()) >= ctx.context_tokens)
    bad_field("prompt", "the prompt is " + std::to_string(list.size()) + " tokens; the context holds " +
                            std::to_string(ctx.context_tokens) + " (prompt and output together)",
              "context_length_exceeded");
  std::vector<int32_t> ids;
  for (const auto& v : list) {
    if (!v.is_number_integer() && !v.is_number_unsigned())
      bad_field("prompt", "token id lists must hold integers, found " + json_kind(v), "invalid_type");
    const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX ? INT64_MAX : v.get<int64_t>();
    if (id < 0 || id >= ctx.vocab_size)
      bad_field("prompt", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(ctx.vocab_size) + ")", "invalid_value");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<int32_t> encode_text(const std::string& text, const ServingContext& ctx, bool add_special,
                                 const char* field) {
  if (!ctx.tokenizer)
    bad_field(field, "the model has no tokenizer.json; send the prompt as token ids", "no_tokenizer");
  check_prompt_bytes(text, ctx, field);
  return ctx.tokenizer->encode(text, add_special);
}

// prompt: "text", [ids], ["text"] or [[ids]]; one prompt per request.
std::vector<int32_t> completion_prompt(const Body& body, const ServingContext& ctx) {
  if (!has(body, "prompt")) bad_field("prompt", "required", "missing_required_parameter");
  const Body& p = body.at("prompt");
  // Same encoding as `lockstep generate -p`: with the tokenizer's special tokens (BOS, if any).
  if (p.is_string()) return encode_text(p.get<std::string>(), ctx, true, "prompt");
  if (!p.is_array())
    bad_field("prompt", "expected a string or an array of token ids, got " + json_kind(p), "invalid_type");
  if (p.empty()) bad_field("prompt", "empty", "invalid_value");
  if (p[0].is_string() || p[0].is_array()) {
    if (p.size() != 1)
      bad_field("prompt", "one prompt per request (got a batch of " + std::to_string(p.size()) +
                              "); send one request per prompt", "unsupported_parameter");
    if (p[0].is_string()) return encode_text(p[0].get<std::string>(), ctx, true, "prompt");
    return check_ids(p[0], ctx);
  }
  return check_ids(p, ctx);
}

// Everything but the prompt: sampling, limits, stops, logprobs, streaming, speculation.
void parse_common(const Body& body, const ServingContext& ctx, ParsedRequest& out) {
  reject_unsupported(body, out.endpoint);
  const char* prompt_field = out.endpoint == Endpoint::Chat ? "messages" : "prompt";
  EngineRequest& r = out.request;
  const int64_t plen = static_cast<int64_t>(r.prompt.size());
  const int64_t room = output_room(plen, ctx.context_tokens);  // the engine's context rule
  if (plen == 0) bad_field(prompt_field, "encodes to no tokens", "invalid_value");
  if (room < 1)
    bad_field(prompt_field, "the prompt is " + std::to_string(plen) + " tokens; the context holds " +
                                std::to_string(ctx.context_tokens) + " (prompt and output together)",
              "context_length_exceeded");

  // Speculation: the server's --spec unless the request names its own (extension fields).
  r.spec = get_string(body, "spec").value_or(ctx.config.default_spec);
  if (!is_spec_mode(r.spec))
    bad_field("spec", "unknown mode \"" + r.spec + "\" (expected none, lookup, draft, mtp or assistant)", "invalid_value");
  r.draft_width = static_cast<int>(get_int(body, "draft_width", 0, 16).value_or(
      has(body, "spec") ? 0 : ctx.config.default_draft_width));

  // max_completion_tokens is the newer name; when both come, it wins.
  std::optional<int64_t> max_tokens = get_int(body, "max_tokens", 1, std::numeric_limits<int64_t>::max());
  const char* max_field = "max_tokens";
  if (auto m = get_int(body, "max_completion_tokens", 1, std::numeric_limits<int64_t>::max())) {
    max_tokens = m;
    max_field = "max_completion_tokens";
  }
  if (max_tokens && *max_tokens > room)
    bad_field(max_field, std::to_string(*max_tokens) + " new tokens after a prompt of " +
                             std::to_string(plen) + " exceed the context of " +
                             std::to_string(ctx.context_tokens) + " tokens (at most " +
                             std::to_string(room) + " here)",
              "context_length_exceeded");
  // Defaults: OpenAI's 16 for completions (less when the context has less room); chat runs until
  // the context is full.
  r.options.max_tokens = max_tokens.value_or(out.endpoint == Endpoint::Completion ? std::min<int64_t>(16, room)
                                                                                  : room);

  SamplingParams& s = r.options.sampling;
  s.temperature = static_cast<float>(get_number(body, "temperature", 0, 2).value_or(0));
  s.top_p = static_cast<float>(get_number(body, "top_p", 0, 1).value_or(1));
  if (s.top_p <= 0) bad_field("top_p", "must be in (0, 1], got 0", "out_of_range");
  s.top_k = static_cast<int32_t>(std::max<int64_t>(0, get_int(body, "top_k", -1, INT32_MAX).value_or(0)));
  s.min_p = static_cast<float>(get_number(body, "min_p", 0, 1).value_or(0));
  s.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", -2, 2).value_or(0));
  s.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", -2, 2).value_or(0));
  s.repetition_penalty = static_cast<float>(get_number(body, "repetition_penalty", 0, 10).value_or(1));
  if (s.repetition_penalty <= 0) bad_field("repetition_penalty", "must be in (0, 10], got 0", "out_of_range");
  s.logit_bias = parse_logit_bias(body, ctx);
  // No seed means seed 0, as `lockstep generate` without --seed: a request is reproducible.
  s.seed = static_cast<uint64_t>(get_int(body, "seed", std::numeric_limits<int64_t>::min(),
                                         std::numeric_limits<int64_t>::max()).value_or(0));

  r.options.stop = get_string_or_list(body, "stop", 16);
  const bool ignore_eos = get_bool(body, "ignore_eos").value_or(false);  // extension (benchmarks)
  if (!ignore_eos) r.options.eos_ids = ctx.eos_ids;
  if (ctx.tokenizer) {
    r.options.tokenizer = ctx.tokenizer;
  } else if (!r.options.stop.empty()) {
    bad_field("stop", "stop strings need the model's tokenizer.json", "no_tokenizer");
  }
  // Checked and compiled before anything is queued: a bad schema costs no engine time. Without
  // EOS ids (ignore_eos) the output ends only where the grammar has ended, as in generate.
  if (auto format = parse_response_format(body))
    r.options.constraint = compile_response_format(*format, ctx, !ignore_eos);

  out.n = static_cast<int>(get_int(body, "n", 1, kMaxN).value_or(1));
  // The n choices are queued together; more than the server ever holds could never be accepted.
  const size_t capacity = ctx.engine->capacity();
  if (static_cast<size_t>(out.n) > capacity)
    bad_field("n", std::to_string(out.n) + " choices run as " + std::to_string(out.n) +
                       " sequences; this server holds at most " + std::to_string(capacity) +
                       " at once (--parallel " + std::to_string(ctx.engine->options().parallel) +
                       " plus --max-queue " + std::to_string(ctx.engine->options().max_queue) + ")",
              "out_of_range");
  out.stream = get_bool(body, "stream").value_or(false);
  if (has(body, "stream_options")) {
    const Body& so = body.at("stream_options");
    if (!so.is_object())
      bad_field("stream_options", "expected an object, got " + json_kind(so), "invalid_type");
    if (!out.stream) bad_field("stream_options", "only allowed with stream: true", "invalid_value");
    auto flag = [&](const char* name) {
      try {
        return get_bool(so, name).value_or(false);
      } catch (const ApiError&) {
        bad_field(std::string("stream_options.") + name, "expected a boolean", "invalid_type");
      }
    };
    out.include_usage = flag("include_usage");
    out.continuous_usage = flag("continuous_usage_stats");
    // As vLLM: usage on every chunk is a refinement of include_usage, not a switch of its own.
    out.continuous_usage = out.continuous_usage && out.include_usage;
  }
  (void)get_string(body, "user");  // accepted (type-checked), not used

  if (out.endpoint == Endpoint::Completion) {
    out.logprobs = static_cast<int>(get_int(body, "logprobs", 0, kMaxLogprobs).value_or(-1));
  } else {
    const bool want = get_bool(body, "logprobs").value_or(false);
    const auto top = get_int(body, "top_logprobs", 0, kMaxLogprobs);
    if (top && !want) bad_field("top_logprobs", "needs logprobs: true", "invalid_value");
    out.logprobs = want ? static_cast<int>(top.value_or(0)) : -1;
  }
  r.top_logprobs = out.logprobs;
}

}  // namespace

void check_prompt_bytes(const std::string& text, const ServingContext& ctx, const char* field) {
  if (text.size() > ctx.max_prompt_bytes)
    bad_field(field, "the prompt text is " + std::to_string(text.size()) + " bytes; a context of " +
                         std::to_string(ctx.context_tokens) + " tokens holds at most " +
                         std::to_string(ctx.max_prompt_bytes) + " bytes with this tokenizer",
              "context_length_exceeded");
}

void check_model_name(const Body& body, const ServingContext& ctx) {
  const auto model = get_string(body, "model");
  if (model && *model != ctx.model_name && *model != "default")
    throw ApiError(404, "model \"" + *model + "\" is not served here (this server runs \"" +
                            ctx.model_name + "\"; \"default\" also works)",
                   "model", "invalid_request_error", "model_not_found");
}

ParsedRequest parse_completion(const Body& body, const ServingContext& ctx) {
  ParsedRequest out;
  out.endpoint = Endpoint::Completion;
  check_model_name(body, ctx);
  out.request.prompt = completion_prompt(body, ctx);
  parse_common(body, ctx, out);
  // A completion's text is never split into reasoning (no template marks a block), so a limit
  // on the block would silently do nothing; -1 (no limit) is harmless and accepted.
  if (parse_reasoning_budget(body).value_or(-1) >= 0)
    bad_field(reasoning_budget_field(body), "applies to chat answers (/v1/chat/completions, /v1/responses)",
              "unsupported_parameter");
  return out;
}

namespace {

// Tools: the parser for the served family, and under tool_choice "required" or a named function
// the grammar of the family's call syntax over the tools' schemas.
void parse_tools(const Body& body, const ServingContext& ctx, ParsedRequest& out) {
  auto tr = parse_tool_request(body);
  if (!tr || tr->choice == ToolRequest::Choice::kNone) return;  // "none": calls are never parsed
  out.tool_parser = tools::make_tool_parser(ctx.tool_family, tr->tools);
  out.parallel_tool_calls = tr->parallel;
  out.shown_ids = ctx.tool_marker_ids;
  if (tr->choice == ToolRequest::Choice::kAuto) return;
  if (out.request.options.constraint)
    bad_field("response_format", "cannot be combined with tool_choice \"required\" or a named function (the answer "
                                 "is constrained to the call syntax)", "invalid_value");
  if (!ctx.tokenizer || !ctx.constraints)
    bad_field("tool_choice", "forced calls need the model's tokenizer.json", "no_tokenizer");
  tools::ToolList chosen;
  for (const auto& t : tr->tools)
    if (tr->choice == ToolRequest::Choice::kRequired || t.name == tr->named) chosen.push_back(t);
  const bool several = tr->choice == ToolRequest::Choice::kRequired && tr->parallel;
  std::string key = std::string(tools::family_name(ctx.tool_family)) + (several ? "+" : "1");
  for (const auto& t : chosen) key += "\n" + t.name + "\n" + t.parameters.dump();
  const bool with_eos = !get_bool(body, "ignore_eos").value_or(false);
  try {
    out.request.options.constraint = ctx.constraints->get_built(
        key, [&] { return tools::tool_call_grammar(ctx.tool_family, chosen, several); }, with_eos);
  } catch (const Error& e) {
    bad_field("tools", e.what(), "invalid_tool_schema");
  }
}

}  // namespace

ParsedRequest parse_chat(const Body& body, const ServingContext& ctx) {
  ParsedRequest out;
  out.endpoint = Endpoint::Chat;
  check_model_name(body, ctx);
  // As transformers' apply_chat_template(tokenize=True): the template writes every special token
  // itself, so encoding adds none.
  const std::string prompt = render_chat_prompt(body, ctx);
  out.request.prompt = encode_text(prompt, ctx, false, "messages");
  parse_common(body, ctx, out);
  const bool from_format = out.request.options.constraint != nullptr;
  parse_tools(body, ctx, out);
  out.reasoning = reasoning_mode(prompt, ctx.tokenizer);
  // A thinking model's answer: the constraint (response_format or a forced call) applies after
  // the reasoning block, which stays free text and goes to reasoning_content (docs/server.md,
  // "Reasoning").
  if (out.request.options.constraint && out.reasoning != ReasoningMode::kOff) {
    const auto inner = out.request.options.constraint;
    const bool opened = out.reasoning == ReasoningMode::kOpened;
    const auto start =
        opened ? constraints::ReasoningStart::kOpened : constraints::ReasoningStart::kOptional;
    const bool with_eos = !get_bool(body, "ignore_eos").value_or(false);
    out.request.options.constraint = ctx.constraints->get_built(
        std::string(opened ? "reasoning-opened\n" : "reasoning-optional\n") + inner->grammar().dump(),
        [&] { return constraints::after_reasoning(inner->grammar(), start); }, with_eos,
        /*shown=*/!from_format);
  }
  // Composes with that constraint: the forced close is text the reasoning grammar allows.
  out.request.options.reasoning_budget = chat_reasoning_budget(body, out.reasoning, ctx);
  return out;
}

}  // namespace lockstep::server
