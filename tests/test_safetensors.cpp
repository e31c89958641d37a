// tracetorch/safetensors.hpp: round trips, byte-identical output against the Python reference
// fixtures, and what save refuses. What the reader refuses and accepts: test_safetensors_reader.cpp.

#include "tracetorch/safetensors.hpp"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "safetensors_helpers.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace st = tracetorch::safetensors;

// Inside the helpers' namespace: TempDir, error_of, check_refused, ... are found there first.
namespace tracetorch_test::safetensors_files {

DOCTEST_TEST_SUITE("safetensors") {

DOCTEST_TEST_CASE("every dtype round-trips, with metadata") {
  TempDir dir;
  const auto path = dir / "all.safetensors";
  torch::manual_seed(0);
  const auto floats = torch::randn({3, 4}, torch::kFloat64);
  st::NamedTensors tensors = {
      {"f64", floats},
      {"f32", floats.to(torch::kFloat32)},
      {"f16", floats.to(torch::kFloat16)},
      {"bf16", floats.to(torch::kBFloat16)},
      {"i64", torch::tensor({std::int64_t{-1} << 62, std::int64_t{0}, std::int64_t{7}}, torch::kInt64)},
      {"i32", torch::tensor({-2147483647 - 1, 0, 2147483647}, torch::kInt32)},
      {"i16", torch::tensor({-32768, 5, 32767}, torch::kInt16)},
      {"i8", torch::tensor({-128, 0, 127}, torch::kInt8)},
      {"u8", torch::tensor({0, 128, 255}, torch::kUInt8)},
      {"bool", torch::tensor({true, false, true, true})},
      {"c64", torch::complex(floats.to(torch::kFloat32), -floats.to(torch::kFloat32))},
  };
  st::save(path, tensors, {{"format", "pt"}, {"note", "round trip"}});

  st::Reader reader(path);
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round trip"}};
  DOCTEST_CHECK(reader.header().metadata == metadata);
  DOCTEST_CHECK(reader.header().tensors.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) {
    DOCTEST_INFO(name);
    DOCTEST_CHECK(reader.contains(name));
    DOCTEST_CHECK(std::string(c10::toString(reader.info(name).dtype)) == c10::toString(tensor.scalar_type()));
    DOCTEST_CHECK(same(reader.load(name), tensor));
  }
  const auto all = st::load(path);
  DOCTEST_CHECK(all.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) DOCTEST_CHECK(same(all.at(name), tensor));

  // Sorted keys, data in key order, dtype names as the format spells them.
  const std::string bytes = read_bytes(path);
  DOCTEST_CHECK(bytes.find("{\"bf16\":{\"dtype\":\"BF16\",\"shape\":[3,4],\"data_offsets\":[0,24]},"
                           "\"bool\":{\"dtype\":\"BOOL\",\"shape\":[4],\"data_offsets\":[24,28]},"
                           "\"c64\":{\"dtype\":\"C64\",\"shape\":[3,4],\"data_offsets\":[28,124]}") == 8);
  DOCTEST_CHECK(bytes.find("\"__metadata__\":{\"format\":\"pt\",\"note\":\"round trip\"}}") != std::string::npos);
}

DOCTEST_TEST_CASE("0-d, empty, non-contiguous and expanded tensors round-trip by value") {
  TempDir dir;
  const auto base = torch::arange(24, torch::kFloat32).reshape({2, 3, 4});
  const st::NamedTensors tensors = {
      {"scalar", torch::tensor(3.5)},
      {"empty", torch::empty({0}, torch::kFloat32)},
      {"empty_3d", torch::empty({2, 0, 3}, torch::kInt64)},
      {"empty_bool", torch::empty({0, 5}, torch::kBool)},
      {"transposed", base.transpose(0, 2)},
      {"strided", base.index({torch::indexing::Slice(), torch::indexing::Slice(), torch::indexing::Slice(0, 4, 2)})},
      {"offset", base[1]},
      {"expanded", torch::tensor({1.0f, 2.0f}).expand({3, 2})},
      {"expanded_bool", torch::tensor({true, false}).unsqueeze(1).expand({2, 4})},
      {"conj", torch::complex(base[0], base[1]).conj()},
      {"requires_grad", torch::ones({2}, torch::requires_grad())},
  };
  const auto path = dir / "views.safetensors";
  st::save(path, tensors);
  const auto loaded = st::load(path);
  for (const auto& [name, tensor] : tensors) {
    DOCTEST_INFO(name);
    const auto& got = loaded.at(name);
    DOCTEST_CHECK(got.is_contiguous());
    DOCTEST_CHECK(same(got, tensor.detach().resolve_conj()));
  }
  DOCTEST_CHECK(loaded.at("scalar").dim() == 0);
  DOCTEST_CHECK(loaded.at("empty_3d").sizes() == torch::IntArrayRef({2, 0, 3}));
  st::Reader reader(path);
  DOCTEST_CHECK(reader.info("scalar").shape.empty());
  DOCTEST_CHECK(reader.info("empty_3d").begin == reader.info("empty_3d").end);
  // An expanded view writes its values, not its storage: 6 floats.
  DOCTEST_CHECK(reader.info("expanded").end - reader.info("expanded").begin == 6 * sizeof(float));

  // Single-tensor convenience: key "data".
  const auto single = dir / "single.safetensors";
  st::save(single, base.transpose(1, 2));
  DOCTEST_CHECK(same(st::load_single(single), base.transpose(1, 2)));
  DOCTEST_CHECK(read_bytes(single).substr(8, 8) == "{\"data\":");
}

DOCTEST_TEST_CASE("no tensors: an empty header padded to 8 bytes") {
  TempDir dir;
  const auto path = dir / "empty.safetensors";
  st::save(path, st::NamedTensors{});
  DOCTEST_CHECK(read_bytes(path) == file_bytes("{}      "));
  DOCTEST_CHECK(st::load(path).empty());
  st::save(path, st::NamedTensors{}, {{"format", "pt"}});
  DOCTEST_CHECK(read_bytes(path) == file_bytes("{\"__metadata__\":{\"format\":\"pt\"}}"));
}

DOCTEST_TEST_CASE("output is byte-identical to the Python reference fixtures") {
  TempDir dir;
  std::vector<fs::path> fixtures = {kTinyLlama / "model.safetensors", kTinyLlama / "input_ids.safetensors"};
  for (const auto& entry : fs::directory_iterator(kTinyLlama / "trace_st")) {
    if (entry.path().extension() == ".safetensors") fixtures.push_back(entry.path());
  }
  DOCTEST_REQUIRE(fixtures.size() > 100);
  for (const auto& fixture : fixtures) {
    DOCTEST_INFO(fixture.string());
    st::Reader reader(fixture);
    const auto all = reader.load_all();
    const auto out = dir / "resaved.safetensors";
    st::save(out, {all.begin(), all.end()}, reader.header().metadata);
    DOCTEST_CHECK(read_bytes(out) == read_bytes(fixture));
  }
  // The single-tensor overload, as the debugger uses it.
  const auto out = dir / "norm.safetensors";
  const auto norm_file = kTinyLlama / "trace_st" / "LlamaModel.norm_outputs.safetensors";
  st::save(out, st::load_single(norm_file));
  DOCTEST_CHECK(read_bytes(out) == read_bytes(norm_file));
}

DOCTEST_TEST_CASE("the fixture model loads under transformers' names") {
  st::Reader reader(kTinyLlama / "model.safetensors");
  const auto& header = reader.header();
  DOCTEST_CHECK(header.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  DOCTEST_CHECK(header.data_start == 8 + 3688);
  DOCTEST_CHECK(header.tensors.size() == 2 + 4 * 9);
  for (std::size_t i = 1; i < header.tensors.size(); ++i) {
    DOCTEST_CHECK(header.tensors[i].begin == header.tensors[i - 1].end);  // data-offset order
  }
  const auto weights = st::load(kTinyLlama / "model.safetensors");
  DOCTEST_CHECK(weights.at("embed_tokens.weight").sizes() == torch::IntArrayRef({1000, 64}));
  DOCTEST_CHECK(weights.at("layers.0.self_attn.q_proj.weight").sizes() == torch::IntArrayRef({64, 64}));
  DOCTEST_CHECK(weights.at("layers.3.self_attn.k_proj.weight").sizes() == torch::IntArrayRef({32, 64}));
  DOCTEST_CHECK(weights.at("layers.2.mlp.down_proj.weight").sizes() == torch::IntArrayRef({64, 172}));
  DOCTEST_CHECK(weights.at("norm.weight").sizes() == torch::IntArrayRef({64}));
  DOCTEST_CHECK((weights.at("norm.weight").scalar_type() == torch::kFloat32));
  DOCTEST_CHECK(same(reader.load("norm.weight"), weights.at("norm.weight")));

  const auto ids = st::load_single(kTinyLlama / "input_ids.safetensors", "input_ids");
  DOCTEST_CHECK((ids.scalar_type() == torch::kInt64));
  DOCTEST_CHECK(ids.sizes() == torch::IntArrayRef({2, 7}));
}

DOCTEST_TEST_CASE("names are sorted and escaped as Python's json.dumps does") {
  TempDir dir;
  const auto path = dir / "names.safetensors";
  const std::string name = "a\"b\\c\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80/";  // ... U+00E9 U+1F600 /
  const auto one = torch::ones({1});
  st::save(path, {{"z", torch::ones({2})}, {name, torch::zeros({1})}, {"\xc3\xa9", one}, {"Z", one}},
           {{"k\t", "v\xe2\x82\xac"}});
  // The header the Python reference writer produces for the same tensors: sorted by code
  // point, non-ASCII as \uXXXX (surrogate pairs above U+FFFF), lowercase hex.
  const std::string expected =
      R"({"Z":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00/":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
      R"("z":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("\u00e9":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},"__metadata__":{"k\t":"v\u20ac"}}   )";
  const std::string bytes = read_bytes(path);
  DOCTEST_CHECK(bytes.substr(0, 8 + expected.size()) == u64_le(expected.size()) + expected);
  st::Reader reader(path);
  DOCTEST_CHECK(reader.contains(name));
  DOCTEST_CHECK(reader.contains("\xc3\xa9"));
  DOCTEST_CHECK(reader.header().metadata.at("k\t") == "v\xe2\x82\xac");
}

DOCTEST_TEST_CASE("save refuses what it cannot write, and leaves no file") {
  TempDir dir;
  const auto path = dir / "out.safetensors";
  const auto t = torch::ones({2});
  const auto refused = [&](const st::NamedTensors& tensors, const std::string& cause,
                           const std::map<std::string, std::string>& metadata = {}) {
    const std::string message = error_of([&] { st::save(path, tensors, metadata); });
    DOCTEST_INFO("message: " << message);
    DOCTEST_CHECK(message.find(path.string()) != std::string::npos);
    DOCTEST_CHECK(message.find(cause) != std::string::npos);
    DOCTEST_CHECK(dir.entries() == 0);
  };
  refused({{"a", t}, {"b", t}, {"a", t}}, "two tensors named \"a\"");
  refused({{"__metadata__", t}}, "reserved");
  refused({{"x", torch::Tensor()}}, "tensor \"x\" is undefined");
  refused({{"x", torch::ones({2}, torch::kComplexDouble)}}, "tensor \"x\" has dtype ComplexDouble");
  refused({{"x", torch::eye(3).to_sparse()}}, "tensor \"x\" is not a dense");
  refused({{"x", torch::empty({2}, torch::TensorOptions().device(torch::kMeta))}}, "meta device");
  refused({{"bad\xff", t}}, "is not valid UTF-8");
  refused({{"ok", t}}, "metadata entry \"k\" is not valid UTF-8", {{"k", "\xc0\x80"}});  // overlong NUL

  const std::string missing = error_of([&] { st::save(dir / "no" / "such" / "dir.safetensors", t); });
  DOCTEST_CHECK(missing.find("no/such/dir.safetensors") != std::string::npos);
  DOCTEST_CHECK(missing.find("No such file or directory") != std::string::npos);

  write_bytes(dir / "file", "not a directory");
  const std::string not_dir = error_of([&] { st::save(dir / "file" / "x.safetensors", t); });
  DOCTEST_CHECK(not_dir.find("file/x.safetensors") != std::string::npos);
  DOCTEST_CHECK(not_dir.find("Not a directory") != std::string::npos);
  DOCTEST_CHECK(dir.entries() == 1);

  if (::geteuid() != 0) {  // root writes through permission bits
    const auto locked = dir / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string denied = error_of([&] { st::save(locked / "x.safetensors", t); });
    DOCTEST_CHECK(denied.find("Permission denied") != std::string::npos);
    fs::permissions(locked, fs::perms::owner_all);
    DOCTEST_CHECK(fs::is_empty(locked));
  }

  // A successful save replaces an existing file and leaves no temporary beside it.
  write_bytes(path, "old");
  st::save(path, t);
  DOCTEST_CHECK(same(st::load_single(path), t));
  DOCTEST_CHECK(dir.entries() == 2);
}

}  // DOCTEST_TEST_SUITE

}  // namespace tracetorch_test::safetensors_files
