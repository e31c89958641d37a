// tracetorch/safetensors.hpp's reader (detail/safetensors/format.hpp, safetensors_file.hpp): a
// refusal (tracetorch::Error naming the file and the cause) for each kind of malformed file, what
// the reference loader accepts, and parse_header on hostile bytes.

#include "tracetorch/safetensors.hpp"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "safetensors_helpers.hpp"

#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace st = tracetorch::safetensors;

// Inside the helpers' namespace: TempDir, error_of, check_refused, ... are found there first.
namespace tracetorch_test::safetensors_files {

DOCTEST_TEST_SUITE("safetensors") {

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
  // Not a regular file: refused before it is opened for reading (detail/fs/read_file.hpp; the FIFO
  // case, which would block, is in test_reliability_reading.cpp).
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

}  // namespace tracetorch_test::safetensors_files
