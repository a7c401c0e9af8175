// A user's JPEGs in an ImageFolder tree: DIR/<class>/<image>.jpg, classes in name order.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/errors.h"
#include "base/input_file.h"
#include "input/image_set.h"
#include "input/manifest.h"
#include "input/shard_format.h"

namespace ringbench::input {

std::unique_ptr<ImageSet> open_packed_set(const std::string& dir);

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxFolderImages = size_t(20) << 20;

bool is_jpeg_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg";
}

std::vector<fs::path> sorted_entries(const fs::path& dir, bool want_dirs) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_ec;
    if (want_dirs ? it->is_directory(type_ec) : (it->is_regular_file(type_ec) && is_jpeg_name(it->path())))
      out.push_back(it->path());
  }
  if (ec) throw Error(dir.string() + ": cannot list it: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

class FolderSet : public ImageSet {
 public:
  explicit FolderSet(const std::string& dir) {
    const std::vector<fs::path> classes = sorted_entries(dir, true);
    if (classes.empty())
      throw Error(dir + ": no " + kManifestName + " and no class subfolders: give a set made by `ringbench data make` "
                  "or a folder with one subfolder of JPEGs per class");
    if (classes.size() > kMaxClasses) throw Error(dir + ": more than " + std::to_string(kMaxClasses) + " classes");
    classes_ = uint32_t(classes.size());
    for (uint32_t c = 0; c < classes_; ++c)
      for (const fs::path& f : sorted_entries(classes[c], false)) {
        if (files_.size() >= kMaxFolderImages)
          throw Error(dir + ": more than " + std::to_string(kMaxFolderImages) + " images");
        files_.push_back(f.string());
        labels_.push_back(c);
      }
    if (files_.empty()) throw Error(dir + ": its " + std::to_string(classes_) + " class folders hold no .jpg or .jpeg file");
  }

  size_t size() const override { return files_.size(); }
  uint32_t classes() const override { return classes_; }
  uint32_t label(size_t i) const override { return labels_[i]; }
  std::vector<size_t> rank_records(int rank, int n) const override {
    std::vector<size_t> out;
    for (size_t i = size_t(rank); i < files_.size(); i += size_t(n)) out.push_back(i);
    return out;
  }
  size_t rank_record_count(int rank, int n) const override {
    return files_.size() > size_t(rank) ? (files_.size() - size_t(rank) + size_t(n) - 1) / size_t(n) : 0;
  }
  std::vector<std::string> unreadable_shards(int, int) const override { return {}; }
  std::string read(size_t i) const override { return read_input_file(files_[i], "the image", kMaxRecordBytes); }
  std::string name(size_t i) const override { return files_[i]; }
  std::string describe() const override {
    return "image folder, " + std::to_string(files_.size()) + " images, " + std::to_string(classes_) + " classes";
  }

 private:
  std::vector<std::string> files_;
  std::vector<uint32_t> labels_;
  uint32_t classes_ = 0;
};

}  // namespace

std::unique_ptr<ImageSet> open_image_set(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(dir + ": not a directory (an image set is a directory)");
  std::error_code ec;
  if (fs::exists(fs::path(dir) / kManifestName, ec)) return open_packed_set(dir);
  return std::make_unique<FolderSet>(dir);
}

}  // namespace ringbench::input
