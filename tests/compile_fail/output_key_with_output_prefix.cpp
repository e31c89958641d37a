// expect: output_key_must_be_a_field_name_without_output_prefix
// A call's output key is the record key, without output_ (Python's output_router_logits=True is
// `.output = {{"router_logits", true}}`): the prefix is one compile error.
#include <tracetorch/output.hpp>

tracetorch::OutputOptions options() { return {.output = {{"output_router_logits", true}}}; }
int main() {}
