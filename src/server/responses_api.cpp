#include "server/responses_api.h"

#include <chrono>

#include "server/api_error.h"
#include "server/generation.h"
#include "server/request_parse.h"
#include "server/response_format.h"

namespace lockstep::server {

namespace {

using json = nlohmann::ordered_json;

std::string at(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

// Message content: a string or a list of text parts (input_text, output_text, text), joined.
std::string text_of(const Body& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_field(field, "expected a string or a list of text parts, got " + json_kind(content), "invalid_type");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Body& p = content[j];
    const std::string type = p.is_object() ? p.value("type", std::string()) : "";
    if ((type != "input_text" && type != "output_text" && type != "text") || !p.contains("text") || !p["text"].is_string())
      bad_field(at(field, j), "only input_text / output_text parts with a string text are supported", "invalid_value");
    text += p["text"].get<std::string>();
  }
  return text;
}

const Body& required(const Body& obj, const char* key, const std::string& field) {
  if (!has(obj, key)) bad_field(field + "." + key, "required", "missing_required_parameter");
  return obj.at(key);
}

std::string required_string(const Body& obj, const char* key, const std::string& field) {
  const Body& v = required(obj, key, field);
  if (!v.is_string()) bad_field(field + "." + key, "expected a string, got " + json_kind(v), "invalid_type");
  return v.get<std::string>();
}

Body messages_of(const Body& req) {
  Body messages = Body::array();
  if (has(req, "instructions")) {
    const Body& ins = req.at("instructions");
    if (!ins.is_string()) bad_field("instructions", "expected a string, got " + json_kind(ins), "invalid_type");
    messages.push_back({{"role", "system"}, {"content", ins}});
  }
  const Body& input = required(req, "input", "");
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array()) bad_field("input", "expected a string or a list of items, got " + json_kind(input), "invalid_type");
  for (size_t i = 0; i < input.size(); ++i) {
    const Body& item = input[i];
    const std::string f = at("input", i);
    if (!item.is_object()) bad_field(f, "expected an object, got " + json_kind(item), "invalid_type");
    const std::string type = has(item, "type") ? required_string(item, "type", f) : "message";
    if (type == "message") {
      std::string role = required_string(item, "role", f);
      if (role == "developer") role = "system";
      if (role != "user" && role != "system" && role != "assistant")
        bad_field(f + ".role", "expected user, system, developer or assistant, got \"" + role + "\"", "invalid_value");
      messages.push_back({{"role", role}, {"content", text_of(required(item, "content", f), f + ".content")}});
    } else if (type == "function_call") {
      const json call = {{"id", required_string(item, "call_id", f)},
                         {"type", "function"},
                         {"function", {{"name", required_string(item, "name", f)},
                                       {"arguments", required_string(item, "arguments", f)}}}};
      // Calls of one turn share one assistant message, after any text it said.
      if (messages.empty() || messages.back()["role"] != "assistant") messages.push_back({{"role", "assistant"}, {"content", ""}});
      messages.back()["tool_calls"].push_back(call);
    } else if (type == "function_call_output") {
      const Body& out = required(item, "output", f);
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", required_string(item, "call_id", f)},
                          {"content", text_of(out, f + ".output")}});
    } else {
      bad_field(f + ".type", "unsupported item type \"" + type + "\" (message, function_call or function_call_output)",
                "invalid_value");
    }
  }
  return messages;
}

Body tools_of(const Body& list) {
  if (!list.is_array()) bad_field("tools", "expected an array, got " + json_kind(list), "invalid_type");
  Body out = Body::array();
  for (size_t i = 0; i < list.size(); ++i) {
    const Body& t = list[i];
    const std::string f = at("tools", i);
    if (!t.is_object()) bad_field(f, "expected an object, got " + json_kind(t), "invalid_type");
    const std::string type = required_string(t, "type", f);
    if (type != "function") bad_field(f + ".type", "unsupported tool type \"" + type + "\" (only \"function\")", "invalid_value");
    Body fn = Body::object();
    for (const char* k : {"name", "description", "parameters", "strict"})
      if (t.contains(k)) fn[k] = t.at(k);
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

// The chat error's field in the Responses request's terms.
ApiError renamed(ApiError e) {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"response_format.json_schema.", "text.format."}, {"response_format", "text.format"},
      {"max_tokens", "max_output_tokens"}, {"messages", "input"}, {"tool_choice.function.name", "tool_choice.name"}};
  std::string p = e.param;
  for (const auto& [from, to] : names)
    if (p.rfind(from, 0) == 0) {
      p = to + p.substr(from.size());
      break;
    }
  if (p.rfind("tools[", 0) == 0)
    if (const size_t k = p.find("].function."); k != std::string::npos) p = p.substr(0, k + 1) + "." + p.substr(k + 11);
  if (p == e.param) return e;
  std::string msg = e.what();
  if (msg.rfind(e.param, 0) == 0) msg = p + msg.substr(e.param.size());
  ApiError r(e.status, msg, p, e.type, e.code);
  r.retry_after = e.retry_after;
  return r;
}

}  // namespace

Body chat_request_of(const Body& req) {
  if (has(req, "previous_response_id"))
    bad_field("previous_response_id", "responses are not stored; send the conversation as input items",
              "unsupported_parameter");
  Body chat = Body::object();
  if (has(req, "model")) chat["model"] = req.at("model");
  chat["messages"] = messages_of(req);
  if (has(req, "tools")) {
    chat["tools"] = tools_of(req.at("tools"));
    if (chat["tools"].empty()) chat.erase("tools");
  }
  if (has(req, "tool_choice")) {
    const Body& c = req.at("tool_choice");
    if (c.is_object() && c.value("type", std::string()) == "function") {
      if (!has(c, "name") || !c.at("name").is_string()) bad_field("tool_choice.name", "required (a string)", "missing_required_parameter");
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c.at("name")}}}};
    } else {
      chat["tool_choice"] = c;
    }
  }
  if (has(req, "text")) {
    const Body& t = req.at("text");
    if (!t.is_object()) bad_field("text", "expected an object, got " + json_kind(t), "invalid_type");
    if (has(t, "format")) {
      const Body& f = t.at("format");
      if (!f.is_object()) bad_field("text.format", "expected an object, got " + json_kind(f), "invalid_type");
      if (f.value("type", std::string()) == "json_schema") {
        Body js = Body::object();
        for (const char* k : {"name", "description", "schema", "strict"})
          if (f.contains(k)) js[k] = f.at(k);
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
      } else {
        chat["response_format"] = f;
      }
    }
  }
  if (has(req, "max_output_tokens")) chat["max_tokens"] = req.at("max_output_tokens");
  for (const char* k : {"temperature", "top_p", "top_k", "min_p", "seed", "parallel_tool_calls", "stream", "spec",
                        "draft_width", "logit_bias", "user", "chat_template_kwargs", "reasoning_budget",
                        "thinking_budget_tokens", "thinking_token_budget"})
    if (req.contains(k)) chat[k] = req.at(k);
  // The Response object's usage comes from the chat stream's usage chunk.
  if (chat.value("stream", false)) chat["stream_options"] = {{"include_usage", true}};
  return chat;
}

namespace {

// Builds Response objects and streaming events from chat completion JSON.
class ResponseBuilder {
 public:
  ResponseBuilder(const Body& req, std::string id) : req_(req), id_(std::move(id)) {
    created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  json response(const std::string& status, const json& output, const json& usage) const {
    json r = {{"id", id_}, {"object", "response"}, {"created_at", created_}, {"status", status}, {"error", nullptr}};
    r["incomplete_details"] = status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
    r["instructions"] = req_.value("instructions", json(nullptr));
    r["max_output_tokens"] = req_.value("max_output_tokens", json(nullptr));
    r["model"] = model_;
    r["output"] = output;
    r["parallel_tool_calls"] = req_.value("parallel_tool_calls", true);
    r["temperature"] = req_.value("temperature", 0.0);
    r["tool_choice"] = req_.value("tool_choice", json("auto"));
    r["tools"] = req_.value("tools", json::array());
    r["top_p"] = req_.value("top_p", 1.0);
    r["text"] = req_.contains("text") ? json(req_.at("text")) : json{{"format", {{"type", "text"}}}};
    r["usage"] = usage;
    r["metadata"] = json::object();
    return r;
  }

  static json usage_of(const json& chat_usage) {
    if (!chat_usage.is_object()) return nullptr;
    const int64_t in = chat_usage.value("prompt_tokens", 0), out = chat_usage.value("completion_tokens", 0);
    return {{"input_tokens", in},
            {"input_tokens_details",
             {{"cached_tokens", chat_usage.value("prompt_tokens_details", json::object()).value("cached_tokens", 0)}}},
            {"output_tokens", out},
            {"output_tokens_details",
             {{"reasoning_tokens",
               chat_usage.value("completion_tokens_details", json::object()).value("reasoning_tokens", 0)}}},
            {"total_tokens", in + out}};
  }

  json message_item(const std::string& text, const std::string& status) const {
    return {{"type", "message"}, {"id", "msg_" + suffix_}, {"status", status}, {"role", "assistant"},
            {"content", text.empty() && status != "completed" ? json::array()
                                                              : json::array({text_part(text)})}};
  }
  static json text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
  }
  json call_item(size_t k, const std::string& call_id, const std::string& name, const std::string& args,
                 const std::string& status) const {
    return {{"type", "function_call"}, {"id", "fc_" + suffix_ + "_" + std::to_string(k)}, {"call_id", call_id},
            {"name", name}, {"arguments", args}, {"status", status}};
  }

  // The whole chat completion -> the Response object.
  json from_chat(const json& chat) {
    model_ = chat.value("model", std::string());
    const json& choice = chat["choices"][0];
    const json& msg = choice["message"];
    json output = json::array();
    if (msg.contains("reasoning_content"))
      output.push_back({{"type", "reasoning"}, {"id", "rs_" + suffix_}, {"summary", json::array()},
                        {"content", json::array({{{"type", "reasoning_text"}, {"text", msg["reasoning_content"]}}})}});
    const bool calls = msg.contains("tool_calls");
    if (msg["content"].is_string() && (!calls || !msg["content"].get<std::string>().empty()))
      output.push_back(message_item(msg["content"].get<std::string>(), "completed"));
    if (calls) {
      size_t k = 0;
      for (const auto& c : msg["tool_calls"])
        output.push_back(call_item(k++, c["id"], c["function"]["name"], c["function"]["arguments"], "completed"));
    }
    return response(choice["finish_reason"] == "length" ? "incomplete" : "completed", output, usage_of(chat["usage"]));
  }

  void set_model(std::string m) { model_ = std::move(m); }
  void set_id(std::string id) { id_ = std::move(id); }
  std::string suffix_;

 private:
  const Body& req_;
  std::string id_;
  int64_t created_ = 0;
  std::string model_;
};

std::string new_suffix(const std::string& chat_id) {
  const size_t dash = chat_id.find('-');
  return dash == std::string::npos ? chat_id : chat_id.substr(dash + 1);
}

// A whole chat response re-shaped into a Response object.
class WholeResponses : public PendingResponse {
 public:
  WholeResponses(Body req, std::shared_ptr<PendingResponse> inner) : req_(std::move(req)), inner_(std::move(inner)) {}
  bool streaming() const override { return false; }
  void set_wake(std::function<void()> wake) override { inner_->set_wake(std::move(wake)); }
  void abandon() override { inner_->abandon(); }
  bool poll(std::string& out, HttpResponse& head) override {
    std::string body;
    if (!inner_->poll(body, head)) return false;
    if (head.status != 200) {
      out += body;
      return true;
    }
    const json chat = json::parse(body);
    const std::string suffix = new_suffix(chat.value("id", std::string()));
    ResponseBuilder b(req_, "resp_" + suffix);
    b.suffix_ = suffix;
    out += to_text(b.from_chat(chat));
    return true;
  }

 private:
  Body req_;
  std::shared_ptr<PendingResponse> inner_;
};

// The chat chunk stream re-told as Responses events: response.created, output items opened
// (message text, then each function call), their deltas and their ends, response.completed.
class StreamResponses : public PendingResponse {
 public:
  StreamResponses(Body req, std::shared_ptr<PendingResponse> inner, std::string model)
      : req_(std::move(req)), inner_(std::move(inner)), builder_(req_, "") {
    builder_.set_model(std::move(model));
  }
  bool streaming() const override { return true; }
  void set_wake(std::function<void()> wake) override { inner_->set_wake(std::move(wake)); }
  void abandon() override { inner_->abandon(); }

  bool poll(std::string& out, HttpResponse& head) override {
    std::string chunks;
    const bool done = inner_->poll(chunks, head);
    pending_ += chunks;
    for (size_t end; (end = pending_.find("\n\n")) != std::string::npos;) {
      const std::string event = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string data = event.substr(6);
      if (data == "[DONE]") {
        finish(out);
        continue;
      }
      on_chunk(json::parse(data), out);
    }
    return done;
  }

 private:
  void emit(std::string type, json e, std::string& out) {
    json j = {{"type", type}, {"sequence_number", seq_++}};
    for (auto& [k, v] : e.items()) j[k] = v;
    out += "event: " + type + "\ndata: " + to_text(j) + "\n\n";
  }

  void start(const json& chunk, std::string& out) {
    if (started_) return;
    started_ = true;
    suffix_ = new_suffix(chunk.value("id", std::string()));
    builder_.set_id("resp_" + suffix_);
    builder_.suffix_ = suffix_;
    builder_.set_model(chunk.value("model", std::string()));
    const json r = builder_.response("in_progress", json::array(), nullptr);
    emit("response.created", {{"response", r}}, out);
    emit("response.in_progress", {{"response", r}}, out);
  }

  void close_item(std::string& out) {
    if (open_ == Open::kText) {
      const std::string item_id = "msg_" + suffix_;
      const size_t i = output_.size();
      emit("response.output_text.done", {{"item_id", item_id}, {"output_index", i}, {"content_index", 0}, {"text", text_}}, out);
      emit("response.content_part.done", {{"item_id", item_id}, {"output_index", i}, {"content_index", 0},
                                          {"part", ResponseBuilder::text_part(text_)}}, out);
      output_.push_back(builder_.message_item(text_, "completed"));
      emit("response.output_item.done", {{"output_index", i}, {"item", output_.back()}}, out);
    } else if (open_ == Open::kCall) {
      const size_t i = output_.size();
      const json item = builder_.call_item(calls_, call_id_, call_name_, call_args_, "completed");
      emit("response.function_call_arguments.done", {{"item_id", item["id"]}, {"output_index", i}, {"arguments", call_args_}}, out);
      output_.push_back(item);
      emit("response.output_item.done", {{"output_index", i}, {"item", item}}, out);
      ++calls_;
    }
    open_ = Open::kNone;
  }

  void on_chunk(const json& chunk, std::string& out) {
    if (chunk.contains("error")) {
      const json& e = chunk["error"];
      emit("error", {{"code", e.value("code", json(nullptr))}, {"message", e.value("message", "")},
                     {"param", e.value("param", json(nullptr))}}, out);
      failed_ = true;
      return;
    }
    start(chunk, out);
    if (chunk.contains("usage") && chunk["usage"].is_object()) usage_ = ResponseBuilder::usage_of(chunk["usage"]);
    if (!chunk.contains("choices") || chunk["choices"].empty()) return;
    const json& ch = chunk["choices"][0];
    if (ch["finish_reason"].is_string()) finish_reason_ = ch["finish_reason"];
    const json& d = ch["delta"];
    if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty()) {
      if (open_ != Open::kText) {
        close_item(out);
        open_ = Open::kText;
        text_.clear();
        const size_t i = output_.size();
        emit("response.output_item.added", {{"output_index", i}, {"item", builder_.message_item("", "in_progress")}}, out);
        emit("response.content_part.added", {{"item_id", "msg_" + suffix_}, {"output_index", i}, {"content_index", 0},
                                             {"part", ResponseBuilder::text_part("")}}, out);
      }
      const std::string delta = d["content"];
      text_ += delta;
      emit("response.output_text.delta", {{"item_id", "msg_" + suffix_}, {"output_index", output_.size()},
                                          {"content_index", 0}, {"delta", delta}}, out);
    }
    for (const auto& t : d.value("tool_calls", json::array())) {
      if (t.contains("id")) {  // a call's first fragment
        close_item(out);
        open_ = Open::kCall;
        call_id_ = t["id"];
        call_name_ = t["function"]["name"];
        call_args_.clear();
        emit("response.output_item.added", {{"output_index", output_.size()},
                                            {"item", builder_.call_item(calls_, call_id_, call_name_, "", "in_progress")}}, out);
      }
      const std::string args = t.contains("function") ? t["function"].value("arguments", std::string()) : "";
      if (!args.empty()) {
        call_args_ += args;
        emit("response.function_call_arguments.delta", {{"item_id", "fc_" + suffix_ + "_" + std::to_string(calls_)},
                                                        {"output_index", output_.size()}, {"delta", args}}, out);
      }
    }
  }

  void finish(std::string& out) {
    if (failed_ || !started_) return;
    close_item(out);
    const std::string status = finish_reason_ == "length" ? "incomplete" : "completed";
    emit(status == "completed" ? "response.completed" : "response.incomplete",
         {{"response", builder_.response(status, output_, usage_)}}, out);
  }

  enum class Open { kNone, kText, kCall };
  Body req_;
  std::shared_ptr<PendingResponse> inner_;
  ResponseBuilder builder_;
  std::string pending_, suffix_, text_, call_id_, call_name_, call_args_, finish_reason_;
  json output_ = json::array(), usage_ = nullptr;
  Open open_ = Open::kNone;
  size_t calls_ = 0;
  int64_t seq_ = 0;
  bool started_ = false, failed_ = false;
};

}  // namespace

Reply responses_reply(const Body& body, const ServingContext& ctx, HttpStats& stats) {
  ParsedRequest p;
  try {
    p = parse_chat(chat_request_of(body), ctx);
  } catch (const ApiError& e) {
    throw renamed(e);
  }
  p.n = 1;
  ++stats.chat_completions;
  Reply reply;
  if (p.stream) {
    reply.response = stream_head();
    reply.pending = std::make_shared<StreamResponses>(body, stream_response(p, ctx, stats), ctx.model_name);
  } else {
    reply.pending = std::make_shared<WholeResponses>(body, whole_response(p, ctx, stats));
  }
  return reply;
}

}  // namespace lockstep::server
