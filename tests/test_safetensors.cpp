// tracetorch/safetensors.hpp: round trips, byte-identical output against the Python reference
// fixtures, and a refusal (tracetorch::Error naming the file and the cause) for each kind of
// malformed file.

#include "tracetorch/safetensors.hpp"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace st = tracetorch::safetensors;

namespace {

const fs::path kData = TRACETORCH_TEST_DATA;
const fs::path kTinyLlama = kData / "tiny_llama";

/// A fresh directory under the system temp dir, removed with everything in it on scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tracetorch_safetensors_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path_), {})); }

 private:
  fs::path path_;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(value >> (8 * i));
  return out;
}

/// A file: length prefix, `header` verbatim (no padding), then `data`.
std::string file_bytes(const std::string& header, const std::string& data = {}) {
  return u64_le(header.size()) + header + data;
}

/// The message of the tracetorch::Error `f` throws, or "" (and a failed check) if it throws none.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tracetorch::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    DOCTEST_FAIL_CHECK("threw a non-tracetorch exception: " << e.what());
    return {};
  }
  DOCTEST_FAIL_CHECK("did not throw");
  return {};
}

/// Writes `bytes` to a file, opens it with Reader, and checks the refusal names the file and `cause`.
void check_refused(const TempDir& dir, const std::string& bytes, const std::string& cause) {
  const auto path = dir / "bad.safetensors";
  write_bytes(path, bytes);
  const std::string message = error_of([&] { st::Reader reader(path); });
  DOCTEST_INFO("message: " << message);
  DOCTEST_CHECK(message.rfind("tracetorch: " + path.string() + ": ", 0) == 0);
  DOCTEST_CHECK(message.find(cause) != std::string::npos);
  // The pure parser agrees with the Reader.
  const std::string pure = error_of([&] {
    st::parse_header({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, bytes.size(), "mem");
  });
  DOCTEST_CHECK(pure.find(cause) != std::string::npos);
}

/// A header holding one F32 [2, 3] tensor "x" with the given entry fields, plus its 24 data bytes.
std::string one_entry(const std::string& fields, const std::string& data = std::string(24, '\0')) {
  return file_bytes("{\"x\":{" + fields + "}}", data);
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && torch::equal(a.cpu(), b.cpu());
}

}  // namespace

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

DOCTEST_TEST_CASE("the reader refuses malformed files, naming the file and the cause") {
  TempDir dir;
  const std::string f32 = R"("dtype":"F32","shape":[2,3],"data_offsets":[0,24])";
  // The well-formed baseline, so each refusal below is due to its one change.
  write_bytes(dir / "good.safetensors", one_entry(f32));
  DOCTEST_CHECK(st::Reader(dir / "good.safetensors").header().tensors.size() == 1);

  DOCTEST_SUBCASE("file too short for the length") {
    check_refused(dir, "", "file is 0 bytes, too short for the 8-byte header length");
    check_refused(dir, std::string("\x02\0\0\0\0\0\0", 7), "file is 7 bytes, too short");
  }
  DOCTEST_SUBCASE("header length") {
    check_refused(dir, u64_le(100'000'001) + "{}", "header length 100000001 exceeds the limit of 100000000 bytes");
    check_refused(dir, u64_le(~std::uint64_t{0}) + "{}", "exceeds the limit");
    check_refused(dir, u64_le(9) + "{}      ", "header length 9 runs past the end of the file (16 bytes)");
  }
  DOCTEST_SUBCASE("header not JSON, or not an object") {
    check_refused(dir, file_bytes("{\"x\":"), "header is not valid JSON");
    check_refused(dir, file_bytes("{} x"), "header is not valid JSON");
    check_refused(dir, file_bytes("{\"a\xff\":1}"), "header is not valid JSON");  // invalid UTF-8
    check_refused(dir, file_bytes(std::string(100, '[') + std::string(100, ']')), "header is not valid JSON");
    check_refused(dir, file_bytes("[1,2]   "), "header is [1,2], not a JSON object");
    check_refused(dir, file_bytes("\"text\"  "), "not a JSON object");
  }
  DOCTEST_SUBCASE("duplicate keys") {
    check_refused(dir, file_bytes("{\"x\":{" + f32 + "},\"x\":{" + f32 + "}}", std::string(24, '\0')),
                  "header has duplicate key \"x\"");
    check_refused(dir, one_entry(f32 + ",\"dtype\":\"F32\""), "header has duplicate key \"dtype\"");
    check_refused(dir, file_bytes(R"({"__metadata__":{"a":"1","a":"2"}})"), "header has duplicate key \"a\"");
    // Keys split into parts by escapes are compared whole.
    check_refused(dir, file_bytes(R"({"__metadata__":{"ab":"1","a\u0062":"2"}})"), "duplicate key \"ab\"");
  }
  DOCTEST_SUBCASE("entry not an object, fields missing or mistyped") {
    check_refused(dir, file_bytes(R"({"x":3})"), "tensor \"x\": entry is 3, not an object");
    check_refused(dir, one_entry(R"("shape":[2,3],"data_offsets":[0,24])"), "tensor \"x\": entry has no \"dtype\"");
    check_refused(dir, one_entry(R"("dtype":"F32","data_offsets":[0,24])"), "tensor \"x\": entry has no \"shape\"");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3])"), "tensor \"x\": entry has no \"data_offsets\"");
    check_refused(dir, one_entry(R"("dtype":4,"shape":[2,3],"data_offsets":[0,24])"), "\"dtype\" is 4, not a string");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":6,"data_offsets":[0,24])"), "\"shape\" is 6, not an array");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":{"0":24})"),
                  "\"data_offsets\" is {\"0\":24}, not [begin, end]");
  }
  DOCTEST_SUBCASE("unknown dtype") {
    check_refused(dir, one_entry(R"("dtype":"F99","shape":[2,3],"data_offsets":[0,24])"), "unknown dtype \"F99\"");
    check_refused(dir, one_entry(R"("dtype":"f32","shape":[2,3],"data_offsets":[0,24])"), "unknown dtype \"f32\"");
    check_refused(dir, one_entry(R"("dtype":"U16","shape":[2,3],"data_offsets":[0,12])"),
                  "dtype U16 has no LibTorch equivalent");
  }
  DOCTEST_SUBCASE("bad shape dims") {
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,-3],"data_offsets":[0,24])"),
                  "tensor \"x\": shape[1] is -3, not a non-negative integer");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2.0,3],"data_offsets":[0,24])"),
                  "shape[0] is 2E0, not a non-negative integer");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,"3"],"data_offsets":[0,24])"), "shape[1] is \"3\"");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,null],"data_offsets":[0,24])"), "shape[1] is null");
    // Past uint64: Boost.JSON reads it as a double.
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,18446744073709551616],"data_offsets":[0,24])"),
                  "shape[1] is 1.8446744073709552E19, not a non-negative integer");
  }
  DOCTEST_SUBCASE("shape products that overflow") {
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,24])"),
                  "tensor \"x\": shape [4294967296, 4294967296] has too many elements");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,24])"),
                  "shape [18446744073709551615] has too many elements");
    check_refused(dir, one_entry(R"("dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,24])"),
                  "has too many elements");  // 2^61 elements fit, 2^64 bytes do not
    // A zero dim makes no elements, but LibTorch's strides still multiply the others.
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0])", ""),
                  "has too many elements");
  }
  DOCTEST_SUBCASE("data_offsets not [begin, end] of integers, begin <= end") {
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0])"),
                  "\"data_offsets\" is [0], not [begin, end]");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,12,24])"), "not [begin, end]");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[-1,24])"),
                  "data_offsets[0] is -1, not a non-negative integer");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,2.4e1])"),
                  "data_offsets[1] is 2.4E1, not a non-negative integer");
    check_refused(dir, one_entry(R"("dtype":"F32","shape":[0],"data_offsets":[24,0])"),
                  "data_offsets [24, 0] end before they begin");
  }
  DOCTEST_SUBCASE("byte size != product(shape) * element size") {
    const auto path = dir / "model.safetensors";
    write_bytes(path, one_entry(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,12])", std::string(12, '\0')));
    DOCTEST_CHECK(error_of([&] { st::Reader reader(path); }) ==
                  "tracetorch: " + path.string() +
                      ": tensor \"x\": data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs 24");
    check_refused(dir, one_entry(R"("dtype":"BF16","shape":[],"data_offsets":[0,4])", "1234"),
                  "data_offsets [0, 4] hold 4 bytes but shape [] of BF16 needs 2");
  }
  DOCTEST_SUBCASE("offsets not contiguous from 0") {
    const std::string a = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]})";
    check_refused(dir, file_bytes(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", std::string(8, 'd')),
                  "tensor \"x\": data_offsets [4, 8] leave bytes 0..4 unused");
    check_refused(dir,
                  file_bytes(a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})", std::string(10, 'd')),
                  "tensor \"b\": data_offsets [6, 10] leave bytes 4..6 unused");
    check_refused(dir,
                  file_bytes(a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", std::string(8, 'd')),
                  "tensor \"b\": data_offsets [2, 6] overlap tensor \"a\", which ends at 4");
    check_refused(dir,
                  file_bytes(a + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", std::string(8, 'd')),
                  "overlap tensor");
  }
  DOCTEST_SUBCASE("end beyond the data") {
    check_refused(dir, one_entry(f32, std::string(20, '\0')),
                  "tensor \"x\": data_offsets [0, 24] run past the end of the data (20 bytes)");
  }
  DOCTEST_SUBCASE("trailing bytes after the last tensor") {
    check_refused(dir, one_entry(f32, std::string(25, '\0')),
                  "1 trailing bytes after the last tensor (data is 25 bytes, tensors end at 24)");
    check_refused(dir, file_bytes("{}", "x"), "1 trailing bytes");
  }
  DOCTEST_SUBCASE("bad __metadata__") {
    check_refused(dir, file_bytes(R"({"__metadata__":[1]})"), "\"__metadata__\" is [1], not an object of strings");
    check_refused(dir, file_bytes(R"({"__metadata__":"pt"})"), "\"__metadata__\" is \"pt\", not an object of strings");
    check_refused(dir, file_bytes(R"({"__metadata__":{"format":1}})"),
                  "\"__metadata__\" value for \"format\" is 1, not a string");
  }
}

DOCTEST_TEST_CASE("what the reference loader accepts, the reader accepts") {
  TempDir dir;
  const auto path = dir / "ok.safetensors";
  // Unknown entry fields are ignored, null metadata is none, entries in any order, unpadded
  // header, whitespace, bytes past "1" in a BOOL read as true.
  write_bytes(path, file_bytes(R"( { "b" : {"data_offsets":[3,5],"shape":[2],"dtype":"BOOL","extra":[1]},)"
                               R"("__metadata__":null, "a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                               R"("e":{"dtype":"F32","shape":[0,2],"data_offsets":[3,3]}} )",
                               std::string("\x01\x02\x03\x00\x07", 5)));
  st::Reader reader(path);
  const auto& tensors = reader.header().tensors;
  DOCTEST_REQUIRE(tensors.size() == 3);
  DOCTEST_CHECK(tensors[0].name == "a");
  DOCTEST_CHECK(tensors[1].name == "e");  // [3, 3] sorts before [3, 5]
  DOCTEST_CHECK(tensors[2].name == "b");
  DOCTEST_CHECK(reader.header().metadata.empty());
  DOCTEST_CHECK(same(reader.load("a"), torch::tensor({1, 2, 3}, torch::kUInt8)));
  DOCTEST_CHECK(same(reader.load("b"), torch::tensor({false, true})));
  DOCTEST_CHECK(reader.load("e").sizes() == torch::IntArrayRef({0, 2}));
  write_bytes(path, file_bytes(R"({"__metadata__":{}})"));
  DOCTEST_CHECK(st::load(path).empty());
}

DOCTEST_TEST_CASE("missing tensors, missing files and files changed after opening") {
  TempDir dir;
  const auto path = dir / "one.safetensors";
  st::save(path, torch::ones({3}));
  st::Reader reader(path);
  DOCTEST_CHECK(!reader.contains("other"));
  DOCTEST_CHECK(error_of([&] { (void)reader.load("other"); }) ==
                "tracetorch: " + path.string() + ": no tensor \"other\"");
  DOCTEST_CHECK(error_of([&] { (void)st::load_single(path, "input_ids"); }) ==
                "tracetorch: " + path.string() + ": no tensor \"input_ids\"");

  const std::string missing = error_of([&] { st::Reader r(dir / "absent.safetensors"); });
  DOCTEST_CHECK(missing.find("absent.safetensors: cannot open: No such file or directory") != std::string::npos);
  // Not a regular file: refused before it is opened for reading (detail/read_file.hpp; the FIFO
  // case, which would block, is in test_reliability.cpp).
  DOCTEST_CHECK(error_of([&] { st::Reader r(dir.path()); }) == "tracetorch: " + dir.path().string() + ": is a directory, not a file");
  DOCTEST_CHECK(error_of([&] { st::Reader r("/dev/null"); }) ==
                "tracetorch: /dev/null: is a character device, not a regular file: refused");

  fs::resize_file(path, fs::file_size(path) - 4);
  const std::string changed = error_of([&] { (void)reader.load("data"); });
  DOCTEST_CHECK(changed.find(path.string() + ": file changed since its header was read") != std::string::npos);
}

DOCTEST_TEST_CASE("parse_header is pure and total on hostile bytes") {
  const std::string good = read_bytes(kTinyLlama / "input_ids.safetensors");
  const auto as_span = [](const std::string& s) {
    return std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  const auto header = st::parse_header(as_span(good), good.size(), "input_ids.safetensors");
  DOCTEST_REQUIRE(header.tensors.size() == 1);
  DOCTEST_CHECK(header.tensors[0].name == "input_ids");
  DOCTEST_CHECK(header.tensors[0].shape == std::vector<int64_t>{2, 7});
  DOCTEST_CHECK(header.data_start == 80);

  // Only the first 8 + N bytes are needed; fewer is the caller's mistake, still an Error.
  DOCTEST_CHECK_NOTHROW(st::parse_header(as_span(good.substr(0, 80)), good.size(), "f"));
  DOCTEST_CHECK(error_of([&] { st::parse_header(as_span(good.substr(0, 40)), good.size(), "f"); })
                    .find("needs the file's first 80 bytes") != std::string::npos);

  // Every truncation, and many random corruptions: a header or an Error, nothing else.
  for (std::size_t size = 0; size < good.size(); ++size) {
    const std::string cut = good.substr(0, size);
    DOCTEST_CHECK_THROWS_AS(st::parse_header(as_span(cut), cut.size(), "f"), tracetorch::Error);
  }
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const std::size_t at = rng() % (round % 2 ? 80 : bytes.size());  // mostly hit the header
      bytes[at] = static_cast<char>(rng() % 3 == 0 ? "{}[]\",:0-9e."[rng() % 13] : rng());
    }
    try {
      (void)st::parse_header(as_span(bytes), bytes.size(), "f");
      ++accepted;
    } catch (const tracetorch::Error&) {
    }
  }
  DOCTEST_CHECK(accepted > 0);  // data-byte flips keep the header valid
}

}  // DOCTEST_TEST_SUITE
