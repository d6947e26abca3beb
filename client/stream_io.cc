// The SDK's ready-made StreamSources and StreamSinks (tensorops/client.h):
// files read and written by offset (pread/pwrite, so constant memory
// whatever the tensor's size) and callbacks.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensorops/client.h"

namespace tensorops {
inline namespace client_v1 {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

int64_t ElementBytes(DataType dtype, const std::vector<int64_t>& shape) {
  int64_t n = DataTypeWidth(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

// Thread-compatible (StreamSource's contract).
class FileSourceImpl final : public StreamSource {
 public:
  FileSourceImpl(std::string path, int fd, int64_t offset, DataType dtype,
                 std::vector<int64_t> shape)
      : path_(std::move(path)), fd_(fd), offset_(offset), dtype_(dtype), shape_(std::move(shape)) {}
  ~FileSourceImpl() override { ::close(fd_); }
  DataType dtype() const override { return dtype_; }
  std::vector<int64_t> shape() const override { return shape_; }
  absl::Status Read(int64_t offset, int64_t n, char* out) override {
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, static_cast<size_t>(n), offset_ + offset);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Errno("cannot read", path_);
      if (got == 0) return absl::OutOfRangeError(absl::StrCat(path_, " ends early"));
      out += got;
      offset += got;
      n -= got;
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  const int fd_;
  const int64_t offset_;
  const DataType dtype_;
  const std::vector<int64_t> shape_;
};

// Thread-compatible (StreamSink's contract).
class FileSinkImpl final : public StreamSink {
 public:
  FileSinkImpl(std::string path, PrefixFn make_prefix)
      : path_(std::move(path)), make_prefix_(std::move(make_prefix)) {}
  ~FileSinkImpl() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Start(DataType dtype, const std::vector<int64_t>& shape, int64_t bytes) override {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Errno("cannot create", path_);
    const std::string prefix = make_prefix_ ? make_prefix_(dtype, shape) : std::string();
    base_ = static_cast<int64_t>(prefix.size());
    if (!prefix.empty()) {
      if (absl::Status s = Write(-base_, prefix); !s.ok()) return s;
    }
    // The whole length at once: pieces land at any offset.
    if (::ftruncate(fd_, base_ + bytes) != 0) return Errno("cannot size", path_);
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    const char* p = data.data();
    int64_t n = static_cast<int64_t>(data.size());
    int64_t at = base_ + offset;
    while (n > 0) {
      const ssize_t put = ::pwrite(fd_, p, static_cast<size_t>(n), at);
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) return Errno("cannot write", path_);
      p += put;
      at += put;
      n -= put;
    }
    return absl::OkStatus();
  }
  absl::Status Finish() override {
    const int fd = fd_;
    fd_ = -1;
    if (fd >= 0 && ::close(fd) != 0) return Errno("cannot close", path_);
    return absl::OkStatus();
  }
  void Discard() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
  }

 private:
  const std::string path_;
  const PrefixFn make_prefix_;
  int fd_ = -1;
  int64_t base_ = 0;
};

// Thread-compatible (StreamSource's contract).
class CallbackSourceImpl final : public StreamSource {
 public:
  CallbackSourceImpl(DataType dtype, std::vector<int64_t> shape,
                     std::function<absl::Status(int64_t, int64_t, char*)> read)
      : dtype_(dtype), shape_(std::move(shape)), read_(std::move(read)) {}
  DataType dtype() const override { return dtype_; }
  std::vector<int64_t> shape() const override { return shape_; }
  absl::Status Read(int64_t offset, int64_t n, char* out) override { return read_(offset, n, out); }

 private:
  const DataType dtype_;
  const std::vector<int64_t> shape_;
  const std::function<absl::Status(int64_t, int64_t, char*)> read_;
};

// Thread-compatible (StreamSink's contract).
class CallbackSinkImpl final : public StreamSink {
 public:
  CallbackSinkImpl(std::function<absl::Status(int64_t, absl::string_view)> write,
                   std::function<void()> discard)
      : write_(std::move(write)), discard_(std::move(discard)) {}
  absl::Status Start(DataType, const std::vector<int64_t>&, int64_t) override {
    return absl::OkStatus();
  }
  absl::Status Write(int64_t offset, absl::string_view data) override {
    return write_(offset, data);
  }
  void Discard() override {
    if (discard_) discard_();
  }

 private:
  const std::function<absl::Status(int64_t, absl::string_view)> write_;
  const std::function<void()> discard_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StreamSource>> FileSource(const std::string& path, int64_t offset,
                                                         DataType dtype,
                                                         std::vector<int64_t> shape) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size < offset + ElementBytes(dtype, shape)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds fewer than ", offset + ElementBytes(dtype, shape), " bytes"));
  }
  return std::unique_ptr<StreamSource>(
      new FileSourceImpl(path, fd, offset, dtype, std::move(shape)));
}

std::unique_ptr<StreamSink> FileSink(const std::string& path, PrefixFn make_prefix) {
  return std::make_unique<FileSinkImpl>(path, std::move(make_prefix));
}

std::unique_ptr<StreamSource> CallbackSource(
    DataType dtype, std::vector<int64_t> shape,
    std::function<absl::Status(int64_t offset, int64_t n, char* out)> read) {
  return std::make_unique<CallbackSourceImpl>(dtype, std::move(shape), std::move(read));
}

std::unique_ptr<StreamSink> CallbackSink(
    std::function<absl::Status(int64_t offset, absl::string_view data)> write,
    std::function<void()> discard) {
  return std::make_unique<CallbackSinkImpl>(std::move(write), std::move(discard));
}

}  // namespace client_v1
}  // namespace tensorops
