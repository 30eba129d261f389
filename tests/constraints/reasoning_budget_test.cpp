// The reasoning budget over a small hand-made vocabulary: free tokens until the budget is spent
// inside the block, then exactly the forced close, then free again; a block the model closes
// itself, an answer without a block, tags split across tokens or inside one token; and the state
// after any rollback equal to a fresh replay of the same prefix (what speculation relies on).
#include "constraints/reasoning_budget.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace lockstep::constraints {
namespace {

using Phase = ReasoningBudgetState::Phase;

enum : int32_t {
  kOpen, kClose, kNl, kNlNl, kA, kB, kSlashLt, kThinkGt, kSpace, kSpecial, kCloseInside, kLt,
  kOpenThenText, kTh, kInkGt, kEos, kCount
};

std::shared_ptr<const TokenVocabulary> vocab() {
  std::vector<std::string> bytes(kCount);
  bytes[kOpen] = "<think>";
  bytes[kClose] = "</think>";
  bytes[kNl] = "\n";
  bytes[kNlNl] = "\n\n";
  bytes[kA] = "a";
  bytes[kB] = "b ";
  bytes[kSlashLt] = "</";
  bytes[kThinkGt] = "think>";
  bytes[kSpace] = " ";
  bytes[kSpecial] = "";  // a special token: no bytes
  bytes[kCloseInside] = "x</think>y";
  bytes[kLt] = "<";
  bytes[kOpenThenText] = "<think>hi";
  bytes[kTh] = "<th";
  bytes[kInkGt] = "ink>";
  bytes[kEos] = "";
  return std::make_shared<TokenVocabulary>(std::move(bytes), std::vector<int32_t>{kEos});
}

const std::vector<int32_t> kForced = {kNl, kClose, kNlNl};

std::shared_ptr<const ReasoningBudget> budget(int64_t n, ReasoningStart start) {
  ReasoningBudgetSpec spec;
  spec.budget = n;
  spec.start = start;
  spec.close = kForced;
  return ReasoningBudget::make(spec, vocab());
}

ReasoningBudgetState replay(const ReasoningBudget& b, const std::vector<int32_t>& tokens) {
  ReasoningBudgetState s = b.start();
  for (int32_t t : tokens) s.accept(t);
  return s;
}

TEST(ReasoningBudget, OpenedBlockIsFreeUntilSpentThenForcesTheCloseThenIsFreeAgain) {
  const auto b = budget(3, ReasoningStart::kOpened);
  ReasoningBudgetState s = b->start();
  for (int32_t t : {kA, kB, kA}) {
    EXPECT_EQ(s.forced(), -1);
    EXPECT_EQ(s.phase(), Phase::kInBlock);
    s.accept(t);
  }
  EXPECT_EQ(s.spent(), 3);
  for (int32_t want : kForced) {
    EXPECT_EQ(s.phase(), Phase::kForcing);
    ASSERT_EQ(s.forced(), want);
    s.accept(want);
  }
  EXPECT_EQ(s.phase(), Phase::kDone);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(s.forced(), -1);
    s.accept(kA);
  }
  EXPECT_EQ(s.spent(), 3);
}

TEST(ReasoningBudget, ZeroClosesAnOpenedBlockAtOnce) {
  const auto b = budget(0, ReasoningStart::kOpened);
  ReasoningBudgetState s = b->start();
  EXPECT_EQ(s.phase(), Phase::kForcing);
  EXPECT_EQ(s.forced(), kNl);
  // Optional start: forced right after the token that opens the block.
  const auto o = budget(0, ReasoningStart::kOptional);
  ReasoningBudgetState t = o->start();
  EXPECT_EQ(t.forced(), -1);
  t.accept(kOpen);
  EXPECT_EQ(t.forced(), kNl);
}

TEST(ReasoningBudget, ABlockClosedWithinTheBudgetIsNeverForced) {
  const auto b = budget(4, ReasoningStart::kOpened);
  // The close spelled in two tokens after a near miss ("<", then "</").
  ReasoningBudgetState s = replay(*b, {kLt, kSlashLt, kThinkGt});
  EXPECT_EQ(s.phase(), Phase::kDone);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(s.forced(), -1);
    s.accept(kB);
  }
  // The close inside one token's bytes.
  EXPECT_EQ(replay(*b, {kA, kCloseInside}).phase(), Phase::kDone);
  // The token that spends the budget closes the block itself: nothing to force.
  EXPECT_EQ(replay(*b, {kA, kA, kA, kClose}).phase(), Phase::kDone);
  // A near miss is reasoning text and counts.
  const ReasoningBudgetState near = replay(*b, {kSlashLt, kA, kThinkGt});
  EXPECT_EQ(near.phase(), Phase::kInBlock);
  EXPECT_EQ(near.spent(), 3);
}

TEST(ReasoningBudget, OptionalBlockOpensAfterWhitespaceOrNotAtAll) {
  const auto b = budget(2, ReasoningStart::kOptional);
  ReasoningBudgetState s = replay(*b, {kNl, kSpace, kSpecial, kOpen});
  EXPECT_EQ(s.phase(), Phase::kInBlock);
  EXPECT_EQ(s.spent(), 0);  // the opening token is not counted
  s.accept(kSpecial);       // inside the block, a token without bytes still counts
  s.accept(kA);
  EXPECT_EQ(s.forced(), kNl);
  // The open tag split across tokens, or followed by text in its own token.
  EXPECT_EQ(replay(*b, {kTh, kInkGt}).phase(), Phase::kInBlock);
  const ReasoningBudgetState t = replay(*b, {kOpenThenText, kA});
  EXPECT_EQ(t.spent(), 1);
  EXPECT_EQ(t.forced(), -1);
  // An answer that does not open with the tag never has a budget, even if the tag comes later.
  ReasoningBudgetState none = replay(*b, {kA, kOpen});
  EXPECT_EQ(none.phase(), Phase::kDone);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(none.forced(), -1);
    none.accept(kA);
  }
  EXPECT_EQ(replay(*b, {kTh, kA}).phase(), Phase::kDone);
  EXPECT_EQ(replay(*b, {kSpace, kA, kOpen}).phase(), Phase::kDone);
}

TEST(ReasoningBudget, AnotherTokenWhileForcingEndsTheBudget) {
  // Only where a grammar refused the close (the decoder lets the grammar win).
  const auto b = budget(1, ReasoningStart::kOpened);
  ReasoningBudgetState s = replay(*b, {kA, kNl});
  EXPECT_EQ(s.forced(), kClose);
  s.accept(kA);
  EXPECT_EQ(s.phase(), Phase::kDone);
  EXPECT_EQ(s.forced(), -1);
}

TEST(ReasoningBudget, RollbackEqualsAFreshReplayOfThePrefix) {
  std::mt19937 rng(7);
  for (ReasoningStart start : {ReasoningStart::kOpened, ReasoningStart::kOptional})
    for (int64_t n : {0, 1, 2, 5}) {
      const auto b = budget(n, start);
      for (int trial = 0; trial < 200; ++trial) {
        // Follow the forced token most of the time, so runs pass through every phase.
        std::vector<int32_t> tokens;
        ReasoningBudgetState s = b->start();
        const size_t len = rng() % 14;
        for (size_t i = 0; i < len; ++i) {
          int32_t t = static_cast<int32_t>(rng() % kCount);
          if (s.forced() >= 0 && rng() % 4 != 0) t = s.forced();
          if (start == ReasoningStart::kOptional && i == 0 && rng() % 2) t = kOpen;
          s.accept(t);
          tokens.push_back(t);
        }
        const size_t k = tokens.empty() ? 0 : rng() % (tokens.size() + 1);
        s.rollback(k);
        tokens.resize(tokens.size() - k);
        const ReasoningBudgetState fresh = replay(*b, tokens);
        ASSERT_EQ(s.size(), tokens.size());
        EXPECT_EQ(s.phase(), fresh.phase());
        EXPECT_EQ(s.forced(), fresh.forced());
        EXPECT_EQ(s.spent(), fresh.spent());
        EXPECT_LE(s.spent(), n) << "the block never holds more than the budget";
      }
    }
}

TEST(ReasoningBudget, BadSpecsAreRefused) {
  ReasoningBudgetSpec spec;
  spec.close = kForced;
  spec.budget = -1;
  EXPECT_THROW(ReasoningBudget::make(spec, vocab()), Error);
  spec.budget = 3;
  spec.close = {};
  EXPECT_THROW(ReasoningBudget::make(spec, vocab()), Error);
  spec.close = {kNl, kCount};
  EXPECT_THROW(ReasoningBudget::make(spec, vocab()), Error);
  spec.close = kForced;
  ReasoningBudgetState s = ReasoningBudget::make(spec, vocab())->start();
  EXPECT_THROW(s.rollback(1), Error);
}

}  // namespace
}  // namespace lockstep::constraints
