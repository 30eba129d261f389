// Token masks: equal to a token-by-token check on every prefix of random constrained walks,
// identical for identical prefixes whatever was cached before, restored exactly by rollback.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "constraints/constraint.h"
#include "core/error.h"

namespace lockstep::constraints {
namespace {

constexpr int32_t kEos = 0;

// A vocabulary with the traits of real ones: every single byte, then multi-byte pieces of JSON
// syntax, words with leading spaces and quotes, digits, and UTF-8 fragments that end mid-character.
std::shared_ptr<const TokenVocabulary> make_vocab() {
  std::vector<std::string> t{""};  // id 0: EOS (no bytes)
  for (int b = 1; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\",", "\"}", "\"]", "},", "}}", "]}", "[{", "[\"", "\":\"", "\":[",
                        "\":{", "true", "false", "null", ",\"", "\\n", "\\\"", "\\u00", "name", "age",
                        "\"name", "\"age\":", " the", " a", "ab", "abc", "12", "123", "-1", "0.", ".5",
                        "e+", "1e5", "é", "\xc3", "\xe2\x82", "\xac\"", "日本", "  ", "\n", "2024-",
                        "-01", "-29", "T12:", "00:00Z", "\":1", "1}", "\"x", "\"y\"", "aaaa", "yes",
                        "no", "\"b", "\"a\":", "\"c\":[", "2,", ",3", "]]", "[[", "<|im_end|>"})
    t.push_back(s);
  t.push_back("");  // a special token without text: never allowed
  return std::make_shared<TokenVocabulary>(t, std::vector<int32_t>{kEos});
}

// The mask by definition: each token checked alone from the prefix's bytes.
TokenMask brute_mask(const Grammar& g, const TokenVocabulary& vocab, const std::string& prefix) {
  TokenMask m(vocab.size());
  Matcher matcher(g);
  const auto at = matcher.advance(matcher.start(), prefix);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.is_eos(id)) {
      if (matcher.accepting(at)) m.set(id);
    } else if (!vocab.bytes(id).empty() && matcher.advance(at, vocab.bytes(id)) != Matcher::kDead) {
      m.set(id);
    }
  }
  return m;
}

struct Case {
  const char* name;
  ConstraintSpec spec;
};

std::vector<Case> cases() {
  return {
      {"schema", ConstraintSpec::json_schema(R"({"type":"object","properties":{
          "name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":-5,"maximum":120},
          "tags":{"type":"array","items":{"enum":["a","b","日本"]},"maxItems":3},
          "when":{"type":"string","format":"date"}},"required":["name"],"additionalProperties":false})")},
      {"json_value", ConstraintSpec::json_value()},
      {"json_ws", ConstraintSpec::json_object(JsonSchemaOptions{2})},
      {"gbnf", ConstraintSpec::gbnf("root ::= item (\",\" item)*\nitem ::= \"[\" root? \"]\" | [a-c]+ | \"yes\" | \"no\"")},
      {"regex", ConstraintSpec::regex("(ab|[0-9]{2,4}-)+(é|日本)?")},
  };
}

TEST(TokenMask, EqualsTheTokenByTokenCheckOnRandomWalks) {
  auto vocab = make_vocab();
  // Depth 1 leaves most tokens uncertain (checked on the full stack); the default few.
  for (int depth : {1, ContextMaskCache::kDefaultDepth})
  for (const Case& c : cases()) {
    auto constraint = Constraint::from_grammar(compile_grammar(c.spec), vocab, depth);
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      std::mt19937 rng(seed);
      ConstraintState st = constraint->start();
      std::string text;
      TokenMask mask;
      for (int step = 0; step < 40; ++step) {
        st.allowed(mask);
        ASSERT_EQ(mask, brute_mask(constraint->grammar(), *vocab, text))
            << c.name << " depth " << depth << " seed " << seed << " after '" << text << "'";
        ASSERT_GT(mask.count(), 0) << c.name << ": a live state allows something";
        EXPECT_EQ(mask.test(kEos), st.can_end());
        // Pick an allowed token; prefer continuing over ending so walks get long.
        std::vector<int32_t> ids;
        for (int32_t id = 0; id < vocab->size(); ++id)
          if (mask.test(id) && id != kEos) ids.push_back(id);
        if (ids.empty()) break;
        const int32_t pick = ids[rng() % ids.size()];
        // A forbidden token is refused and changes nothing.
        for (int32_t id = 1; id < vocab->size(); ++id) {
          if (mask.test(id)) continue;
          EXPECT_FALSE(st.accept(id)) << c.name << ": token " << id << " outside the mask accepted";
          break;
        }
        ASSERT_TRUE(st.accept(pick));
        text += vocab->bytes(pick);
      }
    }
  }
}

TEST(TokenMask, SamePrefixSameMaskWhateverWasCachedBefore) {
  auto vocab = make_vocab();
  auto constraint = Constraint::compile(cases()[0].spec, vocab);
  // A walk through one path warms the shared context cache and this state's arena...
  ConstraintState warm = constraint->start();
  for (const char* piece : {"{\"", "name", "\":\"", "ab", "\",", "\"age\":", "12", "}"}) {
    const auto id = [&] {
      for (int32_t i = 0; i < vocab->size(); ++i)
        if (vocab->bytes(i) == piece) return i;
      return -1;
    }();
    ASSERT_TRUE(warm.accept(id)) << piece;
  }
  ASSERT_TRUE(warm.can_end());
  // ...then the same prefix, rolled back to and replayed fresh, gives the same masks.
  ConstraintState fresh = constraint->start();
  TokenMask a, b;
  warm.rollback(warm.size());
  for (int i = 0; i < 6; ++i) {
    warm.allowed(a);
    fresh.allowed(b);
    ASSERT_EQ(a, b);
    int32_t pick = -1;
    for (int32_t id = vocab->size() - 1; id >= 0 && pick < 0; --id)
      if (a.test(id) && id != kEos) pick = id;
    ASSERT_TRUE(warm.accept(pick));
    ASSERT_TRUE(fresh.accept(pick));
  }
}

TEST(TokenMask, RollbackRestoresEveryEarlierMaskAndCloneIsIndependent) {
  auto vocab = make_vocab();
  auto constraint = Constraint::compile(cases()[3].spec, vocab);
  ConstraintState st = constraint->start();
  std::vector<TokenMask> masks;
  std::mt19937 rng(7);
  for (int step = 0; step < 25; ++step) {
    masks.emplace_back();
    st.allowed(masks.back());
    std::vector<int32_t> ids;
    for (int32_t id = 1; id < vocab->size(); ++id)
      if (masks.back().test(id)) ids.push_back(id);
    ASSERT_TRUE(st.accept(ids[rng() % ids.size()]));
  }
  ConstraintState copy = st.clone();
  TokenMask m;
  for (size_t back = 1; back <= masks.size(); back += 3) {
    ConstraintState s = copy.clone();
    s.rollback(back);
    s.allowed(m);
    EXPECT_EQ(m, masks[masks.size() - back]) << "rolled back " << back;
  }
  st.rollback(st.size());
  st.allowed(m);
  EXPECT_EQ(m, masks[0]);
  EXPECT_EQ(copy.size(), 25u);  // the clone kept its own history
  EXPECT_THROW(st.rollback(1), Error);
}

TEST(TokenMask, EosEndsTheSequenceAndSpecialTokensAreNeverAllowed) {
  auto vocab = make_vocab();
  auto constraint = Constraint::compile(ConstraintSpec::regex("yes|no"), vocab);
  ConstraintState st = constraint->start();
  TokenMask m;
  st.allowed(m);
  EXPECT_FALSE(m.test(kEos));
  EXPECT_FALSE(m.test(vocab->size() - 1));  // the text-less special token
  EXPECT_FALSE(st.accept(kEos));
  int32_t yes = -1;
  for (int32_t i = 0; i < vocab->size(); ++i)
    if (vocab->bytes(i) == "yes") yes = i;
  ASSERT_TRUE(st.accept(yes));
  EXPECT_TRUE(st.can_end());
  EXPECT_TRUE(st.finished());  // nothing can follow "yes"
  st.allowed(m);
  EXPECT_EQ(m.count(), 1);
  EXPECT_TRUE(m.test(kEos));
  ASSERT_TRUE(st.accept(kEos));
  st.allowed(m);
  EXPECT_EQ(m.count(), 0);
  EXPECT_FALSE(st.accept(yes));
  st.rollback(1);  // undoing EOS reopens the state
  EXPECT_TRUE(st.can_end());
}

TEST(TokenMask, ApplyMaskSetsDisallowedAndPaddedLogitsToMinusInfinity) {
  TokenMask m(5);
  m.set(1);
  m.set(3);
  std::vector<float> logits{1, 2, 3, 4, 5, 6, 7};  // a model row padded past the vocabulary
  apply_mask(logits, m);
  EXPECT_EQ(logits[1], 2);
  EXPECT_EQ(logits[3], 4);
  for (size_t i : {0u, 2u, 4u, 5u, 6u}) EXPECT_TRUE(std::isinf(logits[i]) && logits[i] < 0) << i;
}

TEST(TokenVocabularyTrie, SubtreesAreContiguousRangesOfSortedIds) {
  auto vocab = make_vocab();
  const auto& nodes = vocab->nodes();
  const auto ids = vocab->sorted_ids();
  EXPECT_EQ(nodes[0].end - nodes[0].begin, ids.size());
  EXPECT_EQ(ids.size(), static_cast<size_t>(vocab->size() - 2));  // EOS and the special token left out
  // Walking the trie along a token's bytes reaches a node owning it.
  for (int32_t id : ids) {
    uint32_t node = 0;
    for (unsigned char c : vocab->bytes(id)) {
      uint32_t next = 0;
      for (uint32_t k = nodes[node].first_child; k < nodes[node].first_child + nodes[node].child_count; ++k)
        if (nodes[k].byte == c) next = k;
      ASSERT_NE(next, 0u);
      node = next;
    }
    bool owned = false;
    for (uint32_t i = nodes[node].begin; i < nodes[node].own_end; ++i) owned = owned || ids[i] == id;
    EXPECT_TRUE(owned) << id;
  }
}

}  // namespace
}  // namespace lockstep::constraints
