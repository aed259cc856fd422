// The classification task: inputs are standard Gaussian vectors, labels are drawn from the
// softmax of a fixed random "teacher" network (one tanh hidden layer). A student MLP can
// learn it but not perfectly in a few thousand steps, and because labels are sampled
// rather than argmax'd the loss has a known floor (the teacher's own cross-entropy), as
// real data has.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::convergence {

struct TaskSpec {
  int inputs = 128;
  int classes = 10;
  int teacher_hidden = 32;
  double sharpness = 8.0;  // scales the teacher's logits: higher means less label noise
  std::uint64_t train_size = 65536;
  std::uint64_t heldout_size = 4096;
  std::uint64_t seed = 1;
};

class TeacherTask {
 public:
  explicit TeacherTask(const TaskSpec& spec);

  const TaskSpec& spec() const { return spec_; }

  // Example i: indices below train_size are the training set, the next heldout_size the
  // held-out set. Writes spec().inputs floats to x and returns the label.
  int example(std::uint64_t i, float* x) const;

  // The training example at a global position in the stream of batches: each epoch is
  // a fresh permutation of the training set.
  std::uint64_t train_example_at(std::uint64_t position);

  // Mean cross-entropy and accuracy of the teacher's own probabilities on the held-out
  // set: the best any student can expect.
  struct Floor {
    double loss = 0;
    double accuracy = 0;
  };
  Floor bayes_floor() const;

 private:
  // Teacher probabilities of x into p (spec().classes entries).
  void teacher_probabilities(const float* x, double* p) const;

  TaskSpec spec_;
  std::vector<double> w1_, b1_, w2_;  // w1_: teacher_hidden x inputs, w2_: classes x teacher_hidden
  std::uint64_t epoch_ = ~0ull;
  std::vector<std::uint32_t> order_;
};

}  // namespace strata::convergence
