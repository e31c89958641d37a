// Keywords listed out of declaration order would be recorded out of the call's order: one error.
// expect: TRACETORCH_KEYWORDS\(SwappedKeywords, \.\.\.\) must list the fields in declaration order
// max-errors: 1
#include <tracetorch/keywords.hpp>

#include <string>

namespace kworder {
struct SwappedKeywords {
  tracetorch::Keyword<std::string> attention_mask;
  tracetorch::Keyword<bool> use_cache;
};
TRACETORCH_KEYWORDS(SwappedKeywords, use_cache, attention_mask);
}  // namespace kworder
