// The handle a call carries for the compressed allreduce's error feedback. The store
// belongs to quant/, above this layer (quant::ErrorFeedback derives from this); the
// algorithms here only carry it to the entry that needs it.
#pragma once

namespace strata::collectives {

class FeedbackStore {
 public:
  virtual ~FeedbackStore() = default;
};

}  // namespace strata::collectives
