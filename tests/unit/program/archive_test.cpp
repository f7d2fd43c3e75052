// The archive reader under hostile sizes (issue 28 defects 8 and 9): a zip bomb, a directory that
// overstates or misstates an entry's size, a metadata entry over the limit -- each refused before
// memory is allocated for it, naming the entry and the sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "compiler/program/archive.h"
#include "tests/unit/program/test_archives.h"

namespace weft::program {
namespace {

using testing::ReadFile;
using testing::TempPath;
using testing::WriteFile;
using testing::WriteZip;

std::string ErrorOf(const std::string& path, const std::string& entry) {
  try {
    Archive::Open(path).Read(entry);
  } catch (const ProgramError& e) {
    return e.what();
  }
  return "(no error)";
}

// Sets the uncompressed size of the (only) entry named `name` in both its local header and the
// central directory, as a hand-edited archive would.
void PatchDeclaredSize(std::string& zip, const std::string& name, uint32_t size) {
  for (const auto& [signature, size_at] : {std::pair<uint32_t, size_t>{0x04034b50, 22}, {0x02014b50, 24}}) {
    const size_t name_at = signature == 0x04034b50 ? 30 : 46;
    for (size_t at = 0; at + name_at + name.size() <= zip.size(); ++at) {
      uint32_t sig;
      std::memcpy(&sig, zip.data() + at, 4);
      if (sig == signature && zip.compare(at + name_at, name.size(), name) == 0) {
        std::memcpy(zip.data() + at + size_at, &size, 4);
        break;
      }
    }
  }
}

class ArchiveLimitsTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("WEFT_PROGRAM_MAX_JSON_BYTES"); }
};

TEST_F(ArchiveLimitsTest, ZipBombMetadataIsRefusedBeforeInflating) {
  // 16 MiB of spaces deflate to ~16 KB; with the limit at 1 MiB it is refused by its declared size.
  const std::string path = TempPath("bomb.pt2");
  WriteZip(path, {{"archive/models/model.json", std::string(16u << 20, ' ')}});
  setenv("WEFT_PROGRAM_MAX_JSON_BYTES", "1048576", 1);
  EXPECT_EQ(ErrorOf(path, "models/model.json"),
            path + ": entry `archive/models/model.json` inflates to 16.0 MiB, more than the 1.0 MiB weft reads of a "
                   "program's metadata (reading costs about 12 bytes of memory per byte; WEFT_PROGRAM_MAX_JSON_BYTES "
                   "raises the limit)");
  unsetenv("WEFT_PROGRAM_MAX_JSON_BYTES");
  EXPECT_EQ(Archive::Open(path).Read("models/model.json").size(), 16u << 20);
  setenv("WEFT_PROGRAM_MAX_JSON_BYTES", "lots", 1);
  EXPECT_EQ(ErrorOf(path, "models/model.json"), "WEFT_PROGRAM_MAX_JSON_BYTES=`lots` is not a positive number of bytes");
}

TEST_F(ArchiveLimitsTest, DeclaredSizeBeyondWhatDeflateCanGiveIsRefused) {
  const std::string path = TempPath("declares_4g.pt2");
  WriteZip(path, {{"archive/data/weights/weight_0", std::string(1u << 20, 'x')}});
  std::string zip = ReadFile(path);
  PatchDeclaredSize(zip, "archive/data/weights/weight_0", 0xF0000000u);
  WriteFile(path, zip);
  const std::string error = ErrorOf(path, "data/weights/weight_0");
  EXPECT_EQ(error.rfind(path + ": entry `archive/data/weights/weight_0`: declares 4026531840 bytes from ", 0), 0u) << error;
  EXPECT_NE(error.find(" compressed bytes, more than deflate can give (the archive's directory is corrupted)"),
            std::string::npos)
      << error;
}

TEST_F(ArchiveLimitsTest, OverstatedSizeCostsOnlyTheRealDataAndIsNamed) {
  // Deflatable data whose declared size is 8x the real one (within deflate's ratio): read as it
  // inflates, then refused as short.
  const std::string path = TempPath("overstated.pt2");
  std::string data;
  for (int i = 0; i < 200000; ++i) data += std::to_string(i * 7919 % 100003) + ",";
  WriteZip(path, {{"archive/extra/weft.json", data}});
  std::string zip = ReadFile(path);
  PatchDeclaredSize(zip, "archive/extra/weft.json", static_cast<uint32_t>(data.size() * 8));
  WriteFile(path, zip);
  const std::string error = ErrorOf(path, "extra/weft.json");
  EXPECT_EQ(error.rfind(path + ": entry `archive/extra/weft.json`: ", 0), 0u) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;
}

}  // namespace
}  // namespace weft::program
