// The control mesh's reliable frames across a reconnection (bootstrap/mesh_link.hpp):
// nothing lost, nothing delivered twice, order kept.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bootstrap/mesh_link.hpp"

namespace strata::bootstrap {
namespace {

using Take = MeshLink::Take;

TEST(MeshLink, KeepsFramesUntilAcknowledged) {
  MeshLink a;
  EXPECT_EQ(a.next_seq(), 1u);
  a.keep("one");
  a.keep("two!");
  a.keep("three");
  EXPECT_EQ(a.next_seq(), 4u);
  EXPECT_EQ(a.kept_bytes(), 12u);
  a.acknowledged(2);
  EXPECT_EQ(a.kept_bytes(), 5u);
  a.acknowledged(1);  // late, smaller: changes nothing
  EXPECT_EQ(a.kept_bytes(), 5u);
  a.acknowledged(99);  // more than was sent: all of it
  EXPECT_EQ(a.kept_bytes(), 0u);
  EXPECT_EQ(a.next_seq(), 4u);
}

// A connection breaks after frames 1-3 were written and only 1 arrived; 4 is sent while
// it is down. The peer resumes at 1: 2, 3, 4 go again, in order; a frame that arrived
// twice (written before the break, then resent) is delivered once.
TEST(MeshLink, ResumesWhereThePeerStoppedAndDropsDuplicates) {
  MeshLink sender, receiver;
  std::vector<std::string> delivered;
  auto arrive = [&](std::uint64_t seq, const std::string& f) {
    const Take t = receiver.take(seq);
    if (t == Take::deliver) delivered.push_back(f);
    return t;
  };
  for (const char* f : {"n1", "n2", "n3"}) sender.keep(f);
  EXPECT_EQ(arrive(1, "n1"), Take::deliver);
  sender.keep("n4");
  const auto again = sender.resume(receiver.received());
  ASSERT_EQ(again, (std::vector<std::string>{"n2", "n3", "n4"}));
  EXPECT_EQ(arrive(1, "n1"), Take::duplicate);
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_EQ(arrive(2 + i, again[i]), Take::deliver);
  EXPECT_EQ(delivered, (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(arrive(6, "n6"), Take::gap);  // 5 never came: not deliverable
  EXPECT_EQ(receiver.received(), 4u);
}

}  // namespace
}  // namespace strata::bootstrap
