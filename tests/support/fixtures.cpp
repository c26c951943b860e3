#include "support/fixtures.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <gtest/gtest.h>

#include "support/sha256.hpp"

namespace torchport::test {

std::filesystem::path fixture(const std::string& relative) {
  return std::filesystem::path(TORCHPORT_FIXTURES_DIR) / relative;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return nlohmann::json::parse(in);
}

std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

void write_bytes(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string tensor_sha256(const Tensor& t) {
  const Tensor c = t.contiguous();
  return sha256_hex(c.bytes());
}

std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("torchport-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

std::string python() {
  const char* env = std::getenv("TORCHPORT_PYTHON");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(TORCHPORT_PYTHON);
}

int run_command(const std::string& command, std::string* output) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  if (output) *output = std::move(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

void expect_tensors(const TensorCatalog& cat, const nlohmann::json& want) {
  ASSERT_EQ(cat.size(), want["tensors"].size());
  for (std::size_t i = 0; i < cat.size(); ++i) {
    const auto& t = cat.tensors()[i];
    const auto& w = want["tensors"][i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, w["name"].get<std::string>());
    EXPECT_EQ(dtype_name(t.tensor.dtype()), w["dtype"].get<std::string>());
    EXPECT_EQ(t.tensor.shape(), w["shape"].get<Shape>());
    EXPECT_EQ(tensor_sha256(t.tensor), w["sha256"].get<std::string>());
  }
  if (want.contains("shared"))
    for (const auto& group : want["shared"]) {
      const Tensor* first = cat.find(group[0].get<std::string>());
      ASSERT_NE(first, nullptr);
      for (const auto& n : group) {
        const Tensor* t = cat.find(n.get<std::string>());
        ASSERT_NE(t, nullptr) << n;
        EXPECT_EQ(t->storage().get(), first->storage().get()) << n << " should share storage";
      }
    }
}

std::vector<BadCase> bad_cases(const std::filesystem::path& expected_json) {
  std::vector<BadCase> out;
  for (const auto& c : read_json(expected_json))
    out.push_back({c["file"], c["code"], c["message"]});
  return out;
}

std::string param_name(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return text;
}

}  // namespace torchport::test
