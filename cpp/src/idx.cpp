// idx.cpp: the MNIST IDX files, checked before LibTorch reads them. LibTorch's MNIST reader checks magic
// numbers and sizes but silently accepts a truncated image file, and it allocates before it looks: check each
// file's header against its size. Same checks, order and messages as phasebench/data.py's check_split.
#include "data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace phasebench {

namespace {

int64_t check_idx(const std::string& path, uint32_t magic) {
  std::error_code error;
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, error));
  if (error) throw std::runtime_error(path + ": cannot read (" + error.message() + ")");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error(path + ": cannot read (" + std::strerror(errno) + ")");
  const int header_size = magic == 2051 ? 16 : 8;
  if (size < header_size)
    throw std::runtime_error(path + ": " + std::to_string(size) + " bytes, shorter than the " +
                             std::to_string(header_size) + "-byte IDX header");
  unsigned char header[16];
  file.read(reinterpret_cast<char*>(header), header_size);
  auto word = [&](int i) {
    return (uint32_t(header[4 * i]) << 24) | (uint32_t(header[4 * i + 1]) << 16) |
           (uint32_t(header[4 * i + 2]) << 8) | uint32_t(header[4 * i + 3]);
  };
  if (word(0) != magic)
    throw std::runtime_error(path + ": IDX magic " + std::to_string(word(0)) + ", expected " +
                             std::to_string(magic));
  const int64_t count = word(1);
  int64_t item_size = 1;
  if (magic == 2051) {
    if (word(2) != kImageSide || word(3) != kImageSide)
      throw std::runtime_error(path + ": images are " + std::to_string(word(2)) + "x" +
                               std::to_string(word(3)) + ", expected 28x28");
    item_size = kImageSide * kImageSide;
  }
  if (size != header_size + count * item_size)
    throw std::runtime_error(path + ": header claims " + std::to_string(count) + " items (" +
                             std::to_string(header_size + count * item_size) +
                             " bytes) but the file has " + std::to_string(size) + " bytes");
  return count;
}

// A label outside 0-9 would pass LibTorch's reader and fail training later ("Target 200 is out of
// bounds."): the first one is named with its index. Call after check_idx has checked the size.
void check_labels(const std::string& path, int64_t count) {
  std::ifstream file(path, std::ios::binary);
  std::vector<unsigned char> labels(static_cast<size_t>(count));
  file.seekg(8);
  if (!file.read(reinterpret_cast<char*>(labels.data()), count))
    throw std::runtime_error(path + ": cannot read (" + std::strerror(errno) + ")");
  const auto bad = std::find_if(labels.begin(), labels.end(), [](unsigned char label) { return label > 9; });
  if (bad != labels.end())
    throw std::runtime_error(path + ": label " + std::to_string(*bad) + " at index " +
                             std::to_string(bad - labels.begin()) + " is outside 0–9");
}

}  // namespace

torch::data::datasets::MNIST load_mnist(const std::string& root, bool train) {
  const std::string prefix = root + (train ? "/train" : "/t10k");
  const int64_t expected = train ? 60000 : 10000;
  const int64_t images = check_idx(prefix + "-images-idx3-ubyte", 2051);
  const int64_t labels = check_idx(prefix + "-labels-idx1-ubyte", 2049);
  if (images != labels)
    throw std::runtime_error(prefix + "-labels-idx1-ubyte: " + std::to_string(labels) +
                             " labels for " + std::to_string(images) + " images");
  if (images != expected)
    throw std::runtime_error(prefix + "-images-idx3-ubyte: " + std::to_string(images) +
                             " images; the workload needs the full split of " + std::to_string(expected) +
                             " (LibTorch's MNIST reads no other size)");
  check_labels(prefix + "-labels-idx1-ubyte", labels);
  using Mode = torch::data::datasets::MNIST::Mode;
  return torch::data::datasets::MNIST(root, train ? Mode::kTrain : Mode::kTest);
}

}  // namespace phasebench
