// parse_codec: what it accepts, what it rejects, and that errors name the bad token.

#include <gtest/gtest.h>

#include <string>

#include "quant/codec.hpp"
#include "strata/errors.hpp"

namespace {

namespace q = strata::quant;
using q::Sparsity;
using q::TopkSelect;
using q::ValueCoding;

TEST(QuantSpec, AcceptsTheGrammar) {
  struct Case {
    const char* text;
    Sparsity sparsity;
    ValueCoding values;
    double density;
    TopkSelect select;
    bool stochastic;
  };
  const Case cases[] = {
      {"none", Sparsity::dense, ValueCoding::f32, 1.0, TopkSelect::sampled, false},
      {"fp16", Sparsity::dense, ValueCoding::fp16, 1.0, TopkSelect::sampled, false},
      {"bf16", Sparsity::dense, ValueCoding::bf16, 1.0, TopkSelect::sampled, false},
      {"int8", Sparsity::dense, ValueCoding::int8, 1.0, TopkSelect::sampled, false},
      {"int4,stochastic", Sparsity::dense, ValueCoding::int4, 1.0, TopkSelect::sampled, true},
      {"topk:0.01", Sparsity::topk, ValueCoding::f32, 0.01, TopkSelect::sampled, false},
      {"topk:1", Sparsity::topk, ValueCoding::f32, 1.0, TopkSelect::sampled, false},
      {"topk:1e-3+int8", Sparsity::topk, ValueCoding::int8, 0.001, TopkSelect::sampled, false},
      {"topk:0.01+fp16,exact", Sparsity::topk, ValueCoding::fp16, 0.01, TopkSelect::exact, false},
      {"topk:0.25+int4,stochastic,exact", Sparsity::topk, ValueCoding::int4, 0.25, TopkSelect::exact, true},
      {"topk:0.5+bf16,sampled", Sparsity::topk, ValueCoding::bf16, 0.5, TopkSelect::sampled, false},
  };
  for (const Case& c : cases) {
    const q::CodecSpec s = q::parse_codec(c.text);
    EXPECT_EQ(s.sparsity, c.sparsity) << c.text;
    EXPECT_EQ(s.values, c.values) << c.text;
    EXPECT_EQ(s.density, c.density) << c.text;
    EXPECT_EQ(s.select, c.select) << c.text;
    EXPECT_EQ(s.stochastic, c.stochastic) << c.text;
    EXPECT_EQ(s.block, q::kDefaultBlock) << c.text;
    EXPECT_EQ(q::parse_codec(q::to_string(s)), s) << c.text << " -> " << q::to_string(s);
    EXPECT_NO_THROW(q::make_codec(s)) << c.text;
  }
  EXPECT_EQ(q::to_string(q::parse_codec("topk:0.010+int8,sampled,stochastic")),
            "topk:0.01+int8,stochastic");
}

TEST(QuantSpec, RejectsWithTheBadTokenNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"int3", "'int3'"},
      {"FP16", "'FP16'"},
      {" none", "' none'"},
      {"fp16+int8", "'fp16+int8'"},
      {"topk", "'topk'"},
      {"topk:", "bad density ''"},
      {"topk:0", "bad density '0'"},
      {"topk:1.5", "bad density '1.5'"},
      {"topk:-0.1", "bad density '-0.1'"},
      {"topk:abc", "bad density 'abc'"},
      {"topk:0.1x", "bad density '0.1x'"},
      {"topk:nan", "bad density 'nan'"},
      {"topk:0.01+int2", "'int2'"},
      {"topk:0.01+", "''"},
      {"topk:0.01+f32", "'f32'"},
      {"topk:0.01,fast", "'fast'"},
      {"topk:0.01,", "empty option"},
      {"topk:0.01,exact,sampled", "'sampled'"},
      {"topk:0.01,exact,exact", "'exact'"},
      {"topk:0.01+fp16,stochastic", "'stochastic'"},
      {"int8,stochastic,stochastic", "'stochastic'"},
      {"fp16,stochastic", "'stochastic'"},
      {"int8,exact", "'exact'"},
      {"none,sampled", "'sampled'"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      q::parse_codec(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const strata::InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << "'" << text << "' -> " << msg;
      EXPECT_NE(msg.find(std::string("'") + text + "'"), std::string::npos) << msg;
    }
  }
}

TEST(QuantSpec, ValidateChecksFieldsParseCannotExpress) {
  q::CodecSpec s = q::parse_codec("int8");
  s.block = 0;
  EXPECT_THROW(q::make_codec(s), strata::InvalidArgument);
  s.block = q::kMaxBlock + 1;
  EXPECT_THROW(q::make_codec(s), strata::InvalidArgument);
  s = q::parse_codec("int4");
  s.block = 255;
  EXPECT_THROW(q::make_codec(s), strata::InvalidArgument);
  s.block = 2;
  EXPECT_NO_THROW(q::make_codec(s));
  s = q::parse_codec("fp16");
  s.density = 0.5;
  EXPECT_THROW(q::make_codec(s), strata::InvalidArgument);
  s = q::parse_codec("bf16");
  s.stochastic = true;
  EXPECT_THROW(q::make_codec(s), strata::InvalidArgument);
}

TEST(QuantSpec, TopkCount) {
  EXPECT_EQ(q::topk_count(0.01, 0), 0u);
  EXPECT_EQ(q::topk_count(0.01, 1), 1u);
  EXPECT_EQ(q::topk_count(0.01, 1000), 10u);
  EXPECT_EQ(q::topk_count(0.001, 100), 1u);
  EXPECT_EQ(q::topk_count(1.0, 77), 77u);
}

}  // namespace
